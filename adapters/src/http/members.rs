//! `/organization/:id/members` and `/organization/:id/roles`.

use std::collections::BTreeSet;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use serde::Deserialize;
use serde_json::json;
use tenancy::{
    guard_role_assignment, guard_role_definition, guard_role_mutation, implied_role, Author,
    MembershipRole, Permission,
};

use crate::error::ApiError;
use crate::http::extract::{Json, PageParams, Query, SortOrder};
use crate::http::gate::Granted;
use crate::http::organizations::text;
use crate::http::response::{ok, paginated};
use crate::http::state::{event, AppState, Caller};
use crate::storage::RoleRecord;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct AddMember {
    user_id: String,
    email: Option<String>,
    role: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ChangeMemberRole {
    role: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct BulkAdd {
    user_id: String,
    team_ids: Vec<String>,
    role: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CreateRole {
    name: String,
    permissions: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct UpdateRole {
    name: Option<String>,
    permissions: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RoleMember {
    user_id: String,
}

/// `admin` or `member` (ownership moves only by transfer).
fn member_role(role: Option<&str>) -> Result<MembershipRole, ApiError> {
    match role.unwrap_or("member") {
        "member" => Ok(MembershipRole::Member),
        "admin" => Ok(MembershipRole::Admin),
        _ => Err(ApiError::invalid_field("role", "must be admin or member")),
    }
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

pub(crate) async fn builtin(
    state: &AppState,
    org_id: &str,
    name: &str,
) -> Result<RoleRecord, ApiError> {
    state.store.role_named(org_id, name).await?.ok_or_else(|| {
        ApiError::internal(format!(
            "organization {org_id} lacks its built-in {name} role"
        ))
    })
}

/// `GET /organization/:id/members` (member).
pub(crate) async fn list(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(params): Query<PageParams>,
) -> Result<Response, ApiError> {
    let page = params.check(state.config.http.max_page_limit, &["createdAt"])?;
    let (members, total) = state
        .store
        .members(
            &id,
            page.limit,
            page.offset,
            page.sort_order == SortOrder::Asc,
        )
        .await?;
    Ok(paginated("members", members, total, &page))
}

/// `POST /organization/:id/members` (`members:manage`).
pub(crate) async fn add(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<AddMember>,
) -> Result<Response, ApiError> {
    let user_id = text("userId", &body.user_id, 200)?;
    let role = member_role(body.role.as_deref())?;
    let implied = builtin(&state, &id, implied_role(role)).await?;
    guard_role_assignment(author(&granted), &implied.role())?;
    let now = Utc::now();
    state
        .store
        .ensure_user(&user_id, body.email.as_deref(), now)
        .await?;
    let audit = [event(
        &caller,
        "org.member.add",
        &id,
        "user",
        &user_id,
        json!({"role": role}),
    )];
    state
        .store
        .add_members(&user_id, role, &[(id.clone(), implied.id)], now, &audit)
        .await?;

    let member = state.store.membership(&id, &user_id).await?;
    Ok(ok(StatusCode::CREATED, member))
}

/// `POST /organization/:id/members/bulk-add` (`members:manage`): one user into
/// several teams of this organization, all or nothing.
pub(crate) async fn bulk_add(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<BulkAdd>,
) -> Result<Response, ApiError> {
    let user_id = text("userId", &body.user_id, 200)?;
    let role = member_role(body.role.as_deref())?;
    if body.team_ids.is_empty() || body.team_ids.len() > 100 {
        return Err(ApiError::invalid_field(
            "teamIds",
            "must list 1 to 100 teams",
        ));
    }
    let mut grants = Vec::with_capacity(body.team_ids.len());
    for team_id in &body.team_ids {
        let team = state.store.organization(team_id).await?;
        if team.as_ref().and_then(|t| t.parent_org_id.as_deref()) != Some(id.as_str()) {
            return Err(ApiError::invalid_field(
                "teamIds",
                format!("`{team_id}` is not a team of this organization"),
            ));
        }
        let implied = builtin(&state, team_id, implied_role(role)).await?;
        guard_role_assignment(author(&granted), &implied.role())?;
        grants.push((team_id.clone(), implied.id));
    }
    let now = Utc::now();
    state.store.ensure_user(&user_id, None, now).await?;
    let audit: Vec<_> = grants
        .iter()
        .map(|(team_id, _)| {
            event(
                &caller,
                "org.member.add",
                team_id,
                "user",
                &user_id,
                json!({"role": role, "bulk": true}),
            )
        })
        .collect();
    state
        .store
        .add_members(&user_id, role, &grants, now, &audit)
        .await?;
    Ok(ok(
        StatusCode::CREATED,
        json!({"userId": user_id, "teamIds": body.team_ids}),
    ))
}

/// `DELETE /organization/:id/members/:userId` (`members:manage`).
pub(crate) async fn remove(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path((id, user_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    if user_id == granted.org.owner_id {
        return Err(ApiError::conflict(
            "the owner cannot be removed; transfer ownership first",
        ));
    }
    let audit = [event(
        &caller,
        "org.member.remove",
        &id,
        "user",
        &user_id,
        json!({}),
    )];
    state.store.remove_member(&id, &user_id, &audit).await?;

    Ok(ok(
        StatusCode::OK,
        json!({"userId": user_id, "removed": true}),
    ))
}

/// `PATCH /organization/:id/members/:userId` (`members:manage`): admin or member.
pub(crate) async fn change_role(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path((id, user_id)): Path<(String, String)>,
    Json(body): Json<ChangeMemberRole>,
) -> Result<Response, ApiError> {
    let role = member_role(Some(&body.role))?;
    let member = state
        .store
        .membership(&id, &user_id)
        .await?
        .ok_or_else(|| ApiError::not_found("member"))?;
    if member.role == tenancy::MembershipRole::Owner {
        return Err(ApiError::conflict(
            "the owner's role changes only by ownership transfer",
        ));
    }
    let grant = builtin(&state, &id, implied_role(role)).await?;
    let drop = builtin(&state, &id, implied_role(member.role)).await?;
    guard_role_assignment(author(&granted), &grant.role())?;
    let audit = [event(
        &caller,
        "org.role.member.add",
        &id,
        "user",
        &user_id,
        json!({"role": role, "roleId": grant.id}),
    )];
    state
        .store
        .set_member_role(&id, &user_id, role, &drop.id, &grant.id, &audit)
        .await?;

    let member = state.store.membership(&id, &user_id).await?;
    Ok(ok(StatusCode::OK, member))
}

async fn set_active(
    state: AppState,
    caller: Caller,
    granted: Granted,
    id: String,
    user_id: String,
    active: bool,
) -> Result<Response, ApiError> {
    if !active && user_id == granted.org.owner_id {
        return Err(ApiError::conflict("the owner cannot be deactivated"));
    }
    let action = if active {
        "org.member.activate"
    } else {
        "org.member.deactivate"
    };
    let audit = [event(&caller, action, &id, "user", &user_id, json!({}))];
    state
        .store
        .set_member_active(&id, &user_id, active, &audit)
        .await?;
    let member = state.store.membership(&id, &user_id).await?;
    Ok(ok(StatusCode::OK, member))
}

/// `PATCH /organization/:id/members/:userId/activate` (`members:manage`).
pub(crate) async fn activate(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path((id, user_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    set_active(state, caller, granted, id, user_id, true).await
}

/// `PATCH /organization/:id/members/:userId/deactivate` (`members:manage`).
pub(crate) async fn deactivate(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path((id, user_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    set_active(state, caller, granted, id, user_id, false).await
}

/// `GET /organization/:id/roles` (member): Roles with their members.
pub(crate) async fn roles(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(params): Query<PageParams>,
) -> Result<Response, ApiError> {
    let page = params.check(state.config.http.max_page_limit, &["createdAt"])?;
    let mut all = state.store.roles(&id).await?;
    if page.sort_order == SortOrder::Desc {
        all.reverse();
    }
    let total = all.len() as u64;
    let items: Vec<RoleRecord> = all
        .into_iter()
        .skip(usize::try_from(page.offset).unwrap_or(usize::MAX))
        .take(page.limit as usize)
        .collect();
    Ok(paginated("roles", items, total, &page))
}

/// `POST /organization/:id/roles` (`roles:manage`, escalation guard).
pub(crate) async fn create_role(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<CreateRole>,
) -> Result<Response, ApiError> {
    let name = text("name", &body.name, 100)?;
    let permissions = permissions("permissions", &body.permissions)?;
    guard_role_definition(author(&granted), &permissions)?;
    let audit = |role_id: &str| {
        vec![event(
            &caller,
            "org.role.create",
            &id,
            "role",
            role_id,
            json!({"name": name, "permissions": permissions}),
        )]
    };
    let role_id = state
        .store
        .create_role(&id, &name, &permissions, Utc::now(), &audit)
        .await?;

    let role = state.store.role(&id, &role_id).await?;
    Ok(ok(StatusCode::CREATED, role))
}

/// `PUT /organization/:id/roles/:roleId` (`roles:manage`, escalation guard).
pub(crate) async fn update_role(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path((id, role_id)): Path<(String, String)>,
    Json(body): Json<UpdateRole>,
) -> Result<Response, ApiError> {
    let existing = state
        .store
        .role(&id, &role_id)
        .await?
        .ok_or_else(|| ApiError::not_found("role"))?;
    guard_role_mutation(&existing.role())?;
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
    if let Some(permissions) = &permissions {
        guard_role_definition(author(&granted), permissions)?;
    }
    let audit = [event(
        &caller,
        "org.role.update",
        &id,
        "role",
        &role_id,
        json!({"name": name, "permissions": permissions}),
    )];
    state
        .store
        .update_role(&id, &role_id, name.as_deref(), permissions.as_ref(), &audit)
        .await?;

    let role = state.store.role(&id, &role_id).await?;
    Ok(ok(StatusCode::OK, role))
}

/// `DELETE /organization/:id/roles/:roleId` (`roles:manage`).
pub(crate) async fn delete_role(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, role_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let existing = state
        .store
        .role(&id, &role_id)
        .await?
        .ok_or_else(|| ApiError::not_found("role"))?;
    guard_role_mutation(&existing.role())?;
    let audit = [event(
        &caller,
        "org.role.delete",
        &id,
        "role",
        &role_id,
        json!({"name": existing.name}),
    )];
    state.store.delete_role(&id, &role_id, &audit).await?;

    Ok(ok(StatusCode::OK, json!({"id": role_id, "deleted": true})))
}

/// `POST /organization/:id/roles/:roleId/members` (`roles:manage`, escalation guard).
pub(crate) async fn add_role_member(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path((id, role_id)): Path<(String, String)>,
    Json(body): Json<RoleMember>,
) -> Result<Response, ApiError> {
    let role = state
        .store
        .role(&id, &role_id)
        .await?
        .ok_or_else(|| ApiError::not_found("role"))?;
    let user_id = text("userId", &body.user_id, 200)?;
    if state.store.membership(&id, &user_id).await?.is_none() {
        return Err(ApiError::invalid_field(
            "userId",
            "must be a member of the organization",
        ));
    }
    guard_role_assignment(author(&granted), &role.role())?;
    let audit = [event(
        &caller,
        "org.role.member.add",
        &id,
        "role",
        &role_id,
        json!({"userId": user_id}),
    )];
    state
        .store
        .add_role_member(&id, &role_id, &user_id, &audit)
        .await?;

    let role = state.store.role(&id, &role_id).await?;
    Ok(ok(StatusCode::CREATED, role))
}

/// `DELETE /organization/:id/roles/:roleId/members/:userId` (`roles:manage`; not guarded).
pub(crate) async fn remove_role_member(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, role_id, user_id)): Path<(String, String, String)>,
) -> Result<Response, ApiError> {
    let audit = [event(
        &caller,
        "org.role.member.remove",
        &id,
        "role",
        &role_id,
        json!({"userId": user_id}),
    )];
    state
        .store
        .remove_role_member(&id, &role_id, &user_id, &audit)
        .await?;

    Ok(ok(
        StatusCode::OK,
        json!({"roleId": role_id, "userId": user_id, "removed": true}),
    ))
}
