//! `/compliance/notification-preferences`: how an organization is told of blocks.

use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::http::error::ApiError;
use crate::http::extract::{not_null, nullable, Json};
use crate::http::gate::Granted;
use crate::http::response::Answer;
use crate::http::state::{AppState, Caller};
use crate::services::preferences::{self, DigestMode, NotificationPreference, MAX_TARGET_USERS};

/// An organization's notification preference as the API answers it (the webhook
/// secret is never returned).
#[derive(Debug, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Preference {
    pub email_enabled: bool,
    /// Recipients; every admin and the owner when none.
    pub target_users: Option<Vec<String>>,
    pub webhook_url: Option<String>,
    pub has_webhook_secret: bool,
    #[schema(value_type = DigestMode)]
    pub digest_mode: String,
    pub notify_warnings: bool,
    /// When the webhook answered 410 Gone: off until its URL is saved again.
    pub webhook_disabled_at: Option<DateTime<Utc>>,
}

impl From<NotificationPreference> for Preference {
    fn from(p: NotificationPreference) -> Self {
        Preference {
            email_enabled: p.email_enabled,
            target_users: p.target_users,
            webhook_url: p.webhook_url,
            has_webhook_secret: p.has_webhook_secret,
            digest_mode: p.digest_mode,
            notify_warnings: p.notify_warnings,
            webhook_disabled_at: p.webhook_disabled_at,
        }
    }
}

// The schema's `maxItems` of `targetUsers` is the service's bound.
const _: () = assert!(MAX_TARGET_USERS == 100);

/// A change of the preference: a field left out keeps its value.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PreferenceBody {
    #[serde(default, deserialize_with = "not_null")]
    #[schema(value_type = bool)]
    email_enabled: Option<bool>,
    /// E-mail addresses; `null` or `[]`: every admin and the owner.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<Vec<String>>, max_items = 100)]
    target_users: Option<Option<Vec<String>>>,
    /// `null` or `""` clears it.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    webhook_url: Option<Option<String>>,
    /// `null` or `""` clears it; left out keeps it.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    webhook_secret: Option<Option<String>>,
    #[serde(default, deserialize_with = "not_null")]
    #[schema(value_type = DigestMode)]
    digest_mode: Option<DigestMode>,
    #[serde(default, deserialize_with = "not_null")]
    #[schema(value_type = bool)]
    notify_warnings: Option<bool>,
}

/// `GET /compliance/notification-preferences`: column defaults when unset.
pub(crate) async fn preferences(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Answer<Preference>, ApiError> {
    let preference = preferences::get(&state.infra.store, &granted.org).await?;
    Ok(Answer::ok(preference.into()))
}

/// `PUT /compliance/notification-preferences`: organization admin or owner only. A
/// field left out keeps its value; `null` (or an empty value) clears `webhookUrl`,
/// `webhookSecret` and `targetUsers`; `null` for any other field is 400.
pub(crate) async fn save_preferences(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<PreferenceBody>,
) -> Result<Answer<Preference>, ApiError> {
    let change = preferences::Change {
        email_enabled: body.email_enabled,
        target_users: body.target_users.map(Option::unwrap_or_default),
        webhook_url: body.webhook_url.map(Option::unwrap_or_default),
        webhook_secret: body.webhook_secret.map(Option::unwrap_or_default),
        digest_mode: body.digest_mode,
        notify_warnings: body.notify_warnings,
    };
    let preference = preferences::save(
        &state.infra.store,
        &state.config,
        &state.outbound.keyring,
        (&caller, granted.super_admin),
        &granted.org,
        change,
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(preference.into()))
}

/// `POST /compliance/notification-preferences/test`: a test notification to the
/// saved webhook; what the receiver answered.
pub(crate) async fn test_webhook(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
) -> Result<Answer<preferences::WebhookTest>, ApiError> {
    let tested = preferences::test_webhook(
        &state.infra.store,
        &state.config,
        &state.outbound.keyring,
        (&caller, granted.super_admin),
        &granted.org,
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(tested))
}
