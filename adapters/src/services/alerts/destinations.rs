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
use crate::keys::Binding;
use crate::services::delivery::{resolve_webhook, send_mail, Outcome};
use crate::services::keys;
use crate::services::notifications::WEBHOOK_TIMEOUT;
use crate::storage::{unit_of_work, AlertTable, ClaimedDelivery, DestinationRow};

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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
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

async fn checked_url(state: &AppState, url: Option<&str>) -> ServiceResult<(String, String)> {
    let url = url.ok_or_else(|| ServiceError::invalid("url", "is required for this kind"))?;
    if url.len() > 2048 {
        return Err(ServiceError::invalid("url", "at most 2048 characters"));
    }
    let (parsed, _) = resolve_webhook(url, state.config.notifications.allow_private)
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
    state: &AppState,
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
                checked_url(state, body.url.as_deref().or(secret.url.as_deref())).await?;
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
    state: &AppState,
    row: &DestinationRow,
    secret: Option<&Secret>,
) -> ServiceResult<Option<String>> {
    match secret {
        None => Ok(None),
        Some(s) => {
            let text = serde_json::to_string(s).map_err(|e| ServiceError::Broken(e.to_string()))?;
            Ok(Some(keys::seal(state, binding(row), &text).await?))
        }
    }
}

async fn open_secret(state: &AppState, row: &DestinationRow) -> ServiceResult<Secret> {
    match &row.secret {
        None => Ok(Secret::default()),
        Some(stored) => {
            let text = keys::open(state, binding(row), stored).await?;
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
pub async fn destinations(state: &AppState, org: &OrgRecord) -> ServiceResult<Vec<Destination>> {
    state
        .store
        .alert_destinations(&org.id)
        .await?
        .into_iter()
        .map(|r| destination_answer(r, None))
        .collect()
}

async fn destination_row(
    state: &AppState,
    org: &OrgRecord,
    id: &str,
) -> ServiceResult<DestinationRow> {
    state
        .store
        .alert_destination(&org.id, id)
        .await?
        .ok_or_else(|| ServiceError::NotFound("alert destination".into()))
}

/// One destination.
pub async fn destination(
    state: &AppState,
    org: &OrgRecord,
    id: &str,
) -> ServiceResult<Destination> {
    destination_answer(destination_row(state, org, id).await?, None)
}

/// Makes a destination (`alert.destination.create`); a signing secret the server
/// made is answered this once.
pub async fn create_destination(
    state: &AppState,
    caller: &Caller,
    org: &OrgRecord,
    body: &DestinationBody,
    now: DateTime<Utc>,
) -> ServiceResult<Destination> {
    let (name, settings, secret, made) = check_destination(state, body, None).await?;
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
    row.secret = seal_secret(state, &row, secret.as_ref()).await?;
    unit_of_work!(&state.store, |tx| {
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
    state: &AppState,
    caller: &Caller,
    org: &OrgRecord,
    (id, version): (&str, i64),
    body: &DestinationBody,
    now: DateTime<Utc>,
) -> ServiceResult<Destination> {
    let current = destination_row(state, org, id).await?;
    let stale = || {
        ServiceError::Conflict(format!(
            "the destination changed since version {version} was read: read it again"
        ))
    };
    if current.version != version {
        return Err(stale());
    }
    let kept = if current.kind == body.kind.name() {
        Some(open_secret(state, &current).await?)
    } else {
        None
    };
    let (name, settings, secret, made) = check_destination(state, body, kept.as_ref()).await?;
    let mut row = DestinationRow {
        name: name.clone(),
        kind: body.kind.name().to_owned(),
        settings: to_json(&settings)?,
        version: version + 1,
        updated_at: now,
        ..current
    };
    row.secret = seal_secret(state, &row, secret.as_ref()).await?;
    unit_of_work!(&state.store, |tx| {
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
    state: &AppState,
    caller: &Caller,
    org: &OrgRecord,
    id: &str,
) -> ServiceResult<()> {
    unit_of_work!(&state.store, |tx| {
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

fn subject(payload: &Value) -> String {
    let text = |k: &str| {
        payload
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let tag = match text("notice").as_str() {
        "resolved" => "RESOLVED",
        "repeat" => "FIRING (repeat)",
        _ => "FIRING",
    };
    let test = if payload.get("test").and_then(Value::as_bool) == Some(true) {
        "[TEST] "
    } else {
        ""
    };
    format!(
        "{test}[{tag}] {}: {} = {} ({} {})",
        text("ruleName"),
        text("metric"),
        payload.get("value").map_or("no data".to_owned(), |v| {
            if v.is_null() {
                "no data".to_owned()
            } else {
                v.to_string()
            }
        }),
        payload
            .get("comparison")
            .and_then(Value::as_str)
            .unwrap_or_default(),
        payload
            .get("threshold")
            .map(Value::to_string)
            .unwrap_or_default(),
    )
}

fn outcome_of(status: u16) -> Outcome {
    match status {
        200..=299 => Outcome::Sent(Some(status)),
        408 | 429 | 500..=599 => {
            Outcome::Failed(Some(status), format!("the receiver answered {status}"))
        }
        _ => Outcome::Rejected(status, format!("the receiver answered {status}")),
    }
}

async fn post(
    state: &AppState,
    url: &str,
    check_address: bool,
    headers: &[(&str, String)],
    body: Vec<u8>,
) -> Outcome {
    let (parsed, address) = if check_address {
        match resolve_webhook(url, state.config.notifications.allow_private).await {
            Ok(resolved) => (resolved.0, Some(resolved.1)),
            Err(why) => return Outcome::Refused(why),
        }
    } else {
        match reqwest::Url::parse(url) {
            Ok(u) => (u, None),
            Err(e) => return Outcome::Refused(format!("not a URL: {e}")),
        }
    };
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(WEBHOOK_TIMEOUT)
        .no_proxy();
    if let Some(address) = address {
        builder = builder.resolve(parsed.host_str().unwrap_or_default(), address);
    }
    if let Some(proxy) = &state.config.notifications.webhook_proxy {
        match reqwest::Proxy::all(proxy) {
            Ok(p) => builder = builder.proxy(p),
            Err(e) => return Outcome::Refused(format!("WEBHOOK_PROXY_URL: {e}")),
        }
    }
    let client = match builder.build() {
        Ok(c) => c,
        Err(e) => return Outcome::Refused(format!("the client: {e}")),
    };
    let mut request = client
        .post(parsed)
        .header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    match request.body(body).send().await {
        Ok(response) => outcome_of(response.status().as_u16()),
        Err(e) if e.is_timeout() => Outcome::Failed(None, "no answer within 10 s".to_owned()),
        Err(e) => Outcome::Failed(None, format!("the request failed: {e}")),
    }
}

/// Sends one notice (`payload`: the notification's, `kind` its kind) to one
/// destination; `only` narrows an e-mail destination to one address (tests).
async fn send(
    state: &AppState,
    (row, secret): (&DestinationRow, &Secret),
    (kind, payload): (&str, &Value),
    only: Option<&str>,
) -> ServiceResult<Outcome> {
    let (destination_kind, settings) = settings_of(row)?;
    let message_id = payload
        .get("messageId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let subject = subject(payload);
    Ok(match destination_kind {
        DestinationKind::Email => {
            let Some(url) = &state.config.notifications.smtp_url else {
                return Ok(Outcome::Skipped("SMTP_URL is not set".to_owned()));
            };
            let recipients: Vec<String> = match only {
                Some(a) => vec![a.to_owned()],
                None => settings.addresses.clone(),
            };
            let text = format!(
                "{subject}\n\n{}\n",
                serde_json::to_string_pretty(payload).unwrap_or_default()
            );
            send_mail(
                state,
                url.expose(),
                &message_id,
                &recipients,
                (&subject, &text),
            )
            .await
        }
        DestinationKind::Slack => {
            let Some(url) = &secret.url else {
                return Ok(Outcome::Refused("the destination has no URL".to_owned()));
            };
            let body = json!({"text": subject}).to_string().into_bytes();
            post(state, url, true, &[], body).await
        }
        DestinationKind::Webhook => {
            let (Some(url), Some(signing)) = (&secret.url, &secret.signing_secret) else {
                return Ok(Outcome::Refused(
                    "the destination has no URL or secret".to_owned(),
                ));
            };
            let body = json!({
                "id": message_id,
                "type": kind,
                "orgId": row.org_id,
                "createdAt": payload.get("at"),
                "title": subject,
                "data": payload,
            })
            .to_string()
            .into_bytes();
            let timestamp = Utc::now().timestamp();
            let signature =
                crate::notify::standard_signature(signing, &message_id, timestamp, &body);
            let headers = [
                ("webhook-id", message_id.clone()),
                ("webhook-timestamp", timestamp.to_string()),
                ("webhook-signature", signature),
            ];
            post(state, url, true, &headers, body).await
        }
        DestinationKind::Pagerduty => {
            let Some(key) = &secret.routing_key else {
                return Ok(Outcome::Refused(
                    "the destination has no routing key".to_owned(),
                ));
            };
            let dedup = payload
                .get("dedupKey")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let resolve = payload.get("notice").and_then(Value::as_str) == Some("resolved");
            let body = if resolve {
                json!({"routing_key": key, "event_action": "resolve", "dedup_key": dedup})
            } else {
                json!({
                    "routing_key": key,
                    "event_action": "trigger",
                    "dedup_key": dedup,
                    "client": "compliance",
                    "payload": {
                        "summary": subject.chars().take(1024).collect::<String>(),
                        "source": payload.get("orgId"),
                        "severity": payload.get("severity"),
                        "timestamp": payload.get("at"),
                        "component": payload.get("metric"),
                        "custom_details": payload,
                    }
                })
            };
            post(
                state,
                &state.config.alerts.pagerduty_url,
                false,
                &[],
                body.to_string().into_bytes(),
            )
            .await
        }
    })
}

/// The delivery worker's attempt of an alert delivery (channel
/// `alert:<destination>`).
pub async fn deliver(state: &AppState, claimed: &ClaimedDelivery) -> ServiceResult<Outcome> {
    let id = claimed
        .channel
        .strip_prefix(ALERT_CHANNEL)
        .unwrap_or_default();
    let Some(row) = state.store.alert_destination(&claimed.org_id, id).await? else {
        return Ok(Outcome::Refused("the destination was deleted".to_owned()));
    };
    let secret = match open_secret(state, &row).await {
        Ok(s) => s,
        Err(ServiceError::KeyUnavailable(why)) => return Ok(Outcome::Waiting(why)),
        Err(error) => return Ok(Outcome::Refused(error.to_string())),
    };
    send(
        state,
        (&row, &secret),
        (&claimed.kind, &claimed.payload),
        None,
    )
    .await
}

/// One target of a test.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TestTarget {
    /// What was sent to (an address, a host, PagerDuty).
    pub target: String,
    /// `sent`, `failed` or `skipped`.
    pub status: String,
    /// The receiver's HTTP status (the relay's reply code for e-mail).
    pub http_status: Option<u16>,
    /// What went wrong.
    pub error: Option<String>,
    /// How long it took.
    pub latency_ms: u64,
}

/// What a test did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TestResult {
    /// The destination's id (none for an unsaved one).
    pub destination_id: Option<String>,
    /// Each target's result.
    pub targets: Vec<TestTarget>,
}

fn target_of(target: String, outcome: Outcome, started: Instant) -> TestTarget {
    let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let (status, http_status, error) = match outcome {
        Outcome::Sent(code) => ("sent", code, None),
        Outcome::Skipped(why) | Outcome::Waiting(why) => ("skipped", None, Some(why)),
        Outcome::Failed(code, why) => ("failed", code, Some(why)),
        Outcome::Rejected(code, why) => ("failed", Some(code), Some(why)),
        Outcome::Refused(why) => ("failed", None, Some(why)),
        Outcome::Gone => (
            "failed",
            Some(410),
            Some("the receiver answered 410".to_owned()),
        ),
    };
    TestTarget {
        target,
        status: status.to_owned(),
        http_status,
        error,
        latency_ms,
    }
}

/// Sends a message marked as a test to a saved destination, or to an unsaved one
/// (`body`), waiting at most 10 s; nothing is written to any alert history.
/// Audited `alert.destination.test`; at most `ALERT_TESTS_PER_MINUTE` per
/// organization and minute (429).
pub async fn test(
    state: &AppState,
    caller: &Caller,
    org: &OrgRecord,
    target: Result<&str, &DestinationBody>,
    now: DateTime<Utc>,
) -> ServiceResult<TestResult> {
    let limit = state.config.alerts.tests_per_minute;
    let minute = now.format("%Y-%m-%dT%H:%M").to_string();
    let (row, secret, saved) = match target {
        Ok(id) => {
            let row = destination_row(state, org, id).await?;
            let secret = open_secret(state, &row).await?;
            (row, secret, true)
        }
        Err(body) => {
            let (name, settings, secret, _) = check_destination(state, body, None).await?;
            let row = DestinationRow {
                id: new_id(),
                org_id: org.id.clone(),
                name,
                kind: body.kind.name().to_owned(),
                settings: to_json(&settings)?,
                secret: None,
                version: 0,
                created_at: now,
                updated_at: now,
            };
            (row, secret.unwrap_or_default(), false)
        }
    };
    if state
        .store
        .count_alert_test(&org.id, &minute, limit)
        .await?
        .is_none()
    {
        return Err(ServiceError::RateLimited {
            what: "destination tests",
            limit: u64::from(limit),
            retry_after_seconds: 60 - u64::from(chrono::Timelike::second(&now)),
        });
    }
    let key = format!("test-{}", new_id());
    let payload = json!({
        "ruleId": null,
        "ruleName": "Test notification",
        "orgId": org.id,
        "notice": "firing",
        "state": "firing",
        "severity": "info",
        "labels": {},
        "metric": "test",
        "comparison": "gt",
        "threshold": 0,
        "value": 1,
        "dedupKey": key,
        "messageId": format!("{key}.1"),
        "at": now,
        "test": true,
    });
    let (kind, settings) = settings_of(&row)?;
    let run = async {
        let mut targets = Vec::new();
        match kind {
            DestinationKind::Email => {
                for address in &settings.addresses {
                    let started = Instant::now();
                    let outcome = send(
                        state,
                        (&row, &secret),
                        ("alert.test", &payload),
                        Some(address),
                    )
                    .await?;
                    targets.push(target_of(address.clone(), outcome, started));
                }
            }
            DestinationKind::Pagerduty => {
                let started = Instant::now();
                let outcome = send(state, (&row, &secret), ("alert.test", &payload), None).await?;
                let sent = matches!(outcome, Outcome::Sent(_));
                targets.push(target_of("pagerduty".to_owned(), outcome, started));
                if sent {
                    // The test's incident is resolved at once.
                    let mut resolve = payload.clone();
                    if let Some(o) = resolve.as_object_mut() {
                        o.insert("notice".to_owned(), json!("resolved"));
                    }
                    send(state, (&row, &secret), ("alert.test", &resolve), None).await?;
                }
            }
            DestinationKind::Slack | DestinationKind::Webhook => {
                let started = Instant::now();
                let outcome = send(state, (&row, &secret), ("alert.test", &payload), None).await?;
                targets.push(target_of(
                    settings.host.clone().unwrap_or_default(),
                    outcome,
                    started,
                ));
            }
        }
        Ok::<_, ServiceError>(targets)
    };
    let targets = match tokio::time::timeout(WEBHOOK_TIMEOUT, run).await {
        Ok(done) => done?,
        Err(_) => vec![TestTarget {
            target: row.name.clone(),
            status: "failed".to_owned(),
            http_status: None,
            error: Some("no answer within 10 s".to_owned()),
            latency_ms: 10_000,
        }],
    };
    let event = event(
        caller,
        "alert.destination.test",
        &org.id,
        "alert_destination",
        if saved { &row.id } else { "unsaved" },
        json!({
            "kind": kind.name(),
            "results": targets.iter().map(|t| json!({"status": t.status, "httpStatus": t.http_status})).collect::<Vec<_>>(),
        }),
    );
    state.store.record_events(&[event]).await?;
    Ok(TestResult {
        destination_id: saved.then(|| row.id.clone()),
        targets,
    })
}
