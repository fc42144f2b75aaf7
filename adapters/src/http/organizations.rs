//! `/organization`: organizations and teams, tier, export, ownership transfer.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use entitlements::Tier;
use serde::Deserialize;
use serde_json::json;
use tenancy::{builtin_roles, check_bootstrap, check_team_parent, is_reserved_name};

use crate::error::ApiError;
use crate::http::extract::{Json, PageParams, Query};
use crate::http::gate::{gate, Granted, Named};
use crate::http::response::{ok, paginated};
use crate::http::state::{event, event_on, AppState, Caller};
use crate::storage::NewOrganization;

pub(crate) fn text(field: &str, value: &str, max: usize) -> Result<String, ApiError> {
    let value = value.trim();
    if value.is_empty() {
        return Err(ApiError::invalid_field(field, "must not be empty"));
    }
    if value.chars().count() > max {
        return Err(ApiError::invalid_field(
            field,
            format!("must be at most {max} characters"),
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(ApiError::invalid_field(
            field,
            "must not contain control characters",
        ));
    }
    Ok(value.to_owned())
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CreateOrganization {
    name: String,
    display_name: Option<String>,
    parent_org_id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct UpdateOrganization {
    name: Option<String>,
    display_name: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ChangeTier {
    tier: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct TransferOwner {
    user_id: String,
}

/// `GET /organization`: the caller's active organization (`x-org-id`).
pub(crate) async fn active(granted: Granted) -> Result<Response, ApiError> {
    Ok(ok(StatusCode::OK, granted.org))
}

/// `POST /organization`: a root organization (any authenticated user, who becomes
/// its Owner), a team (`parentOrgId`, needs `org:settings` in the parent), or the
/// system organization (name `system`, bootstrap identifiers only).
pub(crate) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<CreateOrganization>,
) -> Result<Response, ApiError> {
    let name = text("name", &body.name, 100)?;
    let display_name = body
        .display_name
        .as_deref()
        .map(|d| text("displayName", d, 200))
        .transpose()?;
    let now = Utc::now();
    let new = if is_reserved_name(&name) {
        if body.parent_org_id.is_some() {
            return Err(ApiError::invalid_field(
                "parentOrgId",
                "the system organization cannot be a team",
            ));
        }
        let email = caller.email.as_deref().unwrap_or_default();
        check_bootstrap(
            &state.config.bootstrap,
            email,
            state.store.system_exists().await?,
        )?;
        NewOrganization {
            name: tenancy::SYSTEM_ORG_NAME.to_owned(),
            display_name,
            parent_org_id: None,
            tier: Tier::Enterprise,
            is_system: true,
            owner_id: caller.user_id.clone(),
            builtin_roles: builtin_roles(true),
        }
    } else if let Some(parent_id) = &body.parent_org_id {
        // A team needs `org:settings` in its parent: a check on the body's
        // organization, beside the route's own (any authenticated user).
        let parent = gate(
            &state,
            &caller,
            parent_id,
            Named::Path,
            tenancy::Access::Permission(tenancy::Permission::OrgSettings).requirement(true, false),
            "POST /api/organization",
        )
        .await?;
        check_team_parent(&parent.org.organization())?;
        NewOrganization {
            name,
            display_name,
            parent_org_id: Some(parent.org.id.clone()),
            tier: parent.org.tier,
            is_system: false,
            owner_id: caller.user_id.clone(),
            builtin_roles: builtin_roles(false),
        }
    } else {
        NewOrganization {
            name,
            display_name,
            parent_org_id: None,
            tier: Tier::Developer,
            is_system: false,
            owner_id: caller.user_id.clone(),
            builtin_roles: builtin_roles(false),
        }
    };
    let details =
        json!({"name": new.name, "parentOrgId": new.parent_org_id, "system": new.is_system});
    let audit = |org_id: &str| {
        vec![event(
            &caller,
            "org.create",
            org_id,
            "organization",
            org_id,
            details.clone(),
        )]
    };
    let org = state.store.create_organization(new, now, &audit).await?;

    Ok(ok(StatusCode::CREATED, org))
}

/// `GET /organization/:id`: own organization, managed team, or super-admin.
pub(crate) async fn get(granted: Granted) -> Result<Response, ApiError> {
    Ok(ok(StatusCode::OK, granted.org))
}

/// `PUT /organization/:id` (super-admin).
pub(crate) async fn update(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<UpdateOrganization>,
) -> Result<Response, ApiError> {
    let name = body
        .name
        .as_deref()
        .map(|n| text("name", n, 100))
        .transpose()?;
    // `system` names the system organization, and only it.
    if name
        .as_deref()
        .is_some_and(|n| is_reserved_name(n) != granted.org.is_system)
    {
        return Err(ApiError::invalid_field(
            "name",
            "`system` is reserved for the system organization",
        ));
    }
    let display_name = body
        .display_name
        .as_deref()
        .map(|d| text("displayName", d, 200))
        .transpose()?;
    let audit = [event(
        &caller,
        "org.update",
        &id,
        "organization",
        &id,
        json!({"name": name, "displayName": display_name}),
    )];
    state
        .store
        .update_organization(
            &id,
            name.as_deref(),
            display_name.as_deref(),
            Utc::now(),
            &audit,
        )
        .await?;

    let org = state
        .store
        .organization(&id)
        .await?
        .ok_or_else(|| ApiError::not_found("organization"))?;
    Ok(ok(StatusCode::OK, org))
}

/// `DELETE /organization/:id` (super-admin, step-up): soft delete, teams included.
pub(crate) async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    if granted.org.is_system {
        return Err(ApiError::conflict(
            "the system organization cannot be deleted",
        ));
    }
    let (teams, _) = state.store.teams(&id, u32::MAX, 0, true).await?;
    let audit = [event_on(
        &caller,
        "admin.org.delete",
        (&id, Some(&id)),
        ("organization", &id),
        json!({}),
    )];
    state
        .store
        .delete_organization(&id, Utc::now(), &audit)
        .await?;
    // Cached rule sets carry the organization: a deleted one must not validate on.
    let mut gone: Vec<String> = teams.into_iter().map(|t| t.id).collect();
    gone.push(id.clone());
    crate::compliance::forget(
        &state.store,
        &state.rule_cache,
        crate::compliance::Stale::Orgs(gone),
    )
    .await;
    Ok(ok(StatusCode::OK, json!({"id": id, "deleted": true})))
}

/// `PATCH /organization/:id/tier` (super-admin, step-up).
pub(crate) async fn change_tier(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<ChangeTier>,
) -> Result<Response, ApiError> {
    let tier = Tier::parse(&body.tier).ok_or_else(|| {
        ApiError::invalid_field("tier", "must be developer, pro, team or enterprise")
    })?;
    let audit = [event_on(
        &caller,
        "admin.org.tier.update",
        (&id, Some(&id)),
        ("organization", &id),
        json!({"from": granted.org.tier, "to": tier}),
    )];
    state.store.set_tier(&id, tier, Utc::now(), &audit).await?;

    let org = state
        .store
        .organization(&id)
        .await?
        .ok_or_else(|| ApiError::not_found("organization"))?;
    Ok(ok(StatusCode::OK, org))
}

/// `GET /organization/:id/export` (`org:settings`): the organization's data.
pub(crate) async fn export(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let (members, _) = state.store.members(&id, u32::MAX, 0, true).await?;
    let (teams, _) = state.store.teams(&id, u32::MAX, 0, true).await?;
    let (invitations, _) = state.store.invitations(&id, u32::MAX, 0, true).await?;
    let audit = [event_on(
        &caller,
        "admin.org.export",
        (&id, Some(&id)),
        ("organization", &id),
        json!({}),
    )];
    let roles = state.store.roles(&id).await?;
    state.store.record_events(&audit).await?;

    Ok(ok(
        StatusCode::OK,
        json!({"organization": granted.org, "members": members, "teams": teams, "roles": roles, "invitations": invitations}),
    ))
}

/// `GET /me/organizations`: the organizations the caller belongs to, with the
/// membership role and the Roles held in each (a lost organization id is found here).
pub(crate) async fn mine(
    State(state): State<AppState>,
    caller: Caller,
    Query(params): Query<PageParams>,
) -> Result<Response, ApiError> {
    let page = params.check(state.config.http.max_page_limit, &["createdAt"])?;
    let (items, total) = state
        .store
        .organizations_of(&caller.user_id, page.limit, page.offset)
        .await?;
    Ok(crate::http::response::paginated(
        "organizations",
        items,
        total,
        &page,
    ))
}

/// `PATCH /organization/:id/transfer-owner` (`org:settings`, step-up).
pub(crate) async fn transfer_owner(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<TransferOwner>,
) -> Result<Response, ApiError> {
    let to = text("userId", &body.user_id, 200)?;
    let target = state
        .store
        .membership(&id, &to)
        .await?
        .map(|m| m.membership());
    let mut actor = caller.principal();
    actor.super_admin = granted.super_admin;
    let window = chrono::Duration::from_std(state.config.http.step_up_window)
        .unwrap_or(tenancy::DEFAULT_STEP_UP_WINDOW);
    let plan = tenancy::plan_transfer(
        &actor,
        &granted.org.owner_id,
        target.as_ref(),
        Utc::now(),
        window,
    )
    .map_err(|e| match e {
        tenancy::TenancyError::NewOwnerNotMember => {
            ApiError::invalid_field("userId", e.to_string())
        }
        other => ApiError::from(other),
    })?;
    let grant = crate::http::members::builtin(&state, &id, plan.grant).await?;
    let revoke = match plan.revoke {
        Some(name) => Some(crate::http::members::builtin(&state, &id, name).await?.id),
        None => None,
    };
    let audit = [event(
        &caller,
        "org.ownership.transfer",
        &id,
        "organization",
        &id,
        json!({"from": plan.from, "to": plan.to}),
    )];
    state
        .store
        .transfer_owner(
            &id,
            (&plan.from, &plan.to),
            (&grant.id, revoke.as_deref()),
            Utc::now(),
            &audit,
        )
        .await?;

    let org = state
        .store
        .organization(&id)
        .await?
        .ok_or_else(|| ApiError::not_found("organization"))?;
    Ok(ok(StatusCode::OK, org))
}

/// `GET /organization/:id/teams` (member): the teams nested under it.
pub(crate) async fn teams(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(params): Query<PageParams>,
) -> Result<Response, ApiError> {
    let page = params.check(state.config.http.max_page_limit, &["createdAt"])?;
    let ascending = page.sort_order == crate::http::extract::SortOrder::Asc;
    let (teams, total) = state
        .store
        .teams(&id, page.limit, page.offset, ascending)
        .await?;
    Ok(paginated("teams", teams, total, &page))
}
