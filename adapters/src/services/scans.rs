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

/// How a sweep is run.
#[derive(Debug, Clone, Copy)]
pub struct SweepSettings {
    /// Evaluation jobs at a time.
    pub concurrency: usize,
    /// Entities per page (and per flush).
    pub batch: usize,
    /// How long a claim holds without a flush.
    pub lease: Duration,
}

/// How a sweep ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Swept {
    /// Every entity judged; the scan is `completed`.
    Completed,
    /// The scan was cancelled, another sweeper took it over, or the server is
    /// stopping (the claim given back): stopped.
    Stopped,
    /// It could not go on; the scan is `failed`.
    Failed,
}

/// The fingerprint of the rules a set applies to `target`: SHA-256 of their JSON, in
/// evaluation order (any change of a rule bumps its version, so changes it).
pub fn fingerprint(set: &RuleSet, target: Target) -> String {
    let mut hash = Sha256::new();
    for rule in set.rules(target) {
        if let Ok(bytes) = serde_json::to_vec(rule) {
            hash.update(&bytes);
        }
        hash.update(b"\n");
    }
    hex::encode(hash.finalize())
}

/// An entity to judge: its id, its name, its document.
type Entity = (String, String, Value);

/// Sweeps a claimed scan to its end (or until it is stopped).
pub async fn sweep(
    state: &AppState,
    scan: &ScanRecord,
    settings: SweepSettings,
    stopping: &(dyn Fn() -> bool + Sync),
) -> ServiceResult<Swept> {
    let token = scan.sweep.token;
    if scan.sweep.takeovers > MAX_TAKEOVERS {
        let why = format!(
            "its sweeper stopped {} times before it ended",
            scan.sweep.takeovers
        );
        fail(&state.infra.store, scan, &why).await?;
        return Ok(Swept::Failed);
    }
    let Some(org) = state.infra.store.organization(&scan.org_id).await? else {
        fail(
            &state.infra.store,
            scan,
            "the organization no longer exists",
        )
        .await?;
        return Ok(Swept::Failed);
    };
    let filter = stored_filter(scan)?;
    let all = phases(&scan.target);
    let first = all.iter().position(|p| *p == scan.sweep.phase).unwrap_or(0);
    // A page is one flush; its statements bind 9 values per entity, so a page stays
    // under both backends' bind limits.
    let batch = u32::try_from(settings.batch.clamp(1, MAX_PAGE)).unwrap_or(1);
    for (i, phase) in all.iter().enumerate().skip(first) {
        let target: Target = phase
            .parse()
            .map_err(|_| ServiceError::Broken(format!("scan phase `{phase}`")))?;
        let mut after = if i == first {
            scan.sweep.after_id.clone()
        } else {
            String::new()
        };
        // The system organization's set (swept only with SYSTEM_ORG_SCANS_ENABLED) is
        // what validation gives it: no rules.
        let set = crate::compliance::rule_set(
            &state.infra.store,
            &state.replica.rule_cache,
            &state.config,
            &org,
            target,
        )
        .await?;
        let print = fingerprint(&set, target);
        let sweeping = Sweeping {
            state,
            scan,
            org: &org,
            target,
            filter: &filter,
            set: &set,
            settings,
            batch,
        };
        // A page is read and judged while the one before it is flushed: the two
        // overlap, the flushes stay in order (each one fenced by the claim).
        let mut judged: Option<JudgedPage> = None;
        loop {
            let flushed = judged.take();
            let stop = stopping();
            let next = async {
                if stop {
                    return Ok(None);
                }
                sweeping.next_page(&after).await
            };
            let (kept, next) = match &flushed {
                Some(page) => {
                    let flush = Flush {
                        org_id: &org.id,
                        phase,
                        after_id: &page.last,
                        counts: page.counts,
                        fingerprint: &print,
                        lease_until: lease_until(settings.lease),
                        at: Utc::now(),
                        results: &page.rows,
                    };
                    let (kept, next) =
                        tokio::join!(state.infra.store.flush_scan(&scan.id, token, &flush), next);
                    (kept?, next)
                }
                None => (true, next.await),
            };
            if !kept {
                return Ok(Swept::Stopped);
            }
            if let Some(page) = &flushed {
                state.infra.metrics.scanned(page.counts.scanned);
            }
            if stop {
                state.infra.store.release_scan(&scan.id, token).await?;
                return Ok(Swept::Stopped);
            }
            match next? {
                None => break,
                Some(page) => {
                    after.clone_from(&page.last);
                    judged = Some(page);
                }
            }
        }
    }
    let preference = state
        .infra
        .store
        .notification_preference(&scan.org_id)
        .await?;
    let now = Utc::now();
    let notify = |done: &ScanRecord| {
        (done.counts.blocked > 0).then(|| super::notifications::for_scan(&preference, done, now))
    };
    let completed = unit_of_work!(&state.infra.store, |tx| {
        Ok(tx.complete_scan(&scan.id, token, now, &notify).await?)
    })?;
    if completed.is_none() {
        return Ok(Swept::Stopped);
    }
    // The trend's point at the end of the scan (the scan is complete whatever
    // becomes of it; the hourly round writes the next one).
    if let Err(error) =
        super::posture::snapshot(&state.infra.store, &scan.org_id, "scan", now).await
    {
        tracing::warn!(scan = %scan.id, %error, "the scan's posture snapshot was not written");
    }
    Ok(Swept::Completed)
}

/// Ends a scan `failed` with `why` (if the claim still holds).
async fn fail(store: &Store, scan: &ScanRecord, why: &str) -> ServiceResult<bool> {
    Ok(store
        .fail_scan(&scan.id, scan.sweep.token, why, Utc::now())
        .await?)
}

fn lease_until(lease: Duration) -> DateTime<Utc> {
    Utc::now() + chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::seconds(30))
}

/// A page judged, waiting for its flush.
struct JudgedPage {
    /// Its last entity id (where the sweep stands once it is flushed).
    last: String,
    /// Its results, in the page's order.
    rows: Vec<SweptEntity>,
    /// Their counts.
    counts: ScanCounts,
}

/// One phase of a sweep: what every page of it shares.
struct Sweeping<'a> {
    state: &'a AppState,
    scan: &'a ScanRecord,
    org: &'a OrgRecord,
    target: Target,
    filter: &'a EntityFilter,
    set: &'a Arc<RuleSet>,
    settings: SweepSettings,
    batch: u32,
}

impl Sweeping<'_> {
    /// Reads the page after `after` and judges it (`None`: the phase is done).
    async fn next_page(&self, after: &str) -> ServiceResult<Option<JudgedPage>> {
        let page = self.page(after).await?;
        let Some(last) = page.last().map(|(id, _, _)| id.clone()) else {
            return Ok(None);
        };
        let ids: Vec<&str> = page.iter().map(|(id, _, _)| id.as_str()).collect();
        // An organization with no approved exemption (kept per replica, following
        // every change) asks for none.
        let state = self.state;
        let exemptions = if crate::replica::kept::any_approved_exemption(
            &state.infra.store,
            &state.replica.kept,
            &self.org.id,
        )
        .await?
        {
            state
                .infra
                .store
                .approved_exemptions_of(&self.org.id, &ids)
                .await?
        } else {
            Vec::new()
        };
        let rows = self.judge(page, exemptions).await?;
        let mut counts = ScanCounts::default();
        for row in &rows {
            counts.add(row.result);
        }
        Ok(Some(JudgedPage { last, rows, counts }))
    }

    /// The next page of the sweep: entities with their names and documents.
    async fn page(&self, after: &str) -> ServiceResult<Vec<Entity>> {
        Ok(self
            .state
            .infra
            .store
            .sweep_subjects(
                self.scan,
                (self.target.as_str(), self.filter),
                after,
                self.batch,
            )
            .await?
            .into_iter()
            .map(|s| (s.id, s.name, s.document))
            .collect())
    }

    /// Judges a page on the CPU pool, `settings.concurrency` jobs at a time, and
    /// renders the texts a flush stores there too; the results in the page's order.
    async fn judge(
        &self,
        page: Vec<Entity>,
        exemptions: Vec<Exemption>,
    ) -> ServiceResult<Vec<SweptEntity>> {
        let jobs = self.settings.concurrency.max(1);
        let per_job = page.len().div_ceil(jobs).max(1);
        let exemptions = Arc::new(exemptions);
        let target = self.target;
        let mut chunks: Vec<Vec<Entity>> = Vec::with_capacity(jobs);
        let mut rest = page.into_iter().peekable();
        while rest.peek().is_some() {
            chunks.push(rest.by_ref().take(per_job).collect());
        }
        let mut running = Vec::with_capacity(chunks.len());
        for chunk in chunks {
            let state = self.state.clone();
            let set = Arc::clone(self.set);
            let exemptions = Arc::clone(&exemptions);
            running.push(tokio::spawn(async move {
                let limits = state.config.attribute_limits();
                // Background work: the job waits its turn in the pool's background
                // lane (never more jobs than threads), not refused by requests' work.
                let job = state.infra.cpu.run_in_background(move || {
                    let now = Utc::now();
                    chunk
                        .iter()
                        .map(|(id, name, document)| {
                            let judged = compliance_core::judge(
                                Some(&set),
                                target,
                                document,
                                &limits,
                                &Waivers::for_entity(&exemptions, id, now),
                            );
                            swept(target, (id.clone(), name.clone()), judged, now)
                        })
                        .collect::<Vec<_>>()
                });
                job.await.map_err(|_| ServiceError::Unavailable)
            }));
        }
        let mut results = Vec::new();
        for job in running {
            let done = job
                .await
                .map_err(|e| ServiceError::Broken(format!("a scan job stopped: {e}")))??;
            results.extend(done);
        }
        Ok(results)
    }
}

/// One entity's result, with the text its flush stores: the violations (the judgement
/// the entity then refers to) and their digest.
fn swept(
    target: Target,
    (entity_id, entity_name): (String, String),
    judged: Result<Evaluation, compliance_core::Error>,
    now: DateTime<Utc>,
) -> SweptEntity {
    let rendered = judged.map_err(|e| e.to_string()).and_then(|evaluation| {
        serde_json::to_string(&compliance_core::StoredViolations(&evaluation.violations))
            .map(|violations| (evaluation.outcome().as_str(), violations))
            .map_err(|e| format!("its violations do not serialize: {e}"))
    });
    let (result, violations, error) = match rendered {
        Ok((result, violations)) => (result, violations, None),
        Err(why) => ("error", "[]".to_owned(), Some(why)),
    };
    SweptEntity {
        target: target.as_str(),
        entity_id,
        entity_name,
        result,
        digest: crate::storage::judgement_digest(result, &violations),
        violations,
        error,
        scanned_at: now,
    }
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
