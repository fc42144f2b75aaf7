//! `/compliance/notification-preferences`: how an organization is told of blocks.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use serde::Deserialize;

use crate::http::error::ApiError;
use crate::http::extract::{not_null, nullable, Json};
use crate::http::gate::Granted;
use crate::http::response::ok;
use crate::http::state::{AppState, Caller};
use crate::services::preferences;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PreferenceBody {
    #[serde(default, deserialize_with = "not_null")]
    email_enabled: Option<bool>,
    /// `null` or `[]`: every admin and the owner.
    #[serde(default, deserialize_with = "nullable")]
    target_users: Option<Option<Vec<String>>>,
    /// `null` or `""` clears it.
    #[serde(default, deserialize_with = "nullable")]
    webhook_url: Option<Option<String>>,
    /// `null` or `""` clears it; left out keeps it.
    #[serde(default, deserialize_with = "nullable")]
    webhook_secret: Option<Option<String>>,
    #[serde(default, deserialize_with = "not_null")]
    digest_mode: Option<String>,
    #[serde(default, deserialize_with = "not_null")]
    notify_warnings: Option<bool>,
}

/// `GET /compliance/notification-preferences`: column defaults when unset.
pub(crate) async fn preferences(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Response, ApiError> {
    let preference = preferences::get(&state.store, &granted.org).await?;
    Ok(ok(StatusCode::OK, preference))
}

/// `PUT /compliance/notification-preferences`: organization admin or owner only. A
/// field left out keeps its value; `null` (or an empty value) clears `webhookUrl`,
/// `webhookSecret` and `targetUsers`; `null` for any other field is 400.
pub(crate) async fn save_preferences(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<PreferenceBody>,
) -> Result<Response, ApiError> {
    let change = preferences::Change {
        email_enabled: body.email_enabled,
        target_users: body.target_users.map(Option::unwrap_or_default),
        webhook_url: body.webhook_url.map(Option::unwrap_or_default),
        webhook_secret: body.webhook_secret.map(Option::unwrap_or_default),
        digest_mode: body.digest_mode,
        notify_warnings: body.notify_warnings,
    };
    let preference = preferences::save(
        &state,
        (&caller, granted.super_admin),
        &granted.org,
        change,
        Utc::now(),
    )
    .await?;
    Ok(ok(StatusCode::OK, preference))
}
