//! `/invitation`: invitations of the `x-org-id` organization.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use serde::Deserialize;
use tenancy::MembershipRole;

use crate::http::error::ApiError;
use crate::http::extract::{Json, PageParams, Query, SortOrder};
use crate::http::gate::Granted;
use crate::http::organizations::text;
use crate::http::response::{ok, paginated};
use crate::http::state::{AppState, Caller};
use crate::services::invitations;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct SendInvitation {
    email: String,
    role: Option<String>,
}

/// `POST /invitation/send` (`invitations:manage`).
pub(crate) async fn send(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<SendInvitation>,
) -> Result<Response, ApiError> {
    let email = text("email", &body.email, 320)?;
    if !email.contains('@') || email.starts_with('@') || email.ends_with('@') {
        return Err(ApiError::invalid_field(
            "email",
            "must be an e-mail address",
        ));
    }
    let role = match body.role.as_deref().unwrap_or("member") {
        "member" => MembershipRole::Member,
        "admin" => MembershipRole::Admin,
        _ => return Err(ApiError::invalid_field("role", "must be admin or member")),
    };
    let invitation = invitations::send(
        &state.store,
        &caller,
        &granted.org,
        (&email, role),
        Utc::now(),
    )
    .await?;
    Ok(ok(StatusCode::CREATED, invitation))
}

/// `GET /invitation` (`invitations:manage`).
pub(crate) async fn list(
    State(state): State<AppState>,
    granted: Granted,
    Query(params): Query<PageParams>,
) -> Result<Response, ApiError> {
    let page = params.check(state.config.http.max_page_limit, &["createdAt"])?;
    let ascending = page.sort_order == SortOrder::Asc;
    let (items, total) = invitations::list(
        &state.store,
        &granted.org,
        page.limit,
        page.offset,
        ascending,
    )
    .await?;
    Ok(paginated("invitations", items, total, &page))
}

/// `DELETE /invitation/:id` (`invitations:manage`): revoke.
pub(crate) async fn revoke(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let invitation = invitations::revoke(&state.store, &caller, &granted.org, &id).await?;
    Ok(ok(StatusCode::OK, invitation))
}

/// `POST /invitation/:id/resend` (`invitations:manage`).
pub(crate) async fn resend(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let invitation =
        invitations::resend(&state.store, &caller, &granted.org, &id, Utc::now()).await?;
    Ok(ok(StatusCode::OK, invitation))
}

/// `POST /invitation/:id/accept`: the invitee (the token's e-mail) joins.
pub(crate) async fn accept(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let member = invitations::accept(&state, &caller, &id, Utc::now()).await?;
    Ok(ok(StatusCode::CREATED, member))
}
