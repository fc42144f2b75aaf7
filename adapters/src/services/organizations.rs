//! Organizations and teams: creation (root, team, or the system organization by a
//! bootstrap identifier), renaming, deletion, tier, export, ownership transfer.
//! tenancy decides (bootstrap, team nesting, the transfer's plan); every change is
//! audited in the same transaction.

use chrono::{DateTime, Duration, Utc};
use entitlements::Tier;
use serde::Serialize;
use serde_json::json;
use tenancy::{builtin_roles, check_bootstrap, check_team_parent, is_reserved_name, BootstrapList};

use super::members::builtin;
use super::{ServiceError, ServiceResult};
use crate::compliance::RuleCache;
use crate::config::Config;
use crate::replica::allowance::Allowances;
use crate::services::context::{event, event_on, Caller};
use crate::storage::{
    unit_of_work, InvitationRecord, MemberRecord, NewOrganization, RoleRecord, Store, StoreError,
    SAME_NAME,
};
/// An organization, as the workflows answer it.
pub use crate::storage::{MyOrganization as Membership, OrgRecord};

/// A new organization as the request names it (checked text).
#[derive(Debug, Clone)]
pub struct Creation {
    /// Its name; `system` asks for the system organization.
    pub name: String,
    /// Its display name.
    pub display_name: Option<String>,
    /// The parent, for a team, already authorized (`org:settings` there).
    pub parent: Option<OrgRecord>,
}

/// Creates a root organization (the caller owns it), a team under `parent`, or the
/// system organization (bootstrap identifiers only, once).
pub async fn create(
    store: &Store,
    caller: &Caller,
    bootstrap: &BootstrapList,
    creation: Creation,
    now: DateTime<Utc>,
) -> ServiceResult<OrgRecord> {
    let Creation {
        name,
        display_name,
        parent,
    } = creation;
    let owner_id = caller.user_id.clone();
    let new = if is_reserved_name(&name) {
        if parent.is_some() {
            return Err(ServiceError::invalid(
                "parentOrgId",
                "the system organization cannot be a team",
            ));
        }
        let email = caller.email.as_deref().unwrap_or_default();
        check_bootstrap(bootstrap, email, store.system_exists().await?)?;
        NewOrganization {
            name: tenancy::SYSTEM_ORG_NAME.to_owned(),
            display_name,
            parent_org_id: None,
            tier: Tier::Enterprise,
            is_system: true,
            owner_id,
            builtin_roles: builtin_roles(true),
        }
    } else if let Some(parent) = parent {
        check_team_parent(&parent.organization())?;
        NewOrganization {
            name,
            display_name,
            parent_org_id: Some(parent.id.clone()),
            tier: parent.tier,
            is_system: false,
            owner_id,
            builtin_roles: builtin_roles(false),
        }
    } else {
        NewOrganization {
            name,
            display_name,
            parent_org_id: None,
            tier: Tier::Developer,
            is_system: false,
            owner_id,
            builtin_roles: builtin_roles(false),
        }
    };
    let details =
        json!({"name": new.name, "parentOrgId": new.parent_org_id, "system": new.is_system});
    let audit = |org_id: &str| {
        vec![event(
            caller,
            "org.create",
            org_id,
            "organization",
            org_id,
            details.clone(),
        )]
    };
    let id = unit_of_work!(store, |tx| {
        let id = tx.create_organization(&new, now).await?;
        tx.enqueue_audit(&audit(&id)).await?;
        Ok(id)
    })?;
    store.facts_changed();
    store
        .organization(&id)
        .await?
        .ok_or(ServiceError::NotFound("organization".into()))
}

async fn reread(store: &Store, id: &str) -> ServiceResult<OrgRecord> {
    store
        .organization(id)
        .await?
        .ok_or(ServiceError::NotFound("organization".into()))
}

/// Renames an organization; `system` names the system organization and only it.
pub async fn update(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    (name, display_name): (Option<&str>, Option<&str>),
    now: DateTime<Utc>,
) -> ServiceResult<OrgRecord> {
    if name.is_some_and(|n| is_reserved_name(n) != org.is_system) {
        return Err(ServiceError::invalid(
            "name",
            "`system` is reserved for the system organization",
        ));
    }
    let audit = [event(
        caller,
        "org.update",
        &org.id,
        "organization",
        &org.id,
        json!({"name": name, "displayName": display_name}),
    )];
    unit_of_work!(store, |tx| {
        tx.update_organization(&org.id, name, display_name, now)
            .await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    store.facts_changed();
    reread(store, &org.id).await
}

/// Soft-deletes an organization and its teams (never the system organization); the
/// rule caches of every replica forget them.
pub async fn delete(
    store: &Store,
    rule_cache: &RuleCache,
    caller: &Caller,
    id: &str,
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    let Some(org) = store.organization(id).await? else {
        return Err(match store.deleted_organization(id).await? {
            Some(_) => ServiceError::Conflict("the organization is already deleted".to_owned()),
            None => ServiceError::NotFound("organization".into()),
        });
    };
    let org = &org;
    if org.is_system {
        return Err(ServiceError::Conflict(
            "the system organization cannot be deleted".to_owned(),
        ));
    }
    let mut audit = lifecycle_events(store, caller, "org.soft_delete", org, json!({})).await?;
    // A super-admin's delete of an organization (the route allows no one else) is an
    // administration action too, beside org.soft_delete in the system chain.
    if let Some(system) = store.system_organization().await? {
        audit.push(event_on(
            caller,
            "admin.org.delete",
            (&system.id, None),
            ("organization", &org.id),
            json!({"name": org.name}),
        ));
    }
    unit_of_work!(store, |tx| {
        tx.delete_organization(&org.id, now).await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    store.facts_changed();
    // Cached rule sets carry the organization (and its teams): a deleted one must not
    // validate on.
    rule_cache.forget(&crate::compliance::Stale::Orgs(vec![org.id.clone()]));
    Ok(())
}

/// The audit events of a delete or restore: one in the organization's chain, one in
/// the system organization's.
async fn lifecycle_events(
    store: &Store,
    caller: &Caller,
    action: &str,
    org: &OrgRecord,
    details: serde_json::Value,
) -> ServiceResult<Vec<audit_chain::AuditEvent>> {
    let mut events = vec![event_on(
        caller,
        action,
        (&org.id, Some(&org.id)),
        ("organization", &org.id),
        details.clone(),
    )];
    if let Some(system) = store.system_organization().await? {
        events.push(event_on(
            caller,
            action,
            (&system.id, None),
            ("organization", &org.id),
            details,
        ));
    }
    Ok(events)
}

/// Restores a soft-deleted organization (and the teams deleted with it) to exactly
/// the state it left, within `ORG_RESTORE_DAYS` of its delete (410 after, when its
/// data is purged or about to be). A team whose root is deleted cannot come back
/// alone (409); a name another organization took meanwhile is 409 naming it.
pub async fn restore(
    store: &Store,
    config: &Config,
    caller: &Caller,
    id: &str,
    now: DateTime<Utc>,
) -> ServiceResult<OrgRecord> {
    let Some(deleted) = store.deleted_organization(id).await? else {
        if store.organization(id).await?.is_some() {
            return Err(ServiceError::Conflict(
                "the organization is not deleted".to_owned(),
            ));
        }
        // Purged: its audit chain remembers it.
        if !store.chain_batch(id, 0, 1).await?.is_empty() {
            return Err(ServiceError::Gone(format!(
                "the organization was purged after ORG_RESTORE_DAYS ({} days)",
                config.org_restore_days
            )));
        }
        return Err(ServiceError::NotFound("deleted organization".into()));
    };
    if !tenancy::RestoreWindow::days(config.org_restore_days).is_open(deleted.deleted_at, now) {
        return Err(ServiceError::Gone(format!(
            "the organization was deleted more than {} days ago (ORG_RESTORE_DAYS); its data is purged",
            config.org_restore_days
        )));
    }
    if let Some(root) = &deleted.org.parent_org_id {
        if store.organization(root).await?.is_none() {
            return Err(ServiceError::Conflict(
                "the team's root organization is deleted: restore the root".to_owned(),
            ));
        }
    }
    let audit = lifecycle_events(
        store,
        caller,
        "org.restore",
        &deleted.org,
        json!({"deletedAt": deleted.deleted_at}),
    )
    .await?;
    unit_of_work!(store, |tx| {
        match tx.restore_organization(&deleted).await {
            Err(StoreError::Conflict(why)) if why == SAME_NAME => {
                return Err(ServiceError::Conflict(format!(
                    "another organization took the name `{}` meanwhile: rename it first",
                    deleted.org.name
                )))
            }
            other => other?,
        }
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    store.facts_changed();
    store
        .organization(id)
        .await?
        .ok_or(ServiceError::NotFound("organization".into()))
}

/// Moves an account root (and its teams) to another tier, deriving its limits
/// again in the same transaction; answers the organization and the bundles the new
/// tier could not buy, removed with it.
pub async fn change_tier(
    store: &Store,
    config: &Config,
    allowances: &Allowances,
    caller: &Caller,
    org: &OrgRecord,
    tier: Tier,
    now: DateTime<Utc>,
) -> ServiceResult<(OrgRecord, Vec<entitlements::AppliedBundle>)> {
    let removed =
        super::billing::change_tier(store, config, allowances, caller, org, tier, now).await?;
    Ok((reread(store, &org.id).await?, removed))
}

/// Everything the organization holds about people and access.
#[derive(Debug, Clone, Serialize)]
pub struct Export {
    /// The organization.
    pub organization: OrgRecord,
    /// Its members.
    pub members: Vec<MemberRecord>,
    /// Its teams.
    pub teams: Vec<OrgRecord>,
    /// Its Roles.
    pub roles: Vec<RoleRecord>,
    /// Its invitations.
    pub invitations: Vec<InvitationRecord>,
}

/// The organization's export, audited `admin.org.export`.
pub async fn export(store: &Store, caller: &Caller, org: &OrgRecord) -> ServiceResult<Export> {
    let (members, _) = store.members(&org.id, u32::MAX, 0, true).await?;
    let (teams, _) = store.teams(&org.id, u32::MAX, 0, true).await?;
    let (invitations, _) = store.invitations(&org.id, u32::MAX, 0, true).await?;
    let roles = store.roles(&org.id).await?;
    let audit = [event_on(
        caller,
        "admin.org.export",
        (&org.id, Some(&org.id)),
        ("organization", &org.id),
        json!({}),
    )];
    super::audit::record(store, &audit).await?;
    Ok(Export {
        organization: org.clone(),
        members,
        teams,
        roles,
        invitations,
    })
}

/// A page of the organizations `user_id` belongs to: (organizations, total).
pub async fn mine(
    store: &Store,
    user_id: &str,
    limit: u32,
    offset: u64,
) -> ServiceResult<(Vec<Membership>, u64)> {
    Ok(store.organizations_of(user_id, limit, offset).await?)
}

/// A page of the organization's teams: (teams, total).
pub async fn teams(
    store: &Store,
    org: &OrgRecord,
    limit: u32,
    offset: u64,
    ascending: bool,
) -> ServiceResult<(Vec<OrgRecord>, u64)> {
    Ok(store.teams(&org.id, limit, offset, ascending).await?)
}

/// Hands the ownership to `to`, an active member, as tenancy plans it (the owner
/// or a super-admin, with a fresh step-up); the Owner Role moves with it.
pub async fn transfer_owner(
    store: &Store,
    (caller, super_admin): (&Caller, bool),
    org: &OrgRecord,
    to: &str,
    (now, step_up_window): (DateTime<Utc>, Duration),
) -> ServiceResult<OrgRecord> {
    let target = store.membership(&org.id, to).await?.map(|m| m.membership());
    let mut actor = caller.principal();
    actor.super_admin = super_admin;
    let plan = tenancy::plan_transfer(&actor, &org.owner_id, target.as_ref(), now, step_up_window)
        .map_err(|e| match e {
            tenancy::TenancyError::NewOwnerNotMember => {
                ServiceError::invalid("userId", e.to_string())
            }
            other => other.into(),
        })?;
    let grant = builtin(store, &org.id, plan.grant).await?;
    let revoke = match plan.revoke {
        Some(name) => Some(builtin(store, &org.id, name).await?.id),
        None => None,
    };
    let audit = [event(
        caller,
        "org.ownership.transfer",
        &org.id,
        "organization",
        &org.id,
        json!({"from": plan.from, "to": plan.to}),
    )];
    unit_of_work!(store, |tx| {
        tx.transfer_owner(
            &org.id,
            (&plan.from, &plan.to),
            (&grant.id, revoke.as_deref()),
            now,
        )
        .await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    store.facts_changed();
    reread(store, &org.id).await
}
