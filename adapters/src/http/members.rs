//! `/organization/:id/members` and `/organization/:id/roles`.

use std::collections::BTreeSet;

use axum::extract::{Path, State};
use chrono::Utc;
use serde::{Deserialize, Serialize};
use tenancy::{Author, MembershipRole, Permission};

use crate::http::error::ApiError;
use crate::http::extract::{Json, PageParams, Query, SortOrder};
use crate::http::gate::Granted;
use crate::http::organizations::text;
use crate::http::response::{Answer, Deleted, Paged};

/// A member of an organization as the API answers it.
#[derive(Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Member {
    pub org_id: String,
    pub user_id: String,
    /// Their e-mail, when known.
    pub email: Option<String>,
    pub role: MembershipRole,
    pub active: bool,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

impl From<MemberRecord> for Member {
    fn from(m: MemberRecord) -> Self {
        Member {
            org_id: m.org_id,
            user_id: m.user_id,
            email: m.email,
            role: m.role,
            active: m.active,
            created_at: m.created_at,
        }
    }
}

/// A Role of an organization as the API answers it.
#[derive(Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Role {
    pub id: String,
    pub name: String,
    pub permissions: BTreeSet<Permission>,
    /// Seeded by the platform.
    pub built_in: bool,
    /// The users holding it.
    pub members: Vec<String>,
}

impl From<RoleRecord> for Role {
    fn from(r: RoleRecord) -> Self {
        Role {
            id: r.id,
            name: r.name,
            permissions: r.permissions,
            built_in: r.built_in,
            members: r.members,
        }
    }
}
use crate::http::state::{AppState, Caller};
use crate::services::members::{self, MemberRecord, RoleRecord};

/// The membership roles a member may be given (ownership moves only by transfer).
#[derive(Debug, Clone, Copy, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum AssignableRole {
    Admin,
    Member,
}

impl From<AssignableRole> for MembershipRole {
    fn from(role: AssignableRole) -> Self {
        match role {
            AssignableRole::Admin => MembershipRole::Admin,
            AssignableRole::Member => MembershipRole::Member,
        }
    }
}

/// `role`, member when left out.
fn member_role(role: Option<AssignableRole>) -> MembershipRole {
    role.map_or(MembershipRole::Member, MembershipRole::from)
}

/// A user to add to the organization.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct AddMember {
    #[schema(min_length = 1, max_length = 200)]
    user_id: String,
    email: Option<String>,
    /// Member when left out.
    role: Option<AssignableRole>,
}

/// A member's new membership role.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ChangeMemberRole {
    role: AssignableRole,
}

/// One user into several teams of the organization.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct BulkAdd {
    #[schema(min_length = 1, max_length = 200)]
    user_id: String,
    #[schema(min_items = 1, max_items = 100)]
    team_ids: Vec<String>,
    /// Member when left out.
    role: Option<AssignableRole>,
}

/// Whom a bulk add added, and where.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BulkAdded {
    user_id: String,
    team_ids: Vec<String>,
}

/// A custom Role.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CreateRole {
    #[schema(min_length = 1, max_length = 100)]
    name: String,
    #[schema(value_type = Vec<Permission>)]
    permissions: Vec<String>,
}

/// A custom Role's change: what it names changes.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct UpdateRole {
    #[schema(min_length = 1, max_length = 100)]
    name: Option<String>,
    #[schema(value_type = Option<Vec<Permission>>)]
    permissions: Option<Vec<String>>,
}

/// A member to give a Role.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RoleMember {
    #[schema(min_length = 1, max_length = 200)]
    user_id: String,
}

/// `{userId, removed: true}`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MemberRemoved {
    user_id: String,
    removed: bool,
}

/// `{roleId, userId, removed: true}`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RoleMemberRemoved {
    role_id: String,
    user_id: String,
    removed: bool,
}

fn permissions(field: &str, names: &[String]) -> Result<BTreeSet<Permission>, ApiError> {
    names
        .iter()
        .map(|name| {
            Permission::parse(name).map_err(|e| ApiError::invalid_field(field, e.to_string()))
        })
        .collect()
}

fn author(granted: &Granted) -> Author<'_> {
    Author {
        super_admin: granted.super_admin,
        permissions: &granted.permissions,
    }
}

/// `GET /organization/:id/members` (member).
pub(crate) async fn list(
    State(state): State<AppState>,
    granted: Granted,
    Query(params): Query<PageParams>,
) -> Result<Paged<Member>, ApiError> {
    let page = params.check(state.config.http.max_page_limit, &["createdAt"])?;
    let ascending = page.sort_order == SortOrder::Asc;
    let (items, total) = members::list(
        &state.infra.store,
        &granted.org,
        page.limit,
        page.offset,
        ascending,
    )
    .await?;
    let items = items.into_iter().map(Member::from).collect();
    Ok(Paged::new("members", items, total, page))
}

/// `POST /organization/:id/members` (`members:manage`).
pub(crate) async fn add(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<AddMember>,
) -> Result<Answer<Member>, ApiError> {
    let user_id = text("userId", &body.user_id, 200)?;
    let role = member_role(body.role);
    let member = members::add(
        &state.infra.store,
        &state.config,
        &state.replica.allowances,
        (&caller, author(&granted)),
        &granted.org,
        (&user_id, body.email.as_deref()),
        role,
        Utc::now(),
    )
    .await?;
    Ok(Answer::created(
        member
            .map(Member::from)
            .ok_or_else(|| ApiError::not_found("member"))?,
    ))
}

/// `POST /organization/:id/members/bulk-add` (`members:manage`): one user into
/// several teams of this organization, all or nothing.
pub(crate) async fn bulk_add(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<BulkAdd>,
) -> Result<Answer<BulkAdded>, ApiError> {
    let user_id = text("userId", &body.user_id, 200)?;
    let role = member_role(body.role);
    if body.team_ids.is_empty() || body.team_ids.len() > 100 {
        return Err(ApiError::invalid_field(
            "teamIds",
            "must list 1 to 100 teams",
        ));
    }
    members::add_to_teams(
        &state.infra.store,
        &state.config,
        &state.replica.allowances,
        (&caller, author(&granted)),
        &granted.org,
        &user_id,
        &body.team_ids,
        role,
        Utc::now(),
    )
    .await?;
    Ok(Answer::created(BulkAdded {
        user_id,
        team_ids: body.team_ids,
    }))
}

/// `DELETE /organization/:id/members/:userId` (`members:manage`).
pub(crate) async fn remove(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path((_, user_id)): Path<(String, String)>,
) -> Result<Answer<MemberRemoved>, ApiError> {
    members::remove(&state.infra.store, &caller, &granted.org, &user_id).await?;
    Ok(Answer::ok(MemberRemoved {
        user_id,
        removed: true,
    }))
}

/// `PATCH /organization/:id/members/:userId` (`members:manage`): admin or member.
pub(crate) async fn change_role(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path((_, user_id)): Path<(String, String)>,
    Json(body): Json<ChangeMemberRole>,
) -> Result<Answer<Member>, ApiError> {
    let role = MembershipRole::from(body.role);
    let member = members::change_role(
        &state.infra.store,
        (&caller, author(&granted)),
        &granted.org,
        &user_id,
        role,
    )
    .await?;
    Ok(Answer::ok(
        member
            .map(Member::from)
            .ok_or_else(|| ApiError::not_found("member"))?,
    ))
}

/// `PATCH /organization/:id/members/:userId/activate` (`members:manage`).
pub(crate) async fn activate(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path((_, user_id)): Path<(String, String)>,
) -> Result<Answer<Member>, ApiError> {
    let member = members::set_active(
        &state.infra.store,
        &state.config,
        &state.replica.allowances,
        &caller,
        &granted.org,
        &user_id,
        true,
    )
    .await?;
    Ok(Answer::ok(
        member
            .map(Member::from)
            .ok_or_else(|| ApiError::not_found("member"))?,
    ))
}

/// `PATCH /organization/:id/members/:userId/deactivate` (`members:manage`).
pub(crate) async fn deactivate(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path((_, user_id)): Path<(String, String)>,
) -> Result<Answer<Member>, ApiError> {
    let member = members::set_active(
        &state.infra.store,
        &state.config,
        &state.replica.allowances,
        &caller,
        &granted.org,
        &user_id,
        false,
    )
    .await?;
    Ok(Answer::ok(
        member
            .map(Member::from)
            .ok_or_else(|| ApiError::not_found("member"))?,
    ))
}

/// `GET /organization/:id/roles` (member): Roles with their members.
pub(crate) async fn roles(
    State(state): State<AppState>,
    granted: Granted,
    Query(params): Query<PageParams>,
) -> Result<Paged<Role>, ApiError> {
    let page = params.check(state.config.http.max_page_limit, &["createdAt"])?;
    let ascending = page.sort_order == SortOrder::Asc;
    let (items, total) = members::roles(
        &state.infra.store,
        &granted.org,
        page.limit,
        page.offset,
        ascending,
    )
    .await?;
    let items = items.into_iter().map(Role::from).collect();
    Ok(Paged::new("roles", items, total, page))
}

/// `POST /organization/:id/roles` (`roles:manage`, escalation guard).
pub(crate) async fn create_role(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<CreateRole>,
) -> Result<Answer<Role>, ApiError> {
    let name = text("name", &body.name, 100)?;
    let permissions = permissions("permissions", &body.permissions)?;
    let role = members::create_role(
        &state.infra.store,
        (&caller, author(&granted)),
        &granted.org,
        &name,
        &permissions,
        Utc::now(),
    )
    .await?;
    Ok(Answer::created(
        role.map(Role::from)
            .ok_or_else(|| ApiError::not_found("role"))?,
    ))
}

/// `PUT /organization/:id/roles/:roleId` (`roles:manage`, escalation guard).
pub(crate) async fn update_role(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path((_, role_id)): Path<(String, String)>,
    Json(body): Json<UpdateRole>,
) -> Result<Answer<Role>, ApiError> {
    let name = body
        .name
        .as_deref()
        .map(|n| text("name", n, 100))
        .transpose()?;
    let permissions = body
        .permissions
        .as_deref()
        .map(|p| permissions("permissions", p))
        .transpose()?;
    let role = members::update_role(
        &state.infra.store,
        (&caller, author(&granted)),
        &granted.org,
        &role_id,
        (name.as_deref(), permissions.as_ref()),
    )
    .await?;
    Ok(Answer::ok(
        role.map(Role::from)
            .ok_or_else(|| ApiError::not_found("role"))?,
    ))
}

/// `DELETE /organization/:id/roles/:roleId` (`roles:manage`).
pub(crate) async fn delete_role(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path((_, role_id)): Path<(String, String)>,
) -> Result<Answer<Deleted>, ApiError> {
    members::delete_role(&state.infra.store, &caller, &granted.org, &role_id).await?;
    Ok(Answer::ok(Deleted::new(role_id)))
}

/// `POST /organization/:id/roles/:roleId/members` (`roles:manage`, escalation guard).
pub(crate) async fn add_role_member(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path((_, role_id)): Path<(String, String)>,
    Json(body): Json<RoleMember>,
) -> Result<Answer<Role>, ApiError> {
    let user_id = text("userId", &body.user_id, 200)?;
    let role = members::add_role_member(
        &state.infra.store,
        (&caller, author(&granted)),
        &granted.org,
        &role_id,
        &user_id,
    )
    .await?;
    Ok(Answer::created(
        role.map(Role::from)
            .ok_or_else(|| ApiError::not_found("role"))?,
    ))
}

/// `DELETE /organization/:id/roles/:roleId/members/:userId` (`roles:manage`; not guarded).
pub(crate) async fn remove_role_member(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path((_, role_id, user_id)): Path<(String, String, String)>,
) -> Result<Answer<RoleMemberRemoved>, ApiError> {
    members::remove_role_member(
        &state.infra.store,
        &caller,
        &granted.org,
        &role_id,
        &user_id,
    )
    .await?;
    Ok(Answer::ok(RoleMemberRemoved {
        role_id,
        user_id,
        removed: true,
    }))
}
