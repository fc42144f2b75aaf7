//! `/compliance/notification-preferences`: how an organization is told of blocks.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use serde::Deserialize;
use tenancy::MembershipRole;

use crate::error::ApiError;
use crate::http::extract::Json;
use crate::http::gate::Granted;
use crate::http::response::ok;
use crate::http::state::{AppState, Caller};

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
    Ok(ok(
        StatusCode::OK,
        state.store.notification_preference(&granted.org.id).await?,
    ))
}

/// `PUT /compliance/notification-preferences`: organization admin or owner only. An
/// omitted `webhookSecret` keeps the stored one; an empty string clears it.
pub(crate) async fn save_preferences(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<PreferenceBody>,
) -> Result<Response, ApiError> {
    let role = state
        .store
        .membership(&granted.org.id, &caller.user_id)
        .await?
        .filter(|m| m.active)
        .map(|m| m.role);
    if !(granted.super_admin || matches!(role, Some(MembershipRole::Owner | MembershipRole::Admin)))
    {
        return Err(ApiError::forbidden(
            "only the organization's admins or owner may change notification preferences",
        ));
    }
    let mut preference = state.store.notification_preference(&granted.org.id).await?;
    if let Some(mode) = body.digest_mode {
        if !["immediate", "daily", "weekly"].contains(&mode.as_str()) {
            return Err(ApiError::invalid_field(
                "digestMode",
                "must be immediate, daily or weekly",
            ));
        }
        preference.digest_mode = mode;
    }
    if let Some(url) = body.webhook_url {
        if !(url.is_empty() || url.starts_with("https://") || url.starts_with("http://")) {
            return Err(ApiError::invalid_field(
                "webhookUrl",
                "must be an http(s) URL",
            ));
        }
        preference.webhook_url = Some(url).filter(|u| !u.is_empty());
    }
    if let Some(secret) = body.webhook_secret {
        preference.webhook_secret = Some(secret).filter(|s| !s.is_empty());
    }
    preference.has_webhook_secret = preference.webhook_secret.is_some();
    if let Some(enabled) = body.email_enabled {
        preference.email_enabled = enabled;
    }
    if let Some(users) = body.target_users {
        preference.target_users = Some(users).filter(|u| !u.is_empty());
    }
    if let Some(warnings) = body.notify_warnings {
        preference.notify_warnings = warnings;
    }
    state
        .store
        .save_notification_preference(&granted.org.id, &preference, Utc::now(), &[])
        .await?;
    Ok(ok(StatusCode::OK, preference))
}
