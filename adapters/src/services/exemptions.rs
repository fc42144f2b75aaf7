//! Exemptions: requesting a waiver of one rule for some entities, and deciding on it.
//! Which transitions exist and the four-eyes rule are compliance-core's
//! ([`ExemptionAction::decide`]); this module loads, records and audits.

use chrono::{DateTime, Utc};
use compliance_core::ExemptionAction;
use serde_json::json;

use super::{ServiceError, ServiceResult};
use crate::services::context::{event, Caller};
pub use crate::storage::ExemptionRecord;
use crate::storage::{unit_of_work, NewExemption, OrgRecord, Store};

/// What a request for exemptions says (one rule, one or more entities).
#[derive(Debug, Clone)]
pub struct Request {
    /// The rule to waive.
    pub rule_id: String,
    /// The entities, already checked as text.
    pub entity_ids: Vec<String>,
    /// Why.
    pub reason: String,
    /// When the waivers stop; in the future.
    pub expires_at: Option<DateTime<Utc>>,
}

/// Records the requests, all or nothing, once the rule is known to be enforced in the
/// organization (its own, subscribed, or propagated from its parent). Answers the new
/// ids in the order of the entities.
pub async fn request(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    request: Request,
    now: DateTime<Utc>,
) -> ServiceResult<Vec<String>> {
    if request.expires_at.is_some_and(|at| at <= now) {
        return Err(ServiceError::invalid("expiresAt", "must be in the future"));
    }
    if !enforced(store, org, &request.rule_id).await? {
        return Err(ServiceError::invalid(
            "ruleId",
            "no such rule is enforced in this organization",
        ));
    }
    let new: Vec<NewExemption> = request
        .entity_ids
        .into_iter()
        .map(|entity_id| NewExemption {
            rule_id: request.rule_id.clone(),
            entity_id,
            reason: request.reason.clone(),
            expires_at: request.expires_at,
        })
        .collect();
    let ids = unit_of_work!(store, |tx| {
        Ok(tx
            .request_exemptions(&org.id, &new, &caller.user_id, now)
            .await?)
    })?;
    store.facts_changed();
    Ok(ids)
}

/// Whether the organization enforces `rule_id`: its own rule, a subscribed one, or one
/// its parent propagates.
async fn enforced(store: &Store, org: &OrgRecord, rule_id: &str) -> ServiceResult<bool> {
    if store.rule(&org.id, rule_id, false).await?.is_some() {
        return Ok(true);
    }
    if store
        .subscriptions(&org.id)
        .await?
        .iter()
        .any(|s| s.rule_id == rule_id)
    {
        return Ok(true);
    }
    Ok(match &org.parent_org_id {
        Some(parent) => store
            .rule(parent, rule_id, false)
            .await?
            .is_some_and(|r| r.rule.propagate_to_children),
        None => false,
    })
}

/// Approves, rejects or revokes exemption `id` as `caller`: compliance-core decides
/// whether the action applies (and refuses a review by the requester); the change is
/// conditional on the state it was decided from, so a concurrent decision makes this
/// one a conflict rather than a second transition. Approvals and revocations are
/// audited (with the change, in one transaction).
pub async fn decide(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    id: &str,
    action: ExemptionAction,
    note: Option<&str>,
    now: DateTime<Utc>,
) -> ServiceResult<ExemptionRecord> {
    let exemption = store
        .exemption(&org.id, id)
        .await?
        .ok_or(ServiceError::NotFound("exemption".into()))?;
    let to = action.decide(exemption.status, &exemption.requested_by, &caller.user_id)?;
    let audited = match action {
        ExemptionAction::Approve => Some("compliance.exemption.approve"),
        ExemptionAction::Revoke => Some("compliance.exemption.revoke"),
        ExemptionAction::Reject => None,
    };
    let audit: Vec<_> = audited
        .map(|name| {
            event(
                caller,
                name,
                &org.id,
                "exemption",
                id,
                json!({"ruleId": exemption.rule_id, "entityId": exemption.entity_id}),
            )
        })
        .into_iter()
        .collect();
    unit_of_work!(store, |tx| {
        tx.set_exemption_status(
            &org.id,
            id,
            (&[exemption.status], to),
            (&caller.user_id, note),
            now,
        )
        .await?;
        tx.enqueue_audit(&audit).await?;
        Ok(())
    })?;
    store.facts_changed();
    store
        .exemption(&org.id, id)
        .await?
        .ok_or(ServiceError::NotFound("exemption".into()))
}

/// Records one request (see [`request`]) and answers it as stored.
pub async fn request_one(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    request: Request,
    now: DateTime<Utc>,
) -> ServiceResult<ExemptionRecord> {
    let ids = self::request(store, caller, org, request, now).await?;
    let Some(id) = ids.first() else {
        return Err(ServiceError::NotFound("exemption".into()));
    };
    store
        .exemption(&org.id, id)
        .await?
        .ok_or(ServiceError::NotFound("exemption".into()))
}

/// What a list of exemptions is narrowed to.
#[derive(Debug, Clone, Copy, Default)]
pub struct Filter<'a> {
    /// One status.
    pub status: Option<&'a str>,
    /// One rule.
    pub rule_id: Option<&'a str>,
    /// One entity.
    pub entity_id: Option<&'a str>,
}

/// A page of the organization's exemptions: (exemptions, total).
pub async fn list(
    store: &Store,
    org: &OrgRecord,
    filter: Filter<'_>,
    limit: u32,
    offset: u64,
) -> ServiceResult<(Vec<ExemptionRecord>, u64)> {
    Ok(store
        .exemptions(
            &org.id,
            filter.status,
            filter.rule_id,
            filter.entity_id,
            limit,
            offset,
        )
        .await?)
}
