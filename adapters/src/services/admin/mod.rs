//! Platform administration. Here: who is a super-admin (tenancy decides whether a
//! change may be made: a super-admin with a fresh step-up; never the last one; the
//! change is audited in the system organization's chain, in the same transaction).
//! Accounts, a user's own features and an organization's build namespace have
//! modules of their own.

pub mod features;
pub mod impersonation;
pub mod namespace;
pub mod users;

use chrono::{DateTime, Duration, Utc};
use serde_json::json;

use super::{ServiceError, ServiceResult};
use crate::services::context::{event, event_on, Caller};
use crate::storage::{unit_of_work, Store};

/// The super-admins' user ids.
pub async fn list(store: &Store) -> ServiceResult<Vec<String>> {
    Ok(store.super_admins().await?)
}

/// Grants (or revokes) `user_id` the super-admin flag; `caller` is a super-admin.
pub async fn change(
    store: &Store,
    caller: &Caller,
    user_id: &str,
    grant: bool,
    (now, step_up_window): (DateTime<Utc>, Duration),
) -> ServiceResult<()> {
    let actor = tenancy::Principal {
        super_admin: true,
        ..caller.principal()
    };
    let count = store.super_admins().await?.len();
    tenancy::check_super_admin_change(&actor, grant, count, now, step_up_window)?;
    let system = store
        .system_organization()
        .await?
        .ok_or(ServiceError::Forbidden("there is no system organization"))?;
    let action = if grant {
        "admin.superadmin.grant"
    } else {
        "admin.superadmin.revoke"
    };
    let audit = [event(
        caller,
        action,
        &system.id,
        "user",
        user_id,
        json!({}),
    )];
    unit_of_work!(store, |tx| {
        tx.set_super_admin(user_id, grant, now).await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    store.facts_changed();
    Ok(())
}

/// The audit events of an administration action on organization `org_id`: one in
/// its chain (as `affectedOrgId`, so its admins see it) and one in the system
/// organization's, when there is one.
pub async fn org_events(
    store: &Store,
    caller: &Caller,
    action: &str,
    org_id: &str,
    details: serde_json::Value,
) -> ServiceResult<Vec<audit_chain::AuditEvent>> {
    let mut events = vec![event_on(
        caller,
        action,
        (org_id, Some(org_id)),
        ("organization", org_id),
        details.clone(),
    )];
    if let Some(system) = store.system_organization().await? {
        events.push(event_on(
            caller,
            action,
            (&system.id, None),
            ("organization", org_id),
            details,
        ));
    }
    Ok(events)
}
