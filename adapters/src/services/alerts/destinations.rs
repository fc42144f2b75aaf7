//! Alert destinations: e-mail (through `SMTP_URL`), Slack (an incoming webhook),
//! a webhook signed as Standard Webhooks says, PagerDuty (Events API v2). What is
//! secret (a URL with its token, a routing key, a signing secret) is sealed under
//! the organization's key and never answered back: only a hint. Sending one
//! notice to one destination is `send`; the delivery worker calls `deliver`, the
//! test action `test`.

use std::time::Instant;

use base64::Engine as _;
use serde_json::json;

use super::*;
use crate::config::Config;
use crate::keys::Binding;
use crate::keys::Keyring;
use crate::services::delivery::{resolve_webhook, send_mail, Outcome};
use crate::services::keys;
use crate::services::notifications::WEBHOOK_TIMEOUT;
use crate::storage::{unit_of_work, AlertTable, ClaimedDelivery, DestinationRow, Store};

/// The most addresses an e-mail destination holds.
pub const MAX_ADDRESSES: usize = 20;
/// The most destinations an organization holds.
pub const MAX_DESTINATIONS: u64 = 100;

/// A destination's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DestinationKind {
    /// Mail through `SMTP_URL`.
    Email,
    /// A Slack incoming webhook.
    Slack,
    /// A webhook signed as Standard Webhooks says.
    Webhook,
    /// PagerDuty's Events API v2.
    Pagerduty,
}

impl DestinationKind {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            DestinationKind::Email => "email",
            DestinationKind::Slack => "slack",
            DestinationKind::Webhook => "webhook",
            DestinationKind::Pagerduty => "pagerduty",
        }
    }

    fn parse(text: &str) -> Option<DestinationKind> {
        [
            DestinationKind::Email,
            DestinationKind::Slack,
            DestinationKind::Webhook,
            DestinationKind::Pagerduty,
        ]
        .into_iter()
        .find(|k| k.name() == text)
    }
}

/// A destination as a request writes it. On a change, secret fields left out keep
/// the stored secret (the kind unchanged).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DestinationBody {
    /// Its name (unique in the organization).
    pub name: String,
    /// Its kind.
    pub kind: DestinationKind,
    /// `email`: 1 to 20 addresses.
    #[serde(default)]
    pub addresses: Option<Vec<String>>,
    /// `slack` and `webhook`: where to post (the webhook address rule applies).
    #[serde(default)]
    pub url: Option<String>,
    /// `webhook`: the signing secret (`whsec_` and the base64 of 24 to 64 bytes);
    /// made and answered once when left out.
    #[serde(default)]
    pub signing_secret: Option<String>,
    /// `pagerduty`: the integration's routing key.
    #[serde(default)]
    pub routing_key: Option<String>,
    /// `PUT`: the version read; another is 409.
    #[serde(default)]
    pub version: Option<i64>,
}

/// What a destination keeps secret.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Secret {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    signing_secret: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    routing_key: Option<String>,
}

/// What a destination shows of itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Settings {
    #[serde(default)]
    addresses: Vec<String>,
    #[serde(default)]
    host: Option<String>,
    #[serde(default)]
    hint: Option<String>,
}

/// A destination as answered (never its secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Destination {
    /// Its id.
    pub id: String,
    /// Its organization.
    pub org_id: String,
    /// Its name.
    pub name: String,
    /// Its kind.
    pub kind: DestinationKind,
    /// `email`: its addresses.
    pub addresses: Vec<String>,
    /// `slack`, `webhook`: the host posted to.
    pub host: Option<String>,
    /// The secret's last four characters.
    pub hint: Option<String>,
    /// The version a change must carry.
    pub version: i64,
    /// The signing secret, answered once: when the server made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signing_secret: Option<String>,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

fn binding(row: &DestinationRow) -> Binding<'_> {
    Binding {
        org_id: &row.org_id,
        table: "alert_destinations",
        column: "secret",
        row_id: &row.id,
    }
}

fn settings_of(row: &DestinationRow) -> ServiceResult<(DestinationKind, Settings)> {
    let kind = DestinationKind::parse(&row.kind).ok_or_else(|| {
        ServiceError::Broken(format!(
            "alert_destinations `{}`: unknown kind `{}`",
            row.id, row.kind
        ))
    })?;
    let settings: Settings = serde_json::from_value(row.settings.clone()).map_err(|e| {
        ServiceError::Broken(format!(
            "alert_destinations `{}`: the settings do not decode: {e}",
            row.id
        ))
    })?;
    Ok((kind, settings))
}

fn destination_answer(
    row: DestinationRow,
    made_secret: Option<String>,
) -> ServiceResult<Destination> {
    let (kind, settings) = settings_of(&row)?;
    Ok(Destination {
        id: row.id,
        org_id: row.org_id,
        name: row.name,
        kind,
        addresses: settings.addresses,
        host: settings.host,
        hint: settings.hint,
        version: row.version,
        signing_secret: made_secret,
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}

fn hint(secret: &str) -> String {
    let tail: Vec<char> = secret.chars().rev().take(4).collect();
    format!("…{}", tail.into_iter().rev().collect::<String>())
}

async fn checked_url(config: &Config, url: Option<&str>) -> ServiceResult<(String, String)> {
    let url = url.ok_or_else(|| ServiceError::invalid("url", "is required for this kind"))?;
    if url.len() > 2048 {
        return Err(ServiceError::invalid("url", "at most 2048 characters"));
    }
    let (parsed, _) = resolve_webhook(url, config.notifications.allow_private)
        .await
        .map_err(|why| ServiceError::invalid("url", why))?;
    Ok((
        url.to_owned(),
        parsed.host_str().unwrap_or_default().to_owned(),
    ))
}

fn check_signing_secret(secret: &str) -> ServiceResult<()> {
    let bytes = secret
        .strip_prefix("whsec_")
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
    match bytes {
        Some(b) if (24..=64).contains(&b.len()) => Ok(()),
        _ => Err(ServiceError::invalid(
            "signingSecret",
            "must be `whsec_` and the base64 of 24 to 64 bytes",
        )),
    }
}

/// Checks a body; the settings, the secret (when the body gives one) and a signing
/// secret the server made.
async fn check_destination(
    config: &Config,
    body: &DestinationBody,
    keep: Option<&Secret>,
) -> ServiceResult<(String, Settings, Option<Secret>, Option<String>)> {
    let name = filter_text("name", &body.name, 200)?;
    let mut settings = Settings::default();
    let mut made = None;
    let stray = |field: &'static str| {
        Err(ServiceError::invalid(
            field,
            format!("is not a field of a {} destination", body.kind.name()),
        ))
    };
    let secret = match body.kind {
        DestinationKind::Email => {
            if body.url.is_some() {
                return stray("url");
            }
            if body.signing_secret.is_some() {
                return stray("signingSecret");
            }
            if body.routing_key.is_some() {
                return stray("routingKey");
            }
            let addresses = body.addresses.clone().unwrap_or_default();
            if addresses.is_empty() || addresses.len() > MAX_ADDRESSES {
                return Err(ServiceError::invalid(
                    "addresses",
                    format!("1 to {MAX_ADDRESSES} addresses"),
                ));
            }
            for a in &addresses {
                if a.len() > 254 || a.parse::<lettre::Address>().is_err() {
                    return Err(ServiceError::invalid(
                        "addresses",
                        format!(
                            "`{}` is not an e-mail address",
                            a.chars().take(80).collect::<String>()
                        ),
                    ));
                }
            }
            settings.addresses = addresses;
            None
        }
        DestinationKind::Slack | DestinationKind::Webhook => {
            if body.addresses.is_some() {
                return stray("addresses");
            }
            if body.routing_key.is_some() {
                return stray("routingKey");
            }
            if body.kind == DestinationKind::Slack && body.signing_secret.is_some() {
                return stray("signingSecret");
            }
            if let Some(s) = &body.signing_secret {
                check_signing_secret(s)?;
            }
            let mut secret = match (&body.url, keep) {
                (None, Some(kept)) if kept.url.is_some() => kept.clone(),
                (_, Some(kept)) => Secret {
                    url: None,
                    ..kept.clone()
                },
                _ => Secret::default(),
            };
            let (url, host) =
                checked_url(config, body.url.as_deref().or(secret.url.as_deref())).await?;
            settings.host = Some(host);
            settings.hint = Some(hint(&url));
            secret.url = Some(url);
            if body.kind == DestinationKind::Webhook {
                match &body.signing_secret {
                    Some(s) => secret.signing_secret = Some(s.clone()),
                    None if secret.signing_secret.is_some() => {}
                    None => {
                        let bytes: [u8; 32] = crate::services::accounts::random()?;
                        let s = format!(
                            "whsec_{}",
                            base64::engine::general_purpose::STANDARD.encode(bytes)
                        );
                        secret.signing_secret = Some(s.clone());
                        made = Some(s);
                    }
                }
            }
            Some(secret)
        }
        DestinationKind::Pagerduty => {
            if body.addresses.is_some() {
                return stray("addresses");
            }
            if body.url.is_some() {
                return stray("url");
            }
            if body.signing_secret.is_some() {
                return stray("signingSecret");
            }
            let key = match (&body.routing_key, keep) {
                (Some(k), _) => k.clone(),
                (
                    None,
                    Some(Secret {
                        routing_key: Some(k),
                        ..
                    }),
                ) => k.clone(),
                (None, _) => {
                    return Err(ServiceError::invalid(
                        "routingKey",
                        "is required for pagerduty",
                    ))
                }
            };
            if !(1..=64).contains(&key.len()) || !key.chars().all(|c| c.is_ascii_alphanumeric()) {
                return Err(ServiceError::invalid(
                    "routingKey",
                    "1 to 64 letters and digits (the integration's key)",
                ));
            }
            settings.hint = Some(hint(&key));
            Some(Secret {
                routing_key: Some(key),
                ..Secret::default()
            })
        }
    };
    Ok((name, settings, secret, made))
}

fn destination_taken(error: crate::storage::StoreError, name: &str) -> ServiceError {
    match error {
        crate::storage::StoreError::Conflict(_) => {
            ServiceError::Conflict(format!("the organization has a destination named `{name}`"))
        }
        other => other.into(),
    }
}

async fn seal_secret(
    store: &Store,
    config: &Config,
    keyring: &Keyring,
    row: &DestinationRow,
    secret: Option<&Secret>,
) -> ServiceResult<Option<String>> {
    match secret {
        None => Ok(None),
        Some(s) => {
            let text = serde_json::to_string(s).map_err(|e| ServiceError::Broken(e.to_string()))?;
            Ok(Some(
                keys::seal(store, config, keyring, binding(row), &text).await?,
            ))
        }
    }
}

async fn open_secret(
    store: &Store,
    config: &Config,
    keyring: &Keyring,
    row: &DestinationRow,
) -> ServiceResult<Secret> {
    match &row.secret {
        None => Ok(Secret::default()),
        Some(stored) => {
            let text = keys::open(store, config, keyring, binding(row), stored).await?;
            serde_json::from_str(&text).map_err(|e| {
                ServiceError::Broken(format!(
                    "alert_destinations `{}`: the secret does not decode: {e}",
                    row.id
                ))
            })
        }
    }
}

/// The organization's destinations.
pub async fn destinations(store: &Store, org: &OrgRecord) -> ServiceResult<Vec<Destination>> {
    store
        .alert_destinations(&org.id)
        .await?
        .into_iter()
        .map(|r| destination_answer(r, None))
        .collect()
}

async fn destination_row(
    store: &Store,
    org: &OrgRecord,
    id: &str,
) -> ServiceResult<DestinationRow> {
    store
        .alert_destination(&org.id, id)
        .await?
        .ok_or_else(|| ServiceError::NotFound("alert destination".into()))
}

/// One destination.
pub async fn destination(store: &Store, org: &OrgRecord, id: &str) -> ServiceResult<Destination> {
    destination_answer(destination_row(store, org, id).await?, None)
}

/// Makes a destination (`alert.destination.create`); a signing secret the server
/// made is answered this once.
pub async fn create_destination(
    store: &Store,
    config: &Config,
    keyring: &Keyring,
    caller: &Caller,
    org: &OrgRecord,
    body: &DestinationBody,
    now: DateTime<Utc>,
) -> ServiceResult<Destination> {
    let (name, settings, secret, made) = check_destination(config, body, None).await?;
    let mut row = DestinationRow {
        id: new_id(),
        org_id: org.id.clone(),
        name: name.clone(),
        kind: body.kind.name().to_owned(),
        settings: to_json(&settings)?,
        secret: None,
        version: 1,
        created_at: now,
        updated_at: now,
    };
    row.secret = seal_secret(store, config, keyring, &row, secret.as_ref()).await?;
    unit_of_work!(store, |tx| {
        tx.lock_organization(&org.id).await?;
        if tx
            .count_alert_rows(AlertTable::Destinations, &org.id)
            .await?
            >= MAX_DESTINATIONS
        {
            return Err(ServiceError::Conflict(format!(
                "the organization has {MAX_DESTINATIONS} alert destinations, the most it may hold"
            )));
        }
        tx.insert_alert_destination(&row)
            .await
            .map_err(|e| destination_taken(e, &name))?;
        tx.enqueue_audit(&[event(
            caller,
            "alert.destination.create",
            &org.id,
            "alert_destination",
            &row.id,
            json!({"name": name, "kind": body.kind.name()}),
        )])
        .await?;
        Ok(())
    })?;
    destination_answer(row, made)
}

/// Changes a destination when `version` is still its version
/// (`alert.destination.update`); secret fields left out keep the stored secret.
pub async fn update_destination(
    store: &Store,
    config: &Config,
    keyring: &Keyring,
    caller: &Caller,
    org: &OrgRecord,
    (id, version): (&str, i64),
    body: &DestinationBody,
    now: DateTime<Utc>,
) -> ServiceResult<Destination> {
    let current = destination_row(store, org, id).await?;
    let stale = || {
        ServiceError::Conflict(format!(
            "the destination changed since version {version} was read: read it again"
        ))
    };
    if current.version != version {
        return Err(stale());
    }
    let kept = if current.kind == body.kind.name() {
        Some(open_secret(store, config, keyring, &current).await?)
    } else {
        None
    };
    let (name, settings, secret, made) = check_destination(config, body, kept.as_ref()).await?;
    let mut row = DestinationRow {
        name: name.clone(),
        kind: body.kind.name().to_owned(),
        settings: to_json(&settings)?,
        version: version + 1,
        updated_at: now,
        ..current
    };
    row.secret = seal_secret(store, config, keyring, &row, secret.as_ref()).await?;
    unit_of_work!(store, |tx| {
        if !tx
            .update_alert_destination(&row, version)
            .await
            .map_err(|e| destination_taken(e, &name))?
        {
            return Err(stale());
        }
        tx.enqueue_audit(&[event(
            caller,
            "alert.destination.update",
            &org.id,
            "alert_destination",
            id,
            json!({"name": name, "kind": body.kind.name(), "version": row.version}),
        )])
        .await?;
        Ok(())
    })?;
    destination_answer(row, made)
}

/// Deletes a destination (`alert.destination.delete`); one a rule sends to is 409
/// naming the rules.
pub async fn delete_destination(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    id: &str,
) -> ServiceResult<()> {
    unit_of_work!(store, |tx| {
        if !tx.lock_alert_destination(&org.id, id).await? {
            return Err(ServiceError::NotFound("alert destination".into()));
        }
        let users = tx.rules_using(id).await?;
        if !users.is_empty() {
            let shown: Vec<String> = users.iter().take(20).map(|n| format!("`{n}`")).collect();
            return Err(ServiceError::Conflict(format!(
                "the destination is used by the alert rules {}{}: take it out of them first",
                shown.join(", "),
                if users.len() > 20 { " and more" } else { "" }
            )));
        }
        tx.delete_alert_destination(&org.id, id).await?;
        tx.enqueue_audit(&[event(
            caller,
            "alert.destination.delete",
            &org.id,
            "alert_destination",
            id,
            json!({}),
        )])
        .await?;
        Ok(())
    })?;
    Ok(())
}

mod sending;

pub use sending::*;
