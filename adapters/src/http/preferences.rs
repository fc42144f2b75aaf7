//! `/compliance/notification-preferences`: how an organization is told of blocks.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use serde::Deserialize;

use crate::error::ApiError;
use crate::http::extract::Json;
use crate::http::gate::Granted;
use crate::http::response::ok;
use crate::http::state::{AppState, Caller};
use crate::services::preferences;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PreferenceBody {
    email_enabled: Option<bool>,
    target_users: Option<Vec<String>>,
    webhook_url: Option<String>,
    webhook_secret: Option<String>,
    digest_mode: Option<String>,
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

/// `PUT /compliance/notification-preferences`: organization admin or owner only. An
/// omitted `webhookSecret` keeps the stored one; an empty string clears it.
pub(crate) async fn save_preferences(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<PreferenceBody>,
) -> Result<Response, ApiError> {
    let change = preferences::Change {
        email_enabled: body.email_enabled,
        target_users: body.target_users,
        webhook_url: body.webhook_url,
        webhook_secret: body.webhook_secret,
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
