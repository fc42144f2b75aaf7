//! An organization's notification preference: read (column defaults when unset),
//! and changed by its admins or owner only. The webhook secret is never answered, and
//! is sealed at rest when `SECRETS_ENCRYPTION_KEY` is set. A webhook URL must resolve
//! to public addresses only (unless `WEBHOOK_ALLOW_PRIVATE`); saving it again turns
//! on a webhook a 410 turned off.

use chrono::{DateTime, Utc};
use tenancy::MembershipRole;

use super::{ServiceError, ServiceResult};
use crate::config::Config;
use crate::keys::Keyring;
use crate::services::context::Caller;
pub use crate::storage::NotificationPreference;
use crate::storage::{unit_of_work, OrgRecord, Store};

/// When notifications go out: at once, or gathered into a daily or weekly digest.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum DigestMode {
    /// One notification per block.
    Immediate,
    /// One digest a day.
    Daily,
    /// One digest a week.
    Weekly,
}

impl DigestMode {
    /// Its stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            DigestMode::Immediate => "immediate",
            DigestMode::Daily => "daily",
            DigestMode::Weekly => "weekly",
        }
    }
}

/// A change, as the request gives it: a field left out keeps its value.
#[derive(Debug, Clone, Default)]
pub struct Change {
    /// Send e-mail.
    pub email_enabled: Option<bool>,
    /// The users e-mailed (empty: every admin and the owner).
    pub target_users: Option<Vec<String>>,
    /// The webhook's URL (empty clears it).
    pub webhook_url: Option<String>,
    /// The webhook's secret (empty clears it; left out keeps it).
    pub webhook_secret: Option<String>,
    /// `immediate`, `daily` or `weekly`.
    pub digest_mode: Option<DigestMode>,
    /// Notify warnings too.
    pub notify_warnings: Option<bool>,
}

/// At most this many users are e-mailed by name.
pub const MAX_TARGET_USERS: usize = 100;

/// Each target user is an e-mail address (RFC 5321, as the mail relay takes it): no
/// spaces, control characters (CR, LF) or display names; at most
/// [`MAX_TARGET_USERS`] of them.
fn check_target_users(users: &[String]) -> ServiceResult<()> {
    if users.len() > MAX_TARGET_USERS {
        return Err(ServiceError::invalid(
            "targetUsers",
            format!("at most {MAX_TARGET_USERS} addresses"),
        ));
    }
    for user in users {
        let plain = user.len() <= 254 && !user.chars().any(|c| c.is_control() || c.is_whitespace());
        if !plain || user.parse::<lettre::Address>().is_err() {
            return Err(ServiceError::invalid(
                "targetUsers",
                format!("`{}` is not an e-mail address", user.escape_debug()),
            ));
        }
    }
    Ok(())
}

/// The organization's preference.
pub async fn get(store: &Store, org: &OrgRecord) -> ServiceResult<NotificationPreference> {
    Ok(store.notification_preference(&org.id).await?)
}

/// Whether the caller may change (and test) the preference: an active admin or the
/// owner, or a super-admin.
async fn may_change(
    store: &Store,
    (caller, super_admin): (&Caller, bool),
    org: &OrgRecord,
) -> ServiceResult<()> {
    let role = store
        .membership(&org.id, &caller.user_id)
        .await?
        .filter(|m| m.active)
        .map(|m| m.role);
    if super_admin || matches!(role, Some(MembershipRole::Owner | MembershipRole::Admin)) {
        Ok(())
    } else {
        Err(ServiceError::Forbidden(
            "only the organization's admins or owner may change notification preferences",
        ))
    }
}

/// What a test of the webhook found.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookTest {
    /// `sent` (a 2xx), `failed` (another answer, or none), `skipped` (no webhookUrl),
    /// `refused` (an address the server does not send to, a secret that cannot be
    /// opened now).
    pub status: String,
    /// The receiver's status, when it answered.
    pub http_status: Option<u16>,
    /// The first 1024 bytes of its answer, as text.
    pub answer: String,
    /// Why it was not sent, or failed.
    pub error: Option<String>,
    /// From the request to the answer.
    pub latency_ms: u64,
}

/// Sends a test notification (`"type": "test"`, signed as deliveries are) to the
/// saved webhook, even one a 410 turned off (a test turns nothing on or off), and
/// answers what the receiver said. The same callers as [`save`].
pub async fn test_webhook(
    store: &Store,
    config: &Config,
    keyring: &Keyring,
    (caller, super_admin): (&Caller, bool),
    org: &OrgRecord,
    now: DateTime<Utc>,
) -> ServiceResult<WebhookTest> {
    use super::delivery::Outcome;
    may_change(store, (caller, super_admin), org).await?;
    let preference = store.notification_preference(&org.id).await?;
    let id = crate::storage::new_id();
    let body = serde_json::json!({
        "type": "test",
        "id": id,
        "orgId": org.id,
        "sentAt": now,
        "message": "A test of this organization's compliance notification webhook.",
    })
    .to_string()
    .into_bytes();
    let started = std::time::Instant::now();
    let (outcome, answer) = super::delivery::post_webhook(
        store,
        config,
        keyring,
        (&org.id, &preference),
        &id,
        body,
        true,
    )
    .await?;
    let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let (status, http_status, error) = match outcome {
        Outcome::Sent(code) => ("sent", code, None),
        Outcome::Skipped(why) => ("skipped", None, Some(why)),
        Outcome::Failed(code, why) => ("failed", code, Some(why)),
        Outcome::Rejected(code, why) => ("failed", Some(code), Some(why)),
        Outcome::Gone => (
            "failed",
            Some(410),
            Some("the receiver answered 410 Gone".to_owned()),
        ),
        Outcome::Refused(why) | Outcome::Waiting(why) => ("refused", None, Some(why)),
    };
    Ok(WebhookTest {
        status: status.to_owned(),
        http_status,
        answer,
        error,
        latency_ms,
    })
}

/// Applies `change`, when the caller is an active admin or the owner (or a
/// super-admin), and answers the preference saved.
pub async fn save(
    store: &Store,
    config: &Config,
    keyring: &Keyring,
    (caller, super_admin): (&Caller, bool),
    org: &OrgRecord,
    change: Change,
    now: DateTime<Utc>,
) -> ServiceResult<NotificationPreference> {
    may_change(store, (caller, super_admin), org).await?;
    let mut preference = store.notification_preference(&org.id).await?;
    if let Some(mode) = change.digest_mode {
        preference.digest_mode = mode.as_str().to_owned();
    }
    if let Some(url) = change.webhook_url {
        if !(url.is_empty() || url.starts_with("https://") || url.starts_with("http://")) {
            return Err(ServiceError::invalid(
                "webhookUrl",
                "must be an http(s) URL",
            ));
        }
        if !url.is_empty() {
            super::delivery::check_webhook_url(config, &url).await?;
        }
        preference.webhook_url = Some(url).filter(|u| !u.is_empty());
        preference.webhook_disabled_at = None;
    }
    if let Some(secret) = change.webhook_secret {
        preference.webhook_secret = match secret.as_str() {
            "" => None,
            plain => Some(
                super::keys::seal(
                    store,
                    config,
                    keyring,
                    super::keys::webhook_secret(&org.id),
                    plain,
                )
                .await?,
            ),
        };
    }
    preference.has_webhook_secret = preference.webhook_secret.is_some();
    if let Some(enabled) = change.email_enabled {
        preference.email_enabled = enabled;
    }
    if let Some(users) = change.target_users {
        check_target_users(&users)?;
        preference.target_users = Some(users).filter(|u| !u.is_empty());
    }
    if let Some(warnings) = change.notify_warnings {
        preference.notify_warnings = warnings;
    }
    unit_of_work!(store, |tx| {
        Ok(tx
            .save_notification_preference(&org.id, &preference, now)
            .await?)
    })?;
    store.facts_changed();
    Ok(preference)
}
