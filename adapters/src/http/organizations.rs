//! `/organization`: organizations and teams, tier, export, ownership transfer.

use axum::extract::{Path, State};
use chrono::Utc;
use entitlements::Tier;
use serde::{Deserialize, Serialize};
use tenancy::{is_reserved_name, MembershipRole};

use crate::http::error::ApiError;
use crate::http::extract::{Json, PageParams, Query};
use crate::http::gate::{gate, Granted, Named};
use crate::http::invitations::Invitation;
use crate::http::members::{Member, Role};
use crate::http::response::{Answer, Deleted, Paged};
use crate::http::state::{AppState, Caller};
use crate::services::organizations::{self, Creation, Export, Membership, OrgRecord};

/// An organization (a root or a team) as the API answers it.
#[derive(Debug, serde::Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Organization {
    pub id: String,
    pub name: String,
    pub display_name: Option<String>,
    /// The root of a team; none for a root.
    pub parent_org_id: Option<String>,
    pub tier: Tier,
    pub is_system: bool,
    pub owner_id: String,
    pub created_at: chrono::DateTime<Utc>,
    pub updated_at: chrono::DateTime<Utc>,
}

impl From<OrgRecord> for Organization {
    fn from(o: OrgRecord) -> Self {
        Organization {
            id: o.id,
            name: o.name,
            display_name: o.display_name,
            parent_org_id: o.parent_org_id,
            tier: o.tier,
            is_system: o.is_system,
            owner_id: o.owner_id,
            created_at: o.created_at,
            updated_at: o.updated_at,
        }
    }
}

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

/// A new organization, or a team under `parentOrgId`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CreateOrganization {
    #[schema(min_length = 1, max_length = 100)]
    name: String,
    #[schema(min_length = 1, max_length = 200)]
    display_name: Option<String>,
    parent_org_id: Option<String>,
}

/// An organization's new names: what the body names changes.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct UpdateOrganization {
    #[schema(min_length = 1, max_length = 100)]
    name: Option<String>,
    #[schema(min_length = 1, max_length = 200)]
    display_name: Option<String>,
}

/// An organization's new tier.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ChangeTier {
    tier: Tier,
}

/// The member who becomes the owner.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct TransferOwner {
    #[schema(min_length = 1, max_length = 200)]
    user_id: String,
}

/// An organization the caller belongs to, with the membership and Roles there.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MyOrganization {
    pub id: String,
    pub name: String,
    pub parent_org_id: Option<String>,
    pub is_system: bool,
    pub role: MembershipRole,
    pub active: bool,
    /// The Roles held there, by name.
    pub roles: Vec<String>,
}

impl From<Membership> for MyOrganization {
    fn from(m: Membership) -> Self {
        MyOrganization {
            id: m.id,
            name: m.name,
            parent_org_id: m.parent_org_id,
            is_system: m.is_system,
            role: m.role,
            active: m.active,
            roles: m.roles,
        }
    }
}

/// Everything the organization holds about its members, teams, Roles and invitations.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct OrganizationExport {
    pub organization: Organization,
    pub members: Vec<Member>,
    pub teams: Vec<Organization>,
    pub roles: Vec<Role>,
    pub invitations: Vec<Invitation>,
}

impl From<Export> for OrganizationExport {
    fn from(e: Export) -> Self {
        OrganizationExport {
            organization: e.organization.into(),
            members: e.members.into_iter().map(Member::from).collect(),
            teams: e.teams.into_iter().map(Organization::from).collect(),
            roles: e.roles.into_iter().map(Role::from).collect(),
            invitations: e.invitations.into_iter().map(Invitation::from).collect(),
        }
    }
}

/// `GET /organization`: the caller's active organization (`x-org-id`).
pub(crate) async fn active(granted: Granted) -> Result<Answer<Organization>, ApiError> {
    Ok(Answer::ok(granted.org.into()))
}

/// `POST /organization`: a root organization (any authenticated user, who becomes
/// its Owner), a team (`parentOrgId`, needs `org:settings` in the parent), or the
/// system organization (name `system`, bootstrap identifiers only).
pub(crate) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<CreateOrganization>,
) -> Result<Answer<Organization>, ApiError> {
    let name = text("name", &body.name, 100)?;
    let display_name = body
        .display_name
        .as_deref()
        .map(|d| text("displayName", d, 200))
        .transpose()?;
    if is_reserved_name(&name) && body.parent_org_id.is_some() {
        return Err(ApiError::invalid_field(
            "parentOrgId",
            "the system organization cannot be a team",
        ));
    }
    // A team needs `org:settings` in its parent: a check on the body's organization,
    // beside the route's own (any authenticated user).
    let parent = match &body.parent_org_id {
        Some(parent_id) => Some(
            gate(
                &state,
                &caller,
                parent_id,
                Named::Path,
                tenancy::Access::Permission(tenancy::Permission::OrgSettings)
                    .requirement(true, false),
                "POST /api/organization",
            )
            .await?
            .org,
        ),
        None => None,
    };
    let creation = Creation {
        name,
        display_name,
        parent,
    };
    let org = organizations::create(
        &state.infra.store,
        &caller,
        &state.config.bootstrap,
        creation,
        Utc::now(),
    )
    .await?;
    Ok(Answer::created(org.into()))
}

/// `GET /organization/:id`: own organization, managed team, or super-admin.
pub(crate) async fn get(granted: Granted) -> Result<Answer<Organization>, ApiError> {
    Ok(Answer::ok(granted.org.into()))
}

/// `PUT /organization/:id` (super-admin).
pub(crate) async fn update(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<UpdateOrganization>,
) -> Result<Answer<Organization>, ApiError> {
    let name = body
        .name
        .as_deref()
        .map(|n| text("name", n, 100))
        .transpose()?;
    let display_name = body
        .display_name
        .as_deref()
        .map(|d| text("displayName", d, 200))
        .transpose()?;
    let org = organizations::update(
        &state.infra.store,
        &caller,
        &granted.org,
        (name.as_deref(), display_name.as_deref()),
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(org.into()))
}

/// `DELETE /organization/:id` (super-admin, step-up): soft delete, teams included.
pub(crate) async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Answer<Deleted>, ApiError> {
    organizations::delete(
        &state.infra.store,
        &state.replica.rule_cache,
        &caller,
        &id,
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(Deleted::new(id)))
}

/// `POST /organization/:id/restore` (super-admin, step-up): a soft-deleted
/// organization back, within `ORG_RESTORE_DAYS`.
pub(crate) async fn restore(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Answer<Organization>, ApiError> {
    let org =
        organizations::restore(&state.infra.store, &state.config, &caller, &id, Utc::now()).await?;
    Ok(Answer::ok(org.into()))
}

/// An organization after a tier change, with the bundles the change removed.
#[derive(Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TierChanged {
    #[serde(flatten)]
    pub organization: Organization,
    /// The bundles the new tier is not eligible for, removed with the change (each
    /// audited as `billing.addon.remove`); empty when none.
    pub removed_bundles: Vec<entitlements::AppliedBundle>,
}

/// `PATCH /organization/:id/tier` (super-admin, step-up).
pub(crate) async fn change_tier(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<ChangeTier>,
) -> Result<Answer<TierChanged>, ApiError> {
    let (org, removed_bundles) = organizations::change_tier(
        &state.infra.store,
        &state.config,
        &state.replica.allowances,
        &caller,
        &granted.org,
        body.tier,
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(TierChanged {
        organization: org.into(),
        removed_bundles,
    }))
}

/// `GET /organization/:id/export` (`org:settings`): the organization's data.
pub(crate) async fn export(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
) -> Result<Answer<OrganizationExport>, ApiError> {
    let export = organizations::export(&state.infra.store, &caller, &granted.org).await?;
    Ok(Answer::ok(export.into()))
}

/// `GET /me/organizations`: the organizations the caller belongs to, with the
/// membership role and the Roles held in each (a lost organization id is found here).
pub(crate) async fn mine(
    State(state): State<AppState>,
    caller: Caller,
    Query(params): Query<PageParams>,
) -> Result<Paged<MyOrganization>, ApiError> {
    let page = params.check(state.config.http.max_page_limit, &["createdAt"])?;
    let (items, total) =
        organizations::mine(&state.infra.store, &caller.user_id, page.limit, page.offset).await?;
    let items = items.into_iter().map(MyOrganization::from).collect();
    Ok(Paged::new("organizations", items, total, page))
}

/// `PATCH /organization/:id/transfer-owner` (`org:settings`, step-up).
pub(crate) async fn transfer_owner(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<TransferOwner>,
) -> Result<Answer<Organization>, ApiError> {
    let to = text("userId", &body.user_id, 200)?;
    let window = chrono::Duration::from_std(state.config.http.step_up_window)
        .unwrap_or(tenancy::DEFAULT_STEP_UP_WINDOW);
    let org = organizations::transfer_owner(
        &state.infra.store,
        (&caller, granted.super_admin),
        &granted.org,
        &to,
        (Utc::now(), window),
    )
    .await?;
    Ok(Answer::ok(org.into()))
}

/// `GET /organization/:id/teams` (member): the teams nested under it.
pub(crate) async fn teams(
    State(state): State<AppState>,
    granted: Granted,
    Query(params): Query<PageParams>,
) -> Result<Paged<Organization>, ApiError> {
    let page = params.check(state.config.http.max_page_limit, &["createdAt"])?;
    let ascending = page.sort_order == crate::http::extract::SortOrder::Asc;
    let (items, total) = organizations::teams(
        &state.infra.store,
        &granted.org,
        page.limit,
        page.offset,
        ascending,
    )
    .await?;
    let items = items.into_iter().map(Organization::from).collect();
    Ok(Paged::new("teams", items, total, page))
}
