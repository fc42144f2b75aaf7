//! Policies: named groups of an organization's rules. Changes are audited with the
//! change, in one transaction.

use chrono::{DateTime, Utc};
use serde_json::json;

use super::{ServiceError, ServiceResult};
use crate::services::context::{event, Caller};
pub use crate::storage::PolicyRecord;
use crate::storage::{new_id, unit_of_work, OrgRecord, Store, Transaction};

/// What a policy is made of, as a request gives it.
#[derive(Debug, Clone, Default)]
pub struct Fields<'a> {
    /// Checked as text by the handler.
    pub name: Option<&'a str>,
    /// Free text.
    pub description: Option<&'a str>,
    /// The rules it groups.
    pub rule_ids: Option<&'a [String]>,
}

/// A new policy; only the system organization owns template policies.
pub async fn create(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    fields: Fields<'_>,
    is_template: bool,
    now: DateTime<Utc>,
) -> ServiceResult<PolicyRecord> {
    if is_template && !org.is_system {
        return Err(ServiceError::Forbidden(
            "only the system organization owns template policies",
        ));
    }
    let name = fields.name.unwrap_or_default();
    let id = new_id();
    let audit = [event(
        caller,
        "compliance.policy.create",
        &org.id,
        "policy",
        &id,
        json!({"name": name}),
    )];
    unit_of_work!(&store, |tx| {
        tx.insert_policy(
            (&id, &org.id),
            (name, fields.description),
            fields.rule_ids.unwrap_or_default(),
            is_template,
            now,
        )
        .await?;
        tx.enqueue_audit(&audit).await?;
        written(tx, &org.id, &id).await
    })
}

/// A policy as the transaction that wrote it sees it.
async fn written(tx: &mut Transaction<'_>, org_id: &str, id: &str) -> ServiceResult<PolicyRecord> {
    tx.policy(org_id, id)
        .await?
        .ok_or(ServiceError::NotFound("policy".into()))
}

/// A page of the organization's policies, filtered by name: (policies, total).
pub async fn list(
    store: &Store,
    org: &OrgRecord,
    name: Option<&str>,
    limit: u32,
    offset: u64,
) -> ServiceResult<(Vec<PolicyRecord>, u64)> {
    Ok(store.policies(&org.id, name, None, limit, offset).await?)
}

/// One policy of the organization.
pub async fn get(store: &Store, org: &OrgRecord, id: &str) -> ServiceResult<PolicyRecord> {
    store
        .policy(&org.id, id)
        .await?
        .ok_or(ServiceError::NotFound("policy".into()))
}

/// Changes the fields given; the others stay.
pub async fn update(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    id: &str,
    fields: Fields<'_>,
    now: DateTime<Utc>,
) -> ServiceResult<PolicyRecord> {
    let audit = [event(
        caller,
        "compliance.policy.update",
        &org.id,
        "policy",
        id,
        json!({}),
    )];
    unit_of_work!(&store, |tx| {
        tx.update_policy(
            (&org.id, id),
            (fields.name, fields.description, fields.rule_ids),
            now,
        )
        .await?;
        tx.enqueue_audit(&audit).await?;
        written(tx, &org.id, id).await
    })
}

/// Deletes the policy (its rules stay).
pub async fn delete(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    id: &str,
) -> ServiceResult<()> {
    let audit = [event(
        caller,
        "compliance.policy.delete",
        &org.id,
        "policy",
        id,
        json!({}),
    )];
    unit_of_work!(&store, |tx| {
        tx.delete_policy(&org.id, id).await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })
}
