//! Platform administration: who is a super-admin. The stored flag is the only source
//! (a token's claim is ignored); it is set when a bootstrap identifier creates the
//! system organization, and changed here, by a super-admin with a fresh step-up.
//!
//! - `GET /admin/super-admins`: the super-admins (super-admin).
//! - `PUT /admin/super-admins/{userId}`: grant (super-admin, step-up), audited
//!   `admin.superadmin.grant` in the system organization's chain.
//! - `DELETE /admin/super-admins/{userId}`: revoke (super-admin, step-up), audited
//!   `admin.superadmin.revoke`; the last super-admin cannot be revoked.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use serde_json::json;

use crate::http::error::ApiError;
use crate::http::response::ok;
use crate::http::state::{AppState, Caller};
use crate::services::admin;

/// `GET /admin/super-admins`.
pub(crate) async fn list(State(state): State<AppState>) -> Result<Response, ApiError> {
    let ids = admin::list(&state.store).await?;
    Ok(ok(StatusCode::OK, json!({"superAdmins": ids})))
}

async fn change(
    state: &AppState,
    caller: &Caller,
    user_id: &str,
    grant: bool,
) -> Result<Response, ApiError> {
    let window = chrono::Duration::from_std(state.config.http.step_up_window)
        .unwrap_or(tenancy::DEFAULT_STEP_UP_WINDOW);
    admin::change(&state.store, caller, user_id, grant, (Utc::now(), window)).await?;
    Ok(ok(
        StatusCode::OK,
        json!({"userId": user_id, "superAdmin": grant}),
    ))
}

/// `PUT /admin/super-admins/{userId}`.
pub(crate) async fn grant(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
) -> Result<Response, ApiError> {
    change(&state, &caller, &user_id, true).await
}

/// `DELETE /admin/super-admins/{userId}`.
pub(crate) async fn revoke(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
) -> Result<Response, ApiError> {
    change(&state, &caller, &user_id, false).await
}
