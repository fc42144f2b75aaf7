//! Scans (document 1, items 5 and 11): a sweep of an organization's inventory with its
//! effective rules, the same engine as validation (the compiled `RuleSet`, the
//! attribute limits, the entity's approved exemptions), on the CPU pool.
//!
//! A request only stores the scan (`running`, unclaimed) and answers 202; the `scans`
//! worker of any replica claims it and sweeps it in pages of
//! `COMPLIANCE_SCAN_PROGRESS_BATCH_SIZE` entities read by id from the database (memory
//! does not grow with the inventory), `COMPLIANCE_SCAN_CONCURRENCY` evaluation jobs at
//! a time, in the CPU pool's background lane. Each page is flushed in one transaction
//! (its results, the references of the entities whose judgement they change, the
//! scan's counts and position), fenced by the claim: a cancelled
//! scan stops its sweeper at the next page, a sweeper that died is replaced once its
//! lease expires (the new one resumes after the last page flushed), and a scan taken
//! over more than [`MAX_TAKEOVERS`] times ends `failed`. A scan that found blocked
//! entities notifies once: the notification is written with its completion.
//!
//! The system organization's inventory is swept only with
//! `SYSTEM_ORG_SCANS_ENABLED=true` (then with its own rules); otherwise its scans end
//! at once with nothing scanned, and its schedules skip their runs.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use compliance_core::{CronSchedule, Evaluation, Exemption, RuleSet, Target, Waivers};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::{plugins, ServiceError, ServiceResult};
use crate::config::Config;
use crate::metrics::Metrics;
use crate::services::context::{event, AppState, Caller};
use crate::storage::{
    phases, unit_of_work, EntityFilter, Flush, NewScan, OrgRecord, ScanCounts, Store, StoreError,
    SweptEntity,
};
pub use crate::storage::{ScanRecord, ScanResult, ScheduleRecord};
mod sweep;
pub use sweep::*;

/// After this many takeovers (its sweeper's lease expired each time) a scan ends
/// `failed` instead of being resumed again.
pub const MAX_TAKEOVERS: u32 = 3;

/// The most entities a page (and a flush) holds, whatever
/// `COMPLIANCE_SCAN_PROGRESS_BATCH_SIZE` says.
pub const MAX_PAGE: usize = 1000;

/// The longest filter value.
const MAX_FILTER_VALUE: usize = 200;

/// The targets a scan or schedule takes.
pub const TARGETS: [&str; 3] = ["plugin", "pipeline", "all"];

/// A target as a request gives it.
pub fn target(field: &'static str, value: &str) -> ServiceResult<&'static str> {
    TARGETS
        .iter()
        .find(|t| **t == value)
        .copied()
        .ok_or_else(|| ServiceError::invalid(field, "must be plugin, pipeline or all"))
}

/// Reads a scan's filter: `orgId` (any value; replaced by the organization's),
/// `name` (a plugin's or a pipeline's name, exactly), `accessModifier` (`public` or
/// `private`), `project` (a pipeline's project; plugins have none, so a scan of
/// plugins with a project filter sweeps no plugin). Anything else is refused.
pub fn entity_filter(
    org: &OrgRecord,
    filter: Option<&Map<String, Value>>,
) -> ServiceResult<(Value, EntityFilter)> {
    let mut entities = EntityFilter::default();
    let mut stored = Map::new();
    for (key, value) in filter.into_iter().flatten() {
        let slot = match key.as_str() {
            "orgId" => continue,
            "name" => &mut entities.name,
            "accessModifier" => &mut entities.access_modifier,
            "project" => &mut entities.project,
            _ => {
                return Err(ServiceError::invalid(
                    "filter",
                    format!("unknown filter `{key}` (known: orgId, name, accessModifier, project)"),
                ))
            }
        };
        let text = value
            .as_str()
            .filter(|s| {
                !s.trim().is_empty()
                    && s.chars().count() <= MAX_FILTER_VALUE
                    && !s.chars().any(char::is_control)
            })
            .ok_or_else(|| {
                ServiceError::invalid(
                    "filter",
                    format!("`{key}` must be a string of 1 to {MAX_FILTER_VALUE} characters"),
                )
            })?;
        if key == "accessModifier" {
            plugins::access_modifier(text)?;
        }
        *slot = Some(text.to_owned());
        stored.insert(key.clone(), Value::String(text.to_owned()));
    }
    stored.insert("orgId".to_owned(), Value::String(org.id.clone()));
    Ok((Value::Object(stored), entities))
}

/// The filter a stored scan sweeps with.
fn stored_filter(scan: &ScanRecord) -> ServiceResult<EntityFilter> {
    let text = |key: &str| -> ServiceResult<Option<String>> {
        match scan.filter.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(ServiceError::Broken(format!(
                "scan `{}` has a filter `{key}` that is not text",
                scan.id
            ))),
        }
    };
    Ok(EntityFilter {
        name: text("name")?,
        access_modifier: text("accessModifier")?,
        project: text("project")?,
    })
}

/// Whether the organization's inventory is swept (document 1, item 5).
fn sweepable(config: &Config, org: &OrgRecord) -> bool {
    !org.is_system || config.compliance.system_org_scans_enabled
}

/// Starts a scan of `target` over the organization's inventory: stored `running`, to be
/// swept by a worker (the request never waits for it).
pub async fn start(
    store: &Store,
    config: &Config,
    metrics: &Metrics,
    caller: &Caller,
    org: &OrgRecord,
    target_name: &str,
    filter: Option<&Map<String, Value>>,
) -> ServiceResult<ScanRecord> {
    let target = target("target", target_name)?;
    let (filter, entities) = entity_filter(org, filter)?;
    let phase = phases(target).first().copied().unwrap_or("plugin");
    let scan = NewScan {
        org_id: &org.id,
        target,
        filter: &filter,
        entities: &entities,
        origin: "manual",
        schedule_id: None,
        requested_by: &caller.user_id,
        phase,
        now: Utc::now(),
        empty: !sweepable(config, org),
    };
    let id = unit_of_work!(store, |tx| {
        match tx.create_scan(&scan).await {
            Err(StoreError::Conflict(_)) => Err(ServiceError::Conflict(format!(
                "a scan of {target} is already running in this organization; cancel it or wait for it to end"
            ))),
            other => Ok(other?),
        }
    })?;
    metrics.scan_started();
    scan_of(store, org, &id).await
}

/// The actor of the scans a rule or subscription change starts.
pub const CHANGE_ACTOR: &str = "system:reevaluation";

/// Starts the scan a rule or subscription change calls for (origin `rule-change`):
/// the organization's entities of `target`, superseding a running scan of an earlier
/// change. Nothing for an organization whose inventory is not swept.
pub async fn after_change(
    store: &Store,
    config: &Config,
    metrics: &Metrics,
    org: &OrgRecord,
    target: Target,
) -> ServiceResult<()> {
    if !sweepable(config, org) {
        return Ok(());
    }
    let filter = json!({"orgId": org.id});
    let entities = EntityFilter::default();
    let scan = NewScan {
        org_id: &org.id,
        target: target.as_str(),
        filter: &filter,
        entities: &entities,
        origin: "rule-change",
        schedule_id: None,
        requested_by: CHANGE_ACTOR,
        phase: target.as_str(),
        now: Utc::now(),
        empty: false,
    };
    unit_of_work!(store, |tx| { Ok(tx.supersede_scan(&scan).await?) })?;
    metrics.scan_started();
    Ok(())
}

/// A page of the organization's scans, newest first.
pub async fn list(
    store: &Store,
    org: &OrgRecord,
    (target_name, status): (Option<&str>, Option<&str>),
    limit: u32,
    offset: u64,
) -> ServiceResult<(Vec<ScanRecord>, u64)> {
    if let Some(t) = target_name {
        target("target", t)?;
    }
    if let Some(s) = status {
        if !["running", "completed", "cancelled", "failed"].contains(&s) {
            return Err(ServiceError::invalid(
                "status",
                "must be running, completed, cancelled or failed",
            ));
        }
    }
    Ok(store
        .scans(&org.id, (target_name, status), limit, offset)
        .await?)
}

/// One scan of the organization.
pub async fn get(store: &Store, org: &OrgRecord, id: &str) -> ServiceResult<ScanRecord> {
    store
        .scan(&org.id, id)
        .await?
        .ok_or(ServiceError::NotFound("scan".into()))
}

/// A page of one scan's results, narrowed to one result.
pub async fn results(
    store: &Store,
    org: &OrgRecord,
    id: &str,
    result: Option<&str>,
    limit: u32,
    offset: u64,
) -> ServiceResult<(Vec<ScanResult>, u64)> {
    if let Some(r) = result {
        if !["pass", "warn", "block", "error"].contains(&r) {
            return Err(ServiceError::invalid(
                "result",
                "must be pass, warn, block or error",
            ));
        }
    }
    get(store, org, id).await?;
    Ok(store
        .scan_results((&org.id, id), result, limit, offset)
        .await?)
}

/// Cancels a running scan (its sweeper stops at its next page); audited
/// `compliance.scan.cancel`. A scan that ended is a conflict.
pub async fn cancel(
    store: &Store,
    caller: &Caller,
    org: &OrgRecord,
    id: &str,
) -> ServiceResult<ScanRecord> {
    let audit = [event(
        caller,
        "compliance.scan.cancel",
        &org.id,
        "scan",
        id,
        json!({}),
    )];
    let now = Utc::now();
    let cancelled = unit_of_work!(store, |tx| {
        let cancelled = tx.cancel_scan(&org.id, id, now).await?;
        if cancelled {
            tx.enqueue_audit(&audit).await?;
        }
        Ok(cancelled)
    })?;
    let scan = scan_of(store, org, id).await?;
    if !cancelled {
        return Err(ServiceError::Conflict(format!(
            "scan `{id}` is {}, not running",
            scan.status
        )));
    }
    Ok(scan)
}

/// One scan of the organization (404 when it has none of this id).
async fn scan_of(store: &Store, org: &OrgRecord, id: &str) -> ServiceResult<ScanRecord> {
    store
        .scan(&org.id, id)
        .await?
        .ok_or(ServiceError::NotFound("scan".into()))
}

/// A cron expression as a request gives it: parsed (400 `INVALID_CRON` naming the
/// field at fault).
pub fn cron(expression: &str) -> ServiceResult<CronSchedule> {
    Ok(CronSchedule::parse(expression)?)
}

/// Starts the scans of the schedules due at `now` (each run once whatever the number of
/// schedulers); how many started.
pub async fn run_due_schedules(
    store: &Store,
    config: &Config,
    metrics: &Metrics,
    now: DateTime<Utc>,
) -> ServiceResult<usize> {
    let mut started = 0;
    for schedule in store.due_schedules(now, 100).await? {
        if run_schedule(store, config, metrics, &schedule, now).await? {
            started += 1;
        }
    }
    Ok(started)
}

async fn run_schedule(
    store: &Store,
    config: &Config,
    metrics: &Metrics,
    schedule: &ScheduleRecord,
    now: DateTime<Utc>,
) -> ServiceResult<bool> {
    // A stored expression that no longer parses stops its schedule (fails closed:
    // it never runs at a guessed time).
    let next = match CronSchedule::parse(&schedule.cron_expression) {
        Ok(cron) => cron.next_after(now),
        Err(error) => {
            tracing::error!(schedule = %schedule.id, %error, "a stored scan schedule does not parse: it stops");
            None
        }
    };
    let org = store.organization(&schedule.org_id).await?;
    let run = org.as_ref().filter(|org| sweepable(config, org));
    let filter = json!({"orgId": schedule.org_id});
    let entities = EntityFilter::default();
    let scan = run.map(|org| NewScan {
        org_id: &org.id,
        target: schedule.target.as_str(),
        filter: &filter,
        entities: &entities,
        origin: "schedule",
        schedule_id: Some(&schedule.id),
        requested_by: &schedule.created_by,
        phase: phases(&schedule.target)
            .first()
            .copied()
            .unwrap_or("plugin"),
        now,
        empty: false,
    });
    let started = unit_of_work!(store, |tx| {
        Ok(tx.run_schedule(schedule, next, scan.as_ref(), now).await?)
    })?;
    if started && scan.is_some() {
        metrics.scan_started();
        tracing::info!(schedule = %schedule.id, org = %schedule.org_id, "scheduled scan started");
    }
    Ok(started && scan.is_some())
}
