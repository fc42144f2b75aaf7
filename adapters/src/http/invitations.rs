//! `/invitation`: invitations of the `x-org-id` organization.

use axum::extract::{Path, State};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tenancy::MembershipRole;

use crate::http::error::ApiError;
use crate::http::extract::{Json, PageParams, Query, SortOrder};
use crate::http::gate::Granted;
use crate::http::members::{AssignableRole, Member};
use crate::http::organizations::text;
use crate::http::response::{Answer, Paged};
use crate::http::state::{AppState, Caller};
use crate::services::invitations::{self, InvitationRecord, InvitationStatus};

/// An invitation as the API answers it.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Invitation {
    pub id: String,
    pub org_id: String,
    pub email: String,
    pub role: MembershipRole,
    pub status: InvitationStatus,
    pub invited_by: String,
    pub sent_count: i64,
    pub created_at: DateTime<Utc>,
    pub last_sent_at: DateTime<Utc>,
}

impl From<InvitationRecord> for Invitation {
    fn from(i: InvitationRecord) -> Self {
        Invitation {
            id: i.id,
            org_id: i.org_id,
            email: i.email,
            role: i.role,
            status: i.status,
            invited_by: i.invited_by,
            sent_count: i.sent_count,
            created_at: i.created_at,
            last_sent_at: i.last_sent_at,
        }
    }
}

/// Someone to invite by e-mail.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct SendInvitation {
    #[schema(max_length = 320, pattern = "^[^@\\s]+@[^@\\s]+$")]
    email: String,
    /// Member when left out.
    role: Option<AssignableRole>,
}

/// `POST /invitation/send` (`invitations:manage`).
pub(crate) async fn send(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<SendInvitation>,
) -> Result<Answer<Invitation>, ApiError> {
    let email = text("email", &body.email, 320)?;
    if !email.contains('@') || email.starts_with('@') || email.ends_with('@') {
        return Err(ApiError::invalid_field(
            "email",
            "must be an e-mail address",
        ));
    }
    let role = body
        .role
        .map_or(MembershipRole::Member, MembershipRole::from);
    let invitation = invitations::send(
        &state.infra.store,
        &caller,
        &granted.org,
        (&email, role),
        Utc::now(),
    )
    .await?;
    Ok(Answer::created(invitation.into()))
}

/// `GET /invitation` (`invitations:manage`).
pub(crate) async fn list(
    State(state): State<AppState>,
    granted: Granted,
    Query(params): Query<PageParams>,
) -> Result<Paged<Invitation>, ApiError> {
    let page = params.check(state.config.http.max_page_limit, &["createdAt"])?;
    let ascending = page.sort_order == SortOrder::Asc;
    let (items, total) = invitations::list(
        &state.infra.store,
        &granted.org,
        page.limit,
        page.offset,
        ascending,
    )
    .await?;
    let items = items.into_iter().map(Invitation::from).collect();
    Ok(Paged::new("invitations", items, total, page))
}

/// `DELETE /invitation/:id` (`invitations:manage`): revoke.
pub(crate) async fn revoke(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<Invitation>, ApiError> {
    let invitation = invitations::revoke(&state.infra.store, &caller, &granted.org, &id).await?;
    let invitation = invitation.ok_or_else(|| ApiError::not_found("invitation"))?;
    Ok(Answer::ok(invitation.into()))
}

/// `POST /invitation/:id/resend` (`invitations:manage`).
pub(crate) async fn resend(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<Invitation>, ApiError> {
    let invitation =
        invitations::resend(&state.infra.store, &caller, &granted.org, &id, Utc::now()).await?;
    let invitation = invitation.ok_or_else(|| ApiError::not_found("invitation"))?;
    Ok(Answer::ok(invitation.into()))
}

/// `POST /invitation/:id/accept`: the invitee (the token's e-mail) joins.
pub(crate) async fn accept(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Answer<Member>, ApiError> {
    let member = invitations::accept(
        &state.infra.store,
        &state.config,
        &state.replica.allowances,
        &caller,
        &id,
        Utc::now(),
    )
    .await?;
    let member = member.ok_or_else(|| ApiError::not_found("member"))?;
    Ok(Answer::created(member.into()))
}
