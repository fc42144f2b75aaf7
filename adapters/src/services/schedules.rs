//! Scan schedules: a target and a five-field cron expression (UTC), validated at
//! insert and update (400 `INVALID_CRON` naming the field). An active schedule keeps
//! the next time it is due; the scan scheduler (one replica at a time, under a lease)
//! starts its scan then. `DELETE` deactivates, as document 1's state table says.
//! Changes are audited `compliance.scan-schedule.create/update/delete` with the change.

use chrono::{DateTime, Utc};
use serde_json::json;

use super::scans::{cron, target};
use super::{ServiceError, ServiceResult};
use crate::config::Config;
use crate::services::context::{event, Caller};
use crate::storage::{unit_of_work, OrgRecord, ScheduleFields, ScheduleRecord, Store};

/// The longest cron expression taken.
const MAX_EXPRESSION: usize = 200;

fn expression(value: &str) -> ServiceResult<(String, Option<DateTime<Utc>>)> {
    if value.chars().count() > MAX_EXPRESSION {
        return Err(ServiceError::invalid(
            "cronExpression",
            format!("must be at most {MAX_EXPRESSION} characters"),
        ));
    }
    let schedule = cron(value)?;
    let normalized = value.split_whitespace().collect::<Vec<_>>().join(" ");
    Ok((normalized, schedule.next_after(Utc::now())))
}

/// 409: the organization holds as many active schedules as
/// `COMPLIANCE_MAX_SCHEDULES_PER_ORG` allows.
fn at_the_cap(config: &Config) -> ServiceError {
    ServiceError::Conflict(format!(
        "the organization already has {} active scan schedules, the most COMPLIANCE_MAX_SCHEDULES_PER_ORG allows; deactivate one first",
        config.compliance.max_schedules_per_org
    ))
}

/// A new active schedule.
pub async fn create(
    store: &Store,
    config: &Config,
    caller: &Caller,
    org: &OrgRecord,
    target_name: &str,
    cron_expression: &str,
) -> ServiceResult<ScheduleRecord> {
    let target = target("target", target_name)?;
    let (cron_expression, next_run_at) = expression(cron_expression)?;
    let now = Utc::now();
    let fields = ScheduleFields {
        target,
        cron_expression: &cron_expression,
        is_active: true,
        next_run_at,
    };
    let audit = |id: &str| {
        vec![event(
            caller,
            "compliance.scan-schedule.create",
            &org.id,
            "scan-schedule",
            id,
            json!({"target": target, "cronExpression": cron_expression}),
        )]
    };
    let id = crate::new_id();
    let max = config.compliance.max_schedules_per_org;
    let created = unit_of_work!(store, |tx| {
        let created = tx
            .create_schedule((&id, &org.id), (fields, max), &caller.user_id, now)
            .await?;
        if created {
            tx.enqueue_audit(&audit(&id)).await?;
        }
        Ok(created)
    })?;
    if !created {
        return Err(at_the_cap(config));
    }
    existing(store, org, &id).await
}

/// A page of the organization's schedules.
pub async fn list(
    store: &Store,
    org: &OrgRecord,
    limit: u32,
    offset: u64,
) -> ServiceResult<(Vec<ScheduleRecord>, u64)> {
    Ok(store.schedules(&org.id, limit, offset).await?)
}

async fn existing(store: &Store, org: &OrgRecord, id: &str) -> ServiceResult<ScheduleRecord> {
    store
        .schedule(&org.id, id)
        .await?
        .ok_or(ServiceError::NotFound("scan schedule".into()))
}

/// What a change of a schedule gives.
#[derive(Debug, Clone, Copy, Default)]
pub struct Change<'a> {
    /// A new target.
    pub target: Option<&'a str>,
    /// A new expression.
    pub cron_expression: Option<&'a str>,
    /// Active or not.
    pub is_active: Option<bool>,
}

/// Changes a schedule (target and/or expression, or the active flag); the next run
/// is computed again from now.
pub async fn change(
    store: &Store,
    config: &Config,
    caller: &Caller,
    org: &OrgRecord,
    id: &str,
    change: Change<'_>,
) -> ServiceResult<ScheduleRecord> {
    if change.target.is_none() && change.cron_expression.is_none() && change.is_active.is_none() {
        return Err(ServiceError::invalid(
            "target",
            "give target and/or cronExpression",
        ));
    }
    let current = existing(store, org, id).await?;
    let target = match change.target {
        Some(t) => target("target", t)?,
        None => target("target", &current.target)?,
    };
    let (cron_expression, next) =
        expression(change.cron_expression.unwrap_or(&current.cron_expression))?;
    let is_active = change.is_active.unwrap_or(current.is_active);
    let fields = ScheduleFields {
        target,
        cron_expression: &cron_expression,
        is_active,
        next_run_at: next.filter(|_| is_active),
    };
    let details =
        json!({"target": target, "cronExpression": cron_expression, "isActive": is_active});
    let audit = [event(
        caller,
        "compliance.scan-schedule.update",
        &org.id,
        "scan-schedule",
        id,
        details,
    )];
    replace(store, config, org, id, fields, &audit).await
}

/// Replaces a schedule's definition with its audit events, in one unit: 404 when it
/// is gone, 429 when it would make one active schedule too many.
async fn replace(
    store: &Store,
    config: &Config,
    org: &OrgRecord,
    id: &str,
    fields: ScheduleFields<'_>,
    audit: &[audit_chain::AuditEvent],
) -> ServiceResult<ScheduleRecord> {
    let max = config.compliance.max_schedules_per_org;
    let now = Utc::now();
    let updated = unit_of_work!(store, |tx| {
        let updated = tx.update_schedule(&org.id, id, (fields, max), now).await?;
        if updated {
            tx.enqueue_audit(audit).await?;
        }
        Ok(updated)
    })?;
    if !updated {
        // Gone meanwhile (404), or refused by the cap.
        existing(store, org, id).await?;
        return Err(at_the_cap(config));
    }
    existing(store, org, id).await
}

/// Deactivates a schedule (`DELETE`); audited `compliance.scan-schedule.delete`.
pub async fn deactivate(
    store: &Store,
    config: &Config,
    caller: &Caller,
    org: &OrgRecord,
    id: &str,
) -> ServiceResult<ScheduleRecord> {
    let current = existing(store, org, id).await?;
    let fields = ScheduleFields {
        target: target("target", &current.target)?,
        cron_expression: &current.cron_expression,
        is_active: false,
        next_run_at: None,
    };
    let audit = [event(
        caller,
        "compliance.scan-schedule.delete",
        &org.id,
        "scan-schedule",
        id,
        json!({"isActive": false}),
    )];
    replace(store, config, org, id, fields, &audit).await
}
