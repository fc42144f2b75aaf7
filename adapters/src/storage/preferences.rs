//! An organization's notification preferences, always scoped by organization.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::decode::Decoder;
use super::{stamp, Store, StoreResult};

/// An organization's notification preference.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NotificationPreference {
    /// E-mail notifications on.
    pub email_enabled: bool,
    /// Recipients; all org admins when unset.
    pub target_users: Option<Vec<String>>,
    /// The webhook, when set.
    pub webhook_url: Option<String>,
    /// Whether a webhook secret is stored (the secret itself is never returned).
    pub has_webhook_secret: bool,
    /// immediate, daily or weekly.
    pub digest_mode: String,
    /// Whether warnings notify too (blocks always do).
    pub notify_warnings: bool,
    /// Never returned: the stored secret (sealed when `SECRETS_ENCRYPTION_KEY` is set).
    #[serde(skip)]
    pub webhook_secret: Option<String>,
    /// When the webhook answered 410 Gone: off until its URL is saved again.
    pub webhook_disabled_at: Option<DateTime<Utc>>,
}

impl Default for NotificationPreference {
    /// The column defaults: nothing enabled, digest immediate.
    fn default() -> Self {
        NotificationPreference {
            email_enabled: false,
            target_users: None,
            webhook_url: None,
            has_webhook_secret: false,
            digest_mode: "immediate".to_owned(),
            notify_warnings: false,
            webhook_secret: None,
            webhook_disabled_at: None,
        }
    }
}

impl Store {
    /// An organization's preference, or the column defaults.
    pub async fn notification_preference(
        &self,
        org_id: &str,
    ) -> StoreResult<NotificationPreference> {
        let row =
            sqlx::query(&self.sql("SELECT * FROM notification_preferences WHERE org_id = $1"))
                .bind(org_id)
                .fetch_optional(self.pool())
                .await?;
        let Some(row) = row else {
            return Ok(NotificationPreference::default());
        };
        let d = Decoder::new(&row, "notification_preferences", &["org_id"]);
        let secret: Option<String> = d.get("webhook_secret")?;
        Ok(NotificationPreference {
            email_enabled: d.flag("email_enabled")?,
            target_users: d.opt_json("target_users")?,
            webhook_url: d.get("webhook_url")?,
            has_webhook_secret: secret.as_deref().is_some_and(|s| !s.is_empty()),
            digest_mode: d.get("digest_mode")?,
            notify_warnings: d.flag("notify_warnings")?,
            webhook_secret: secret,
            webhook_disabled_at: d.opt_stamp("webhook_disabled_at")?,
        })
    }
}

impl super::Transaction<'_> {
    /// Stores an organization's preference (upsert).
    pub async fn save_notification_preference(
        &mut self,
        org_id: &str,
        p: &NotificationPreference,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(&self.store.sql(
            "INSERT INTO notification_preferences (org_id, email_enabled, target_users, webhook_url, webhook_secret, digest_mode, notify_warnings, updated_at, webhook_disabled_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (org_id) DO UPDATE SET email_enabled = excluded.email_enabled, target_users = excluded.target_users,
               webhook_url = excluded.webhook_url, webhook_secret = excluded.webhook_secret, digest_mode = excluded.digest_mode,
               notify_warnings = excluded.notify_warnings, updated_at = excluded.updated_at,
               webhook_disabled_at = excluded.webhook_disabled_at",
        ))
        .bind(org_id)
        .bind(i64::from(p.email_enabled))
        .bind(p.target_users.as_ref().map(|t| serde_json::to_string(t).unwrap_or_default()))
        .bind(&p.webhook_url)
        .bind(&p.webhook_secret)
        .bind(&p.digest_mode)
        .bind(i64::from(p.notify_warnings))
        .bind(stamp(now))
        .bind(p.webhook_disabled_at.map(stamp))
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }
}
