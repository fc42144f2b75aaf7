//! What the gate needs to decide (tenancy decides): the organization, the caller's
//! membership and Roles there or in its parent, the stored super-admin flag; and the
//! record of a denial. Loaded in as few queries as the requirement allows, and kept
//! per replica until they change ([`crate::replica::kept`]): an authenticated read whose facts
//! are kept makes no query for the gate.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::ServiceResult;
use crate::config::Config;
use crate::replica::kept::KeptFacts;
use crate::storage::{unit_of_work, OrgRecord, Store};

pub use crate::replica::kept::Facts;

/// The facts, kept until they change ([`crate::replica::kept`]); Roles only when
/// `needs_roles` (membership-only routes, the most frequent reads, skip them). An
/// unknown organization is never kept: a flood of made-up ids cannot push out the
/// real ones.
pub async fn facts(
    store: &Store,
    kept: &KeptFacts,
    org_id: &str,
    user_id: &str,
    needs_roles: bool,
) -> ServiceResult<Arc<Facts>> {
    kept.gate
        .get_or_load(
            store,
            (org_id.to_owned(), user_id.to_owned(), needs_roles),
            |facts: &Facts| facts.org.is_some(),
            load(store, org_id, user_id, needs_roles),
        )
        .await
}

/// Loads the facts from the store.
async fn load(
    store: &Store,
    org_id: &str,
    user_id: &str,
    needs_roles: bool,
) -> ServiceResult<Facts> {
    let Some(snapshot) = store.access_snapshot(org_id, user_id).await? else {
        return Ok(Facts::default());
    };
    let membership = snapshot.membership.clone();
    let roles = match &membership {
        Some(m) if m.active && needs_roles => store.roles_of(org_id, user_id).await?,
        _ => Vec::new(),
    };
    let (parent_membership, parent_roles) = match &snapshot.org.parent_org_id {
        Some(parent) if membership.is_none() => {
            let m = store
                .membership(parent, user_id)
                .await?
                .map(|m| m.membership());
            let r = match &m {
                Some(m) if m.active && needs_roles => store.roles_of(parent, user_id).await?,
                _ => Vec::new(),
            };
            (m, r)
        }
        _ => (None, Vec::new()),
    };
    Ok(Facts {
        super_admin: snapshot.super_admin,
        org: Some(snapshot.org),
        membership,
        roles,
        parent_membership,
        parent_roles,
    })
}

/// Whether the user holds the stored super-admin flag.
pub async fn is_super_admin(store: &Store, user_id: &str) -> ServiceResult<bool> {
    Ok(store.is_super_admin(user_id).await?)
}

/// The system organization, if it was created.
pub async fn system_organization(store: &Store) -> ServiceResult<Option<OrgRecord>> {
    Ok(store.system_organization().await?)
}

/// Records a denied state-changing request, folded per actor, organization and
/// minute (a flood of denials writes one event a minute).
pub async fn record_denial(
    store: &Store,
    event: &audit_chain::AuditEvent,
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    unit_of_work!(store, |tx| {
        // The minute's first denial is chained at once; the others of the minute
        // become one event when it has ended (the relay's flush).
        if tx.fold_denial(event, now).await? == 1 {
            let first = crate::audit::folded_denial(event.clone(), 1, now, now);
            tx.enqueue_audit(&[first]).await?;
        }
        Ok(())
    })
}

/// Makes sure a user seen in a token exists (first sight in this process).
pub async fn first_sight(
    store: &Store,
    user_id: &str,
    email: Option<&str>,
    now: DateTime<Utc>,
) -> ServiceResult<()> {
    Ok(store.ensure_user(user_id, email, now).await?)
}

/// The gate's judgement of the caller in the organization, with the facts it read
/// and whether the caller acted as a super-admin: the one decision the route guard
/// and [`holds`] both make. A personal access token bound to an organization acts as
/// a member, never with the super-admin flag (its reach and subset are the caller's
/// to check first).
pub async fn decide(
    store: &Store,
    config: &Config,
    kept: &KeptFacts,
    caller: &crate::services::context::Caller,
    org_id: &str,
    requirement: tenancy::Requirement,
) -> ServiceResult<(tenancy::Decision, Arc<Facts>, bool)> {
    // Roles matter only when a permission is asked for.
    let needs_roles = requirement.permission.is_some();
    let facts = facts(store, kept, org_id, &caller.user_id, needs_roles).await?;
    let (decision, super_admin) = judge(config, caller, &facts, requirement);
    Ok((decision, facts, super_admin))
}

/// The pure crate's judgement of `requirement` on facts already read, and whether
/// the caller counts as a super-admin.
fn judge(
    config: &Config,
    caller: &crate::services::context::Caller,
    facts: &Facts,
    requirement: tenancy::Requirement,
) -> (tenancy::Decision, bool) {
    let bound = caller.bound();
    let organization = facts.org.as_ref().map(OrgRecord::organization);
    let mut principal = caller.principal();
    principal.super_admin |= facts.super_admin && !bound;
    let access = tenancy::OrgAccess {
        organization: organization.as_ref(),
        membership: facts.membership.as_ref(),
        roles: &facts.roles,
        parent_membership: facts.parent_membership.as_ref(),
        parent_roles: &facts.parent_roles,
    };
    let window = chrono::Duration::from_std(config.http.step_up_window)
        .unwrap_or(tenancy::DEFAULT_STEP_UP_WINDOW);
    let decision = tenancy::authorize(&principal, &access, requirement, Utc::now(), window);
    (decision, principal.super_admin)
}

/// Whether the caller holds `permission` in the organization, as the gate would
/// judge it (a bound personal access token only within its scope); for a route
/// open to every member whose answer depends on it (an admin's view, an admin's
/// delete of someone else's message).
pub async fn holds(
    store: &Store,
    config: &Config,
    kept: &KeptFacts,
    caller: &crate::services::context::Caller,
    org_id: &str,
    permission: tenancy::Permission,
) -> ServiceResult<bool> {
    let scope = caller
        .personal_token
        .as_ref()
        .and_then(|used| used.scope.as_ref());
    if scope.is_some_and(|scope| !scope.allows(permission) || !scope.reaches(org_id)) {
        return Ok(false);
    }
    let requirement = tenancy::Access::Permission(permission).requirement(false, false);
    let (decision, _, _) = decide(store, config, kept, caller, org_id, requirement).await?;
    Ok(decision.allowed)
}

/// Every permission the caller holds in the organization, as [`holds`] judges each,
/// from one read of the facts.
pub async fn held(
    store: &Store,
    config: &Config,
    kept: &KeptFacts,
    caller: &crate::services::context::Caller,
    org_id: &str,
) -> ServiceResult<Vec<tenancy::Permission>> {
    let facts = facts(store, kept, org_id, &caller.user_id, true).await?;
    let scope = caller
        .personal_token
        .as_ref()
        .and_then(|used| used.scope.as_ref());
    Ok(tenancy::Permission::ALL
        .into_iter()
        .filter(|permission| {
            scope.is_none_or(|scope| scope.allows(*permission) && scope.reaches(org_id))
        })
        .filter(|permission| {
            let requirement = tenancy::Access::Permission(*permission).requirement(false, false);
            judge(config, caller, &facts, requirement).0.allowed
        })
        .collect())
}
