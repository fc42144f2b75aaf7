//! Scan schedules: a target and a five-field cron expression (UTC), validated at
//! insert and update (400 `INVALID_CRON` naming the field). An active schedule keeps
//! the next time it is due; the scan scheduler (one replica at a time, under a lease)
//! starts its scan then. `DELETE` deactivates, as document 1's state table says.
//! Changes are audited `compliance.scan-schedule.create/update/delete` with the change.

use chrono::{DateTime, Utc};
use serde_json::json;

use super::scans::{cron, target};
use super::{ServiceError, ServiceResult};
use crate::services::context::{event, AppState, Caller};
use crate::storage::{OrgRecord, ScheduleFields, ScheduleRecord};

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
fn at_the_cap(state: &AppState) -> ServiceError {
    ServiceError::Conflict(format!(
        "the organization already has {} active scan schedules, the most COMPLIANCE_MAX_SCHEDULES_PER_ORG allows; deactivate one first",
        state.config.compliance.max_schedules_per_org
    ))
}

/// A new active schedule.
pub async fn create(
    state: &AppState,
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
    state
        .store
        .create_schedule(
            &org.id,
            (fields, state.config.compliance.max_schedules_per_org),
            &caller.user_id,
            now,
            &audit,
        )
        .await?
        .ok_or_else(|| at_the_cap(state))
}

/// A page of the organization's schedules.
pub async fn list(
    state: &AppState,
    org: &OrgRecord,
    limit: u32,
    offset: u64,
) -> ServiceResult<(Vec<ScheduleRecord>, u64)> {
    Ok(state.store.schedules(&org.id, limit, offset).await?)
}

async fn existing(state: &AppState, org: &OrgRecord, id: &str) -> ServiceResult<ScheduleRecord> {
    state
        .store
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
    state: &AppState,
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
    let current = existing(state, org, id).await?;
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
    state
        .store
        .update_schedule(
            &org.id,
            id,
            (fields, state.config.compliance.max_schedules_per_org),
            Utc::now(),
            &audit,
        )
        .await?
        .ok_or_else(|| at_the_cap(state))
}

/// Deactivates a schedule (`DELETE`); audited `compliance.scan-schedule.delete`.
pub async fn deactivate(
    state: &AppState,
    caller: &Caller,
    org: &OrgRecord,
    id: &str,
) -> ServiceResult<ScheduleRecord> {
    let current = existing(state, org, id).await?;
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
    state
        .store
        .update_schedule(
            &org.id,
            id,
            (fields, state.config.compliance.max_schedules_per_org),
            Utc::now(),
            &audit,
        )
        .await?
        .ok_or_else(|| at_the_cap(state))
}
