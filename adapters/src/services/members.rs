//! Members and Roles of an organization: who belongs, with which membership role,
//! and which Roles they hold. tenancy decides (the Role a membership role implies,
//! the escalation guards, the built-in Roles that cannot change); every change is
//! audited in the same transaction.

use std::collections::BTreeSet;

use audit_chain::AuditEvent;
use chrono::{DateTime, Utc};
use serde_json::json;
use tenancy::{
    guard_role_assignment, guard_role_definition, guard_role_mutation, implied_role, Author,
    MembershipRole, Permission,
};

use super::{ServiceError, ServiceResult};
use crate::config::Config;
use crate::replica::allowance::Allowances;
use crate::services::context::{event, Caller};
use crate::storage::{unit_of_work, OrgRecord, Seats, Store};
/// What the member and Role workflows answer.
pub use crate::storage::{MemberRecord, RoleRecord};

/// The built-in Role `name` of an organization (every organization has them).
pub async fn builtin(store: &Store, org_id: &str, name: &str) -> ServiceResult<RoleRecord> {
    store.role_named(org_id, name).await?.ok_or_else(|| {
        ServiceError::Broken(format!(
            "organization {org_id} lacks its built-in {name} role"
        ))
    })
}

/// A page of the organization's members: (members, total).
pub async fn list(
    store: &Store,
    org: &OrgRecord,
    limit: u32,
    offset: u64,
    ascending: bool,
) -> ServiceResult<(Vec<MemberRecord>, u64)> {
    Ok(store.members(&org.id, limit, offset, ascending).await?)
}

/// Adds `user_id` with `role`, granting the Role it implies (never one the author
/// could not hand out).
pub async fn add(
    store: &Store,
    config: &Config,
    allowances: &Allowances,
    (caller, author): (&Caller, Author<'_>),
    org: &OrgRecord,
    (user_id, email): (&str, Option<&str>),
    role: MembershipRole,
    now: DateTime<Utc>,
) -> ServiceResult<Option<MemberRecord>> {
    let implied = builtin(store, &org.id, implied_role(role)).await?;
    guard_role_assignment(author, &implied.role())?;
    let root = seats_of(store, config, allowances, org).await?;
    store.ensure_user(user_id, email, now).await?;
    let audit = [event(
        caller,
        "org.member.add",
        &org.id,
        "user",
        user_id,
        json!({"role": role}),
    )];
    add_members(
        store,
        (user_id, role),
        &[(org.id.clone(), implied.id)],
        (&root.id, now),
        &audit,
    )
    .await?;
    Ok(store.membership(&org.id, user_id).await?)
}

/// Adds `user_id` to several teams of the organization, all or nothing.
pub async fn add_to_teams(
    store: &Store,
    config: &Config,
    allowances: &Allowances,
    (caller, author): (&Caller, Author<'_>),
    org: &OrgRecord,
    user_id: &str,
    team_ids: &[String],
    role: MembershipRole,
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    let root = seats_of(store, config, allowances, org).await?;
    let mut grants = Vec::with_capacity(team_ids.len());
    for team_id in team_ids {
        let team = store.organization(team_id).await?;
        if team.as_ref().and_then(|t| t.parent_org_id.as_deref()) != Some(org.id.as_str()) {
            return Err(ServiceError::invalid(
                "teamIds",
                format!("`{team_id}` is not a team of this organization"),
            ));
        }
        let implied = builtin(store, team_id, implied_role(role)).await?;
        guard_role_assignment(author, &implied.role())?;
        grants.push((team_id.clone(), implied.id));
    }
    store.ensure_user(user_id, None, now).await?;
    let audit: Vec<_> = grants
        .iter()
        .map(|(team_id, _)| {
            event(
                caller,
                "org.member.add",
                team_id,
                "user",
                user_id,
                json!({"role": role, "bulk": true}),
            )
        })
        .collect();
    add_members(store, (user_id, role), &grants, (&root.id, now), &audit).await
}

/// Adds memberships (organization, Role to grant) under the account root's lock,
/// all or nothing: refused when the seats do not take the person.
async fn add_members(
    store: &Store,
    (user_id, role): (&str, MembershipRole),
    grants: &[(String, String)],
    (root_id, now): (&str, DateTime<Utc>),
    audit: &[AuditEvent],
) -> ServiceResult<()> {
    unit_of_work!(store, |tx| {
        tx.lock_organization(root_id).await?;
        tx.insert_memberships(user_id, role, grants, now).await?;
        seat_taken(tx.seats(root_id).await?)?;
        tx.enqueue_audit(audit).await?;
        Ok(())
    })?;
    store.facts_changed();
    Ok(())
}

/// Whether an account's seats, counted with the person a unit just added (or
/// activated), take that person over the others: entitlements decides.
pub(crate) fn seat_taken(seats: Seats) -> ServiceResult<()> {
    let Some(limit) = seats.limit else {
        return Err(ServiceError::Broken(
            "the seat limit is not synchronized".to_owned(),
        ));
    };
    // The count includes the person: the same rule as a pool's charge decides
    // whether the seats take one more over the others.
    let others = i64::try_from(seats.used.saturating_sub(1)).unwrap_or(i64::MAX);
    match crate::storage::quota_refusal(others, limit, 1) {
        Some(refusal) => Err(seats_refused(refusal)),
        None => Ok(()),
    }
}

/// Removes a member (never the owner).
pub async fn remove(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    user_id: &str,
) -> ServiceResult<()> {
    if user_id == org.owner_id {
        return Err(ServiceError::Conflict(
            "the owner cannot be removed; transfer ownership first".to_owned(),
        ));
    }
    let audit = [event(
        caller,
        "org.member.remove",
        &org.id,
        "user",
        user_id,
        json!({}),
    )];
    unit_of_work!(store, |tx| {
        tx.remove_member(&org.id, user_id).await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    store.facts_changed();
    Ok(())
}

/// Moves a member to `role` (the owner's changes only by transfer), swapping the
/// implied Roles.
pub async fn change_role(
    store: &Store,
    (caller, author): (&Caller, Author<'_>),
    org: &OrgRecord,
    user_id: &str,
    role: MembershipRole,
) -> ServiceResult<Option<MemberRecord>> {
    let member = store
        .membership(&org.id, user_id)
        .await?
        .ok_or(ServiceError::NotFound("member".into()))?;
    if member.role == MembershipRole::Owner {
        return Err(ServiceError::Conflict(
            "the owner's role changes only by ownership transfer".to_owned(),
        ));
    }
    let grant = builtin(store, &org.id, implied_role(role)).await?;
    let drop = builtin(store, &org.id, implied_role(member.role)).await?;
    guard_role_assignment(author, &grant.role())?;
    let audit = [event(
        caller,
        "org.role.member.add",
        &org.id,
        "user",
        user_id,
        json!({"role": role, "roleId": grant.id}),
    )];
    unit_of_work!(store, |tx| {
        tx.set_member_role(&org.id, user_id, role, &drop.id, &grant.id)
            .await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    store.facts_changed();
    Ok(store.membership(&org.id, user_id).await?)
}

/// Activates or deactivates a member (the owner is never deactivated).
pub async fn set_active(
    store: &Store,
    config: &Config,
    allowances: &Allowances,
    caller: &Caller,
    org: &OrgRecord,
    user_id: &str,
    active: bool,
) -> ServiceResult<Option<MemberRecord>> {
    if !active && user_id == org.owner_id {
        return Err(ServiceError::Conflict(
            "the owner cannot be deactivated".to_owned(),
        ));
    }
    let action = if active {
        "org.member.activate"
    } else {
        "org.member.deactivate"
    };
    let root = seats_of(store, config, allowances, org).await?;
    let audit = [event(caller, action, &org.id, "user", user_id, json!({}))];
    unit_of_work!(store, |tx| {
        tx.lock_organization(&root.id).await?;
        tx.set_member_active((&org.id, user_id), active).await?;
        if active {
            seat_taken(tx.seats(&root.id).await?)?;
        }
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    store.facts_changed();
    Ok(store.membership(&org.id, user_id).await?)
}

/// The account root whose seats a membership of `org` takes, synchronized.
pub(crate) async fn seats_of(
    store: &Store,
    config: &Config,
    allowances: &Allowances,
    org: &OrgRecord,
) -> ServiceResult<OrgRecord> {
    let root = super::entitlement::root_of(store, org).await?;
    super::entitlement::ensure_synced(store, config, allowances, &root).await?;
    Ok(root)
}

pub(crate) fn seats_refused(refusal: crate::storage::QuotaRefusal) -> ServiceError {
    ServiceError::Quota {
        dimension: "seats",
        refusal,
    }
}

/// A page of the organization's Roles with their members: (roles, total).
pub async fn roles(
    store: &Store,
    org: &OrgRecord,
    limit: u32,
    offset: u64,
    ascending: bool,
) -> ServiceResult<(Vec<RoleRecord>, u64)> {
    let mut all = store.roles(&org.id).await?;
    if !ascending {
        all.reverse();
    }
    let total = all.len() as u64;
    let items = all
        .into_iter()
        .skip(usize::try_from(offset).unwrap_or(usize::MAX))
        .take(limit as usize)
        .collect();
    Ok((items, total))
}

/// Defines a custom Role (never with a permission the author lacks).
pub async fn create_role(
    store: &Store,
    (caller, author): (&Caller, Author<'_>),
    org: &OrgRecord,
    name: &str,
    permissions: &BTreeSet<Permission>,
    now: DateTime<Utc>,
) -> ServiceResult<Option<RoleRecord>> {
    guard_role_definition(author, permissions)?;
    let audit = |role_id: &str| {
        vec![event(
            caller,
            "org.role.create",
            &org.id,
            "role",
            role_id,
            json!({"name": name, "permissions": permissions}),
        )]
    };
    let role_id = unit_of_work!(store, |tx| {
        let role_id = tx.create_role(&org.id, name, permissions, now).await?;
        tx.enqueue_audit(&audit(&role_id)).await?;
        Ok(role_id)
    })?;
    store.facts_changed();
    Ok(store.role(&org.id, &role_id).await?)
}

async fn custom_role(store: &Store, org: &OrgRecord, role_id: &str) -> ServiceResult<RoleRecord> {
    let existing = store
        .role(&org.id, role_id)
        .await?
        .ok_or(ServiceError::NotFound("role".into()))?;
    guard_role_mutation(&existing.role())?;
    Ok(existing)
}

/// Changes a custom Role's name or permissions.
pub async fn update_role(
    store: &Store,
    (caller, author): (&Caller, Author<'_>),
    org: &OrgRecord,
    role_id: &str,
    (name, permissions): (Option<&str>, Option<&BTreeSet<Permission>>),
) -> ServiceResult<Option<RoleRecord>> {
    custom_role(store, org, role_id).await?;
    if let Some(permissions) = permissions {
        guard_role_definition(author, permissions)?;
    }
    let audit = [event(
        caller,
        "org.role.update",
        &org.id,
        "role",
        role_id,
        json!({"name": name, "permissions": permissions}),
    )];
    unit_of_work!(store, |tx| {
        tx.update_role(&org.id, role_id, name, permissions).await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    store.facts_changed();
    Ok(store.role(&org.id, role_id).await?)
}

/// Deletes a custom Role.
pub async fn delete_role(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    role_id: &str,
) -> ServiceResult<()> {
    let existing = custom_role(store, org, role_id).await?;
    let audit = [event(
        caller,
        "org.role.delete",
        &org.id,
        "role",
        role_id,
        json!({"name": existing.name}),
    )];
    unit_of_work!(store, |tx| {
        tx.delete_role(&org.id, role_id).await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    store.facts_changed();
    Ok(())
}

/// Gives a member a Role (one the author could hand out).
pub async fn add_role_member(
    store: &Store,
    (caller, author): (&Caller, Author<'_>),
    org: &OrgRecord,
    role_id: &str,
    user_id: &str,
) -> ServiceResult<Option<RoleRecord>> {
    let role = store
        .role(&org.id, role_id)
        .await?
        .ok_or(ServiceError::NotFound("role".into()))?;
    if store.membership(&org.id, user_id).await?.is_none() {
        return Err(ServiceError::invalid(
            "userId",
            "must be a member of the organization",
        ));
    }
    guard_role_assignment(author, &role.role())?;
    let audit = [event(
        caller,
        "org.role.member.add",
        &org.id,
        "role",
        role_id,
        json!({"userId": user_id}),
    )];
    unit_of_work!(store, |tx| {
        tx.add_role_member(&org.id, role_id, user_id).await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    store.facts_changed();
    Ok(store.role(&org.id, role_id).await?)
}

/// Takes a Role from a member (not guarded: taking away never escalates).
pub async fn remove_role_member(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    role_id: &str,
    user_id: &str,
) -> ServiceResult<()> {
    let audit = [event(
        caller,
        "org.role.member.remove",
        &org.id,
        "role",
        role_id,
        json!({"userId": user_id}),
    )];
    unit_of_work!(store, |tx| {
        tx.remove_role_member(&org.id, role_id, user_id).await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    store.facts_changed();
    Ok(())
}
