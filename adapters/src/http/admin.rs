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
use chrono::Utc;
use serde::Serialize;

use crate::http::error::ApiError;
use crate::http::response::Answer;
use crate::http::state::{AppState, Caller};
use crate::services::admin;

/// The super-admins, by user id.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SuperAdmins {
    super_admins: Vec<String>,
}

/// Whether a user is a super-admin now.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SuperAdmin {
    user_id: String,
    super_admin: bool,
}

/// `GET /admin/super-admins`.
pub(crate) async fn list(State(state): State<AppState>) -> Result<Answer<SuperAdmins>, ApiError> {
    let super_admins = admin::list(&state.store).await?;
    Ok(Answer::ok(SuperAdmins { super_admins }))
}

async fn change(
    state: &AppState,
    caller: &Caller,
    user_id: &str,
    grant: bool,
) -> Result<Answer<SuperAdmin>, ApiError> {
    let window = chrono::Duration::from_std(state.config.http.step_up_window)
        .unwrap_or(tenancy::DEFAULT_STEP_UP_WINDOW);
    admin::change(&state.store, caller, user_id, grant, (Utc::now(), window)).await?;
    Ok(Answer::ok(SuperAdmin {
        user_id: user_id.to_owned(),
        super_admin: grant,
    }))
}

/// `PUT /admin/super-admins/{userId}`.
pub(crate) async fn grant(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
) -> Result<Answer<SuperAdmin>, ApiError> {
    change(&state, &caller, &user_id, true).await
}

/// `DELETE /admin/super-admins/{userId}`.
pub(crate) async fn revoke(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
) -> Result<Answer<SuperAdmin>, ApiError> {
    change(&state, &caller, &user_id, false).await
}
