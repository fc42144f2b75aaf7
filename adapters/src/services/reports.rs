//! Reporting: execution events in (from the event bus, or a backfill file), the
//! execution reports out. The events are checked and stored once by id with their
//! executions marked to be derived, in one transaction; each execution is then
//! folded again from all its stored events (`reporting::fold`, in any order) and
//! stored in the one organization that registered its pipeline's resource name.
//! A resource name no organization (or more than one) registered waits aside,
//! counted, until a registration names it. The reports read the derived executions
//! and compute every figure in Rust (`reporting`), so both backends answer the same
//! numbers.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use reporting::{ErrorCategory, ExecutionEvent, Granularity, Summary, TimeRange};
use serde::Serialize;
use serde_json::Value;

use super::{ServiceError, ServiceResult};
use crate::services::context::AppState;
use crate::storage::{
    AttemptRow, Derived, ExecutionRow, NewReportEvent, ReportScope, StageRow, StoreError,
    UnattributedRow,
};

/// The most events one request may carry.
pub const MAX_BATCH: usize = 1000;
/// The largest request of events, in bytes.
pub const MAX_BATCH_BYTES: usize = 4 << 20;
/// The largest `limit` of a report.
pub const MAX_LIMIT: u32 = 100;
/// The `limit` of a report when none is given.
pub const DEFAULT_LIMIT: u32 = 10;

/// What an ingest did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Ingested {
    /// Events in the request.
    pub received: u64,
    /// Events stored now (the others had been, by id).
    pub stored: u64,
    /// Executions derived again.
    pub executions: u64,
}

/// Checks a request's events: one envelope or an array of them. A malformed one
/// refuses the whole batch, naming where (`[3].detail.state`).
pub fn parse_batch(body: &Value) -> ServiceResult<Vec<ExecutionEvent>> {
    let envelopes: Vec<&Value> = match body {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    if envelopes.is_empty() {
        return Err(ServiceError::Malformed(
            "no events: the array is empty".to_owned(),
        ));
    }
    if envelopes.len() > MAX_BATCH {
        return Err(ServiceError::Malformed(format!(
            "at most {MAX_BATCH} events a request"
        )));
    }
    envelopes
        .iter()
        .enumerate()
        .map(|(i, envelope)| {
            ExecutionEvent::parse(envelope)
                .map_err(|e| ServiceError::Malformed(format!("[{i}].{}: {}", e.field, e.problem)))
        })
        .collect()
}

/// Stores checked events and derives their executions.
pub async fn ingest(
    state: &AppState,
    events: Vec<ExecutionEvent>,
    now: DateTime<Utc>,
) -> ServiceResult<Ingested> {
    let received = u64::try_from(events.len()).unwrap_or(u64::MAX);
    let mut rows = Vec::with_capacity(events.len());
    let mut touched = BTreeSet::new();
    for event in &events {
        let body = serde_json::to_string(event).map_err(|e| ServiceError::Broken(e.to_string()))?;
        touched.insert((event.resource.clone(), event.execution_id.clone()));
        rows.push(NewReportEvent {
            id: event.id.clone(),
            resource: event.resource.clone(),
            execution_id: event.execution_id.clone(),
            occurred_at: event.time,
            body,
        });
    }
    let stored = state.store.record_report_events(&rows, now).await?;
    let mut executions = 0;
    for (resource, execution) in &touched {
        if derive(state, resource, execution, now).await? {
            executions += 1;
        }
    }
    Ok(Ingested {
        received,
        stored,
        executions,
    })
}

/// Derives one execution from its stored events; `false` when another did it.
pub async fn derive(
    state: &AppState,
    resource: &str,
    execution_id: &str,
    now: DateTime<Utc>,
) -> ServiceResult<bool> {
    let derived = state
        .store
        .derive_execution((resource, execution_id), &derivation, now)
        .await?;
    Ok(derived)
}

/// Derives up to `limit` waiting executions (the worker, after a crash between an
/// ingest and its derivation, or after a registration); how many.
pub async fn derive_pending(state: &AppState, limit: u32) -> ServiceResult<usize> {
    let pending = state.store.pending_executions(limit).await?;
    let mut done = 0;
    for (resource, execution) in &pending {
        if derive(state, resource, execution, Utc::now()).await? {
            done += 1;
        }
    }
    Ok(done)
}

/// The fold and the attribution, run inside the derivation's transaction.
fn derivation(
    bodies: &[String],
    registrations: &[(String, String)],
) -> Result<Derived, StoreError> {
    let events = bodies
        .iter()
        .map(|body| serde_json::from_str::<ExecutionEvent>(body))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| StoreError::Corrupt(format!("report_events: a body does not decode: {e}")))?;
    let execution = reporting::fold(&events).ok_or_else(|| {
        StoreError::Corrupt("report_pending: an execution without events".to_owned())
    })?;
    let (org_id, pipeline_id) = match registrations {
        [(org, pipeline)] => (org.clone(), pipeline.clone()),
        [] => {
            return Ok(Derived::Unattributed(
                "no organization registered this resource name".to_owned(),
            ))
        }
        _ => {
            return Ok(Derived::Unattributed(
                "more than one organization registered this resource name".to_owned(),
            ))
        }
    };
    let outcome = match execution.state.outcome() {
        reporting::Outcome::Success => "success",
        reporting::Outcome::Failure => "failure",
        reporting::Outcome::Excluded => "excluded",
        reporting::Outcome::Running => "running",
    };
    let stages = execution
        .stages
        .iter()
        .map(|s| StageRow {
            pipeline_id: pipeline_id.clone(),
            stage: s.name.clone(),
            state: s.state.name().to_owned(),
            started_at: s.started_at,
            duration_ms: s.duration_ms,
        })
        .collect();
    Ok(Derived::Attributed(
        ExecutionRow {
            org_id,
            pipeline_id,
            execution_id: execution.execution_id.clone(),
            state: execution.state.name().to_owned(),
            outcome: outcome.to_owned(),
            started_at: execution.started_at,
            ended_at: execution.ended_at,
            duration_ms: execution.duration_ms,
            error: execution.error.map(|e| e.name().to_owned()),
        },
        stages,
    ))
}

/// A resource name waiting for a registration (super-admins list them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Unattributed {
    /// The resource name.
    pub resource: String,
    /// Why its executions are not attributed.
    pub reason: String,
    /// How many executions of it wait.
    pub executions: i64,
    /// When its first event arrived.
    pub first_seen: DateTime<Utc>,
    /// When its latest event arrived.
    pub last_seen: DateTime<Utc>,
}

impl From<UnattributedRow> for Unattributed {
    fn from(r: UnattributedRow) -> Self {
        Unattributed {
            resource: r.resource,
            reason: r.reason,
            executions: r.executions,
            first_seen: r.first_seen,
            last_seen: r.last_seen,
        }
    }
}

/// The resource names waiting for a registration.
pub async fn unattributed(state: &AppState) -> ServiceResult<Vec<Unattributed>> {
    Ok(state
        .store
        .unattributed()
        .await?
        .into_iter()
        .map(Unattributed::from)
        .collect())
}

/// The organizations a report of `org` reads: it, and its teams when asked.
pub async fn organizations_of(
    state: &AppState,
    org: &crate::storage::OrgRecord,
    include_teams: bool,
) -> ServiceResult<Vec<String>> {
    let mut ids = vec![org.id.clone()];
    if include_teams {
        let (teams, _) = state.store.teams(&org.id, 1000, 0, true).await?;
        ids.extend(teams.into_iter().map(|t| t.id));
    }
    Ok(ids)
}

/// What a report is asked for, checked.
#[derive(Debug, Clone)]
pub struct ReportQuery {
    /// `[from, to)`.
    pub range: TimeRange,
    /// One pipeline only (execution reports).
    pub pipeline_id: Option<String>,
    /// One plugin only, by name (plugin reports).
    pub plugin_name: Option<String>,
    /// The series' bucket.
    pub granularity: Granularity,
    /// Top N.
    pub limit: usize,
    /// The organization and, with `includeTeams`, its teams.
    pub org_ids: Vec<String>,
}

/// The range and filters a report answered for.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReportBasis {
    /// The first instant in.
    pub from: DateTime<Utc>,
    /// The first instant out.
    pub to: DateTime<Utc>,
    /// The pipeline filter (execution reports).
    pub pipeline_id: Option<String>,
    /// The plugin filter (plugin reports).
    pub plugin_name: Option<String>,
    /// The organizations read (the caller's, and its teams with `includeTeams`).
    pub org_ids: Vec<String>,
}

impl ReportQuery {
    fn scope(&self) -> ReportBasis {
        ReportBasis {
            from: self.range.from,
            to: self.range.to,
            pipeline_id: self.pipeline_id.clone(),
            plugin_name: self.plugin_name.clone(),
            org_ids: self.org_ids.clone(),
        }
    }

    fn store_scope(&self) -> ReportScope<'_> {
        ReportScope {
            org_ids: &self.org_ids,
            range: (self.range.from, self.range.to),
            only: self.pipeline_id.as_deref().map(|p| ("pipeline_id", p)),
        }
    }

    fn attempt_scope(&self) -> ReportScope<'_> {
        ReportScope {
            org_ids: &self.org_ids,
            range: (self.range.from, self.range.to),
            only: self.plugin_name.as_deref().map(|p| ("plugin_name", p)),
        }
    }
}

/// Executions by what they ended as.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    /// Every execution.
    pub total: u64,
    /// `SUCCEEDED`.
    pub succeeded: u64,
    /// `FAILED`.
    pub failed: u64,
    /// `STOPPED` (counted as failures in rates).
    pub stopped: u64,
    /// `CANCELED`.
    pub canceled: u64,
    /// `SUPERSEDED`.
    pub superseded: u64,
    /// Not ended yet.
    pub running: u64,
}

impl Counts {
    fn add(&mut self, state: &str, n: u64) {
        self.total += n;
        match state {
            "SUCCEEDED" => self.succeeded += n,
            "FAILED" => self.failed += n,
            "STOPPED" => self.stopped += n,
            "CANCELED" | "ABANDONED" => self.canceled += n,
            "SUPERSEDED" => self.superseded += n,
            _ => self.running += n,
        }
    }
}

/// One pipeline's counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PipelineCounts {
    /// The pipeline.
    pub pipeline_id: String,
    /// Its executions.
    #[serde(flatten)]
    pub counts: Counts,
}

/// `GET /api/reports/execution/count`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CountReport {
    /// What was read.
    pub scope: ReportBasis,
    /// Every pipeline together.
    pub overall: Counts,
    /// The `limit` pipelines with the most executions (then by id).
    pub pipelines: Vec<PipelineCounts>,
}

/// Successes and failures, and their rate (none when both are zero).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rate {
    /// Successes.
    pub succeeded: u64,
    /// Failures (failed and stopped).
    pub failed: u64,
    /// `succeeded / (succeeded + failed)`, 0 to 1.
    pub rate: Option<f64>,
}

impl Rate {
    fn add(&mut self, outcome: &str, n: u64) {
        match outcome {
            "success" => self.succeeded += n,
            "failure" => self.failed += n,
            _ => {}
        }
        self.rate = reporting::rate(self.succeeded, self.failed);
    }
}

/// One bucket of a rate series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RateBucket {
    /// The bucket's start.
    pub start: DateTime<Utc>,
    /// Its successes, failures and rate.
    #[serde(flatten)]
    pub rate: Rate,
}

/// `GET /api/reports/execution/success-rate`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuccessRateReport {
    /// What was read.
    pub scope: ReportBasis,
    /// The bucket width.
    pub granularity: Granularity,
    /// The whole range.
    pub overall: Rate,
    /// Every bucket of the range, empty ones as zeros.
    pub series: Vec<RateBucket>,
}

/// One pipeline's durations.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PipelineDurations {
    /// The pipeline.
    pub pipeline_id: String,
    /// Its finished executions' durations (ms).
    pub durations: Summary,
}

/// `GET /api/reports/execution/duration`: over finished executions (succeeded,
/// failed or stopped, with an end).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DurationReport {
    /// What was read.
    pub scope: ReportBasis,
    /// Every pipeline together (none without a finished execution).
    pub overall: Option<Summary>,
    /// The `limit` pipelines with the highest p95.
    pub pipelines: Vec<PipelineDurations>,
}

/// One bucket of a stage's failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CountBucket {
    /// The bucket's start.
    pub start: DateTime<Utc>,
    /// How many.
    pub count: u64,
}

/// One stage's row of the heat map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageFailures {
    /// The pipeline.
    pub pipeline_id: String,
    /// The stage.
    pub stage: String,
    /// Its failures over the range.
    pub failures: u64,
    /// Every bucket, empty ones as zeros.
    pub series: Vec<CountBucket>,
}

/// `GET /api/reports/execution/stage-failures`: a heat map of stage failures.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageFailureReport {
    /// What was read.
    pub scope: ReportBasis,
    /// The bucket width.
    pub granularity: Granularity,
    /// The `limit` stages that failed most (then by pipeline and name).
    pub stages: Vec<StageFailures>,
}

/// One stage's durations.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageDurations {
    /// The pipeline.
    pub pipeline_id: String,
    /// The stage.
    pub stage: String,
    /// Its ended runs' durations (ms).
    pub durations: Summary,
}

/// `GET /api/reports/execution/stage-bottlenecks`: the slowest stages.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BottleneckReport {
    /// What was read.
    pub scope: ReportBasis,
    /// The `limit` stages with the highest p95 (then by pipeline and name).
    pub stages: Vec<StageDurations>,
}

/// One error category's failures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CategoryCount {
    /// The category.
    pub category: ErrorCategory,
    /// Failed executions in it.
    pub count: u64,
    /// Its share of the failures, 0 to 1.
    pub share: f64,
}

/// `GET /api/reports/execution/errors`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorReport {
    /// What was read.
    pub scope: ReportBasis,
    /// Failed (and stopped) executions.
    pub failures: u64,
    /// The `limit` categories with the most failures (then by name).
    pub categories: Vec<CategoryCount>,
}

/// The column expression of a bucket of `granularity` over a stored instant (RFC
/// 3339 text, UTC): its first 13 characters are its hour, its first 10 its day;
/// weeks are made of days here.
fn bucket_key(granularity: Granularity) -> &'static str {
    match granularity {
        Granularity::Hour => "substr(started_at, 1, 13)",
        Granularity::Day | Granularity::Week => "substr(started_at, 1, 10)",
    }
}

/// The bucket of a grouped key (`2026-11-20T10` or `2026-11-20`).
fn bucket_of(granularity: Granularity, key: &str) -> Option<DateTime<Utc>> {
    let text = if key.len() == 13 {
        format!("{key}:00:00Z")
    } else {
        format!("{key}T00:00:00Z")
    };
    let at = DateTime::parse_from_rfc3339(&text)
        .ok()?
        .with_timezone(&Utc);
    Some(granularity.bucket_of(at))
}

fn key(group: &[Option<String>], i: usize) -> &str {
    group.get(i).and_then(|k| k.as_deref()).unwrap_or_default()
}

/// The execution count report: executions grouped by pipeline and state.
pub async fn count(state: &AppState, query: &ReportQuery) -> ServiceResult<CountReport> {
    let groups = state
        .store
        .report_counts(
            "report_executions",
            &query.store_scope(),
            &["pipeline_id", "state"],
            "",
        )
        .await?;
    let mut overall = Counts::default();
    let mut by_pipeline: BTreeMap<String, Counts> = BTreeMap::new();
    for (group, n) in &groups {
        let (pipeline, state) = (key(group, 0), key(group, 1));
        overall.add(state, *n);
        by_pipeline
            .entry(pipeline.to_owned())
            .or_default()
            .add(state, *n);
    }
    let mut pipelines: Vec<PipelineCounts> = by_pipeline
        .into_iter()
        .map(|(pipeline_id, counts)| PipelineCounts {
            pipeline_id,
            counts,
        })
        .collect();
    pipelines.sort_by(|a, b| {
        b.counts
            .total
            .cmp(&a.counts.total)
            .then(a.pipeline_id.cmp(&b.pipeline_id))
    });
    pipelines.truncate(query.limit);
    Ok(CountReport {
        scope: query.scope(),
        overall,
        pipelines,
    })
}

/// Rates overall and per bucket from `(bucket, outcome, count)` items, every bucket of the
/// range present.
fn rate_series<'a>(
    query: &ReportQuery,
    items: impl Iterator<Item = (Option<DateTime<Utc>>, &'a str, u64)>,
) -> (Rate, Vec<RateBucket>) {
    let mut series: BTreeMap<DateTime<Utc>, Rate> = query
        .range
        .buckets(query.granularity)
        .into_iter()
        .map(|b| (b, Rate::default()))
        .collect();
    let mut overall = Rate::default();
    for (bucket, outcome, n) in items {
        overall.add(outcome, n);
        if let Some(bucket) = bucket.and_then(|b| series.get_mut(&b)) {
            bucket.add(outcome, n);
        }
    }
    let series = series
        .into_iter()
        .map(|(start, rate)| RateBucket { start, rate })
        .collect();
    (overall, series)
}

/// The success-rate report: executions grouped by bucket and outcome.
pub async fn success_rate(
    state: &AppState,
    query: &ReportQuery,
) -> ServiceResult<SuccessRateReport> {
    let groups = state
        .store
        .report_counts(
            "report_executions",
            &query.store_scope(),
            &[bucket_key(query.granularity), "outcome"],
            "",
        )
        .await?;
    let (overall, series) = rate_series(
        query,
        groups.iter().map(|(group, n)| {
            (
                bucket_of(query.granularity, key(group, 0)),
                key(group, 1),
                *n,
            )
        }),
    );
    Ok(SuccessRateReport {
        scope: query.scope(),
        granularity: query.granularity,
        overall,
        series,
    })
}

fn by_p95_then_key<K: Ord>(a: (&Summary, K), b: (&Summary, K)) -> std::cmp::Ordering {
    b.0.p95
        .partial_cmp(&a.0.p95)
        .unwrap_or(std::cmp::Ordering::Equal)
        .then(a.1.cmp(&b.1))
}

/// Summaries per key of a `(keys, duration, count)` histogram, overall and for the
/// `limit` keys with the highest p95.
fn summaries(
    limit: usize,
    rows: Vec<(Vec<String>, i64, u64)>,
) -> (Option<Summary>, Vec<(Vec<String>, Summary)>) {
    let mut all: BTreeMap<i64, u64> = BTreeMap::new();
    let mut by_key: BTreeMap<Vec<String>, Vec<(i64, u64)>> = BTreeMap::new();
    for (group, ms, n) in rows {
        *all.entry(ms).or_default() += n;
        by_key.entry(group).or_default().push((ms, n));
    }
    let mut keyed: Vec<(Vec<String>, Summary)> = by_key
        .into_iter()
        .filter_map(|(group, pairs)| Some((group, Summary::of_histogram(pairs)?)))
        .collect();
    keyed.sort_by(|a, b| by_p95_then_key((&a.1, &a.0), (&b.1, &b.0)));
    keyed.truncate(limit);
    (Summary::of_histogram(all.into_iter().collect()), keyed)
}

/// The duration report: finished executions' durations.
pub async fn duration(state: &AppState, query: &ReportQuery) -> ServiceResult<DurationReport> {
    let rows = state
        .store
        .report_durations(
            "report_executions",
            &query.store_scope(),
            &["pipeline_id"],
            "AND outcome IN ('success', 'failure')",
        )
        .await?;
    let (overall, keyed) = summaries(query.limit, rows);
    Ok(DurationReport {
        scope: query.scope(),
        overall,
        pipelines: keyed
            .into_iter()
            .map(|(group, durations)| PipelineDurations {
                pipeline_id: group.into_iter().next().unwrap_or_default(),
                durations,
            })
            .collect(),
    })
}

/// The stage failure heat map: failed stage runs grouped by stage and bucket.
pub async fn stage_failures(
    state: &AppState,
    query: &ReportQuery,
) -> ServiceResult<StageFailureReport> {
    let groups = state
        .store
        .report_counts(
            "report_stages",
            &query.store_scope(),
            &["pipeline_id", "stage", bucket_key(query.granularity)],
            "AND state = 'FAILED'",
        )
        .await?;
    let buckets = query.range.buckets(query.granularity);
    let mut by_stage: BTreeMap<(String, String), BTreeMap<DateTime<Utc>, u64>> = BTreeMap::new();
    for (group, n) in &groups {
        let Some(bucket) = bucket_of(query.granularity, key(group, 2)) else {
            continue;
        };
        *by_stage
            .entry((key(group, 0).to_owned(), key(group, 1).to_owned()))
            .or_default()
            .entry(bucket)
            .or_default() += n;
    }
    type Row = (u64, (String, String), BTreeMap<DateTime<Utc>, u64>);
    let mut stages: Vec<Row> = by_stage
        .into_iter()
        .map(|(key, counts)| (counts.values().sum(), key, counts))
        .collect();
    stages.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    stages.truncate(query.limit);
    Ok(StageFailureReport {
        scope: query.scope(),
        granularity: query.granularity,
        stages: stages
            .into_iter()
            .map(|(failures, (pipeline_id, stage), counts)| StageFailures {
                pipeline_id,
                stage,
                failures,
                series: buckets
                    .iter()
                    .map(|start| CountBucket {
                        start: *start,
                        count: counts.get(start).copied().unwrap_or(0),
                    })
                    .collect(),
            })
            .collect(),
    })
}

/// The stage bottleneck report: ended stage runs' durations.
pub async fn stage_bottlenecks(
    state: &AppState,
    query: &ReportQuery,
) -> ServiceResult<BottleneckReport> {
    let rows = state
        .store
        .report_durations(
            "report_stages",
            &query.store_scope(),
            &["pipeline_id", "stage"],
            "",
        )
        .await?;
    let (_, keyed) = summaries(query.limit, rows);
    Ok(BottleneckReport {
        scope: query.scope(),
        stages: keyed
            .into_iter()
            .map(|(group, durations)| {
                let mut parts = group.into_iter();
                StageDurations {
                    pipeline_id: parts.next().unwrap_or_default(),
                    stage: parts.next().unwrap_or_default(),
                    durations,
                }
            })
            .collect(),
    })
}

/// The error category report: failed executions grouped by category.
pub async fn errors(state: &AppState, query: &ReportQuery) -> ServiceResult<ErrorReport> {
    let groups = state
        .store
        .report_counts(
            "report_executions",
            &query.store_scope(),
            &["error"],
            "AND outcome = 'failure'",
        )
        .await?;
    let mut counts: BTreeMap<ErrorCategory, u64> = BTreeMap::new();
    let mut failures = 0u64;
    for (group, n) in &groups {
        failures += n;
        let category = ErrorCategory::parse(key(group, 0)).unwrap_or(ErrorCategory::Pipeline);
        *counts.entry(category).or_default() += n;
    }
    let mut categories: Vec<CategoryCount> = counts
        .into_iter()
        .map(|(category, count)| CategoryCount {
            category,
            count,
            share: count as f64 / failures.max(1) as f64,
        })
        .collect();
    categories.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then(a.category.name().cmp(b.category.name()))
    });
    categories.truncate(query.limit);
    Ok(ErrorReport {
        scope: query.scope(),
        failures,
        categories,
    })
}

/// The plugins by build status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BuildStatuses {
    /// Waiting for a build.
    pub queued: u64,
    /// Being built.
    pub running: u64,
    /// Built.
    pub completed: u64,
    /// Failed for good.
    pub failed: u64,
    /// Timed out for good.
    pub timed_out: u64,
}

/// The plugin inventory now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Inventory {
    /// Every plugin (each version counts).
    pub total: u64,
    /// Active ones.
    pub active: u64,
    /// Public ones.
    pub public: u64,
    /// Private ones.
    pub private: u64,
    /// By the state of their image build.
    pub build_status: BuildStatuses,
}

/// Build attempts by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Attempts {
    /// Every attempt.
    pub total: u64,
    /// Built.
    pub succeeded: u64,
    /// Failed.
    pub failed: u64,
    /// Ran past `PLUGIN_BUILD_TIMEOUT_SECONDS`.
    pub timed_out: u64,
}

/// `GET /api/reports/plugins/summary`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginSummaryReport {
    /// What was read (the inventory is today's; the attempts the range's).
    pub scope: ReportBasis,
    /// The plugins now.
    pub plugins: Inventory,
    /// The build attempts that began in the range.
    pub builds: Attempts,
}

/// `GET /api/reports/plugins/build-success-rate`: attempts built over attempts
/// ended (a timeout is a failure).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BuildRateReport {
    /// What was read.
    pub scope: ReportBasis,
    /// The bucket width.
    pub granularity: Granularity,
    /// The whole range.
    pub overall: Rate,
    /// Every bucket, empty ones as zeros.
    pub series: Vec<RateBucket>,
}

/// One plugin's build durations.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginDurations {
    /// The plugin's name.
    pub plugin_name: String,
    /// Its attempts' durations (ms).
    pub durations: Summary,
}

/// `GET /api/reports/plugins/build-duration`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BuildDurationReport {
    /// What was read.
    pub scope: ReportBasis,
    /// Every attempt together.
    pub overall: Option<Summary>,
    /// The `limit` plugins with the highest p95.
    pub plugins: Vec<PluginDurations>,
}

/// One failure reason.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReasonCount {
    /// The reason: `timed out`, or the last line the builder wrote.
    pub reason: String,
    /// Attempts that failed for it.
    pub count: u64,
    /// Its share of the failures, 0 to 1.
    pub share: f64,
}

/// `GET /api/reports/plugins/build-failures`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BuildFailureReport {
    /// What was read.
    pub scope: ReportBasis,
    /// Failed and timed-out attempts.
    pub failures: u64,
    /// The `limit` most frequent reasons (then by text).
    pub reasons: Vec<ReasonCount>,
}

fn attempt_outcome(outcome: &str) -> &'static str {
    match outcome {
        "succeeded" => "success",
        "failed" | "timed_out" => "failure",
        _ => "excluded",
    }
}

/// The plugin summary report.
pub async fn plugin_summary(
    state: &AppState,
    query: &ReportQuery,
) -> ServiceResult<PluginSummaryReport> {
    let inventory = state
        .store
        .plugin_inventory(&query.org_ids, query.plugin_name.as_deref())
        .await?;
    let attempts = state.store.build_attempts(&query.attempt_scope()).await?;
    let mut plugins = Inventory::default();
    for (status, access, active, n) in inventory {
        plugins.total += n;
        if active {
            plugins.active += n;
        }
        match access.as_str() {
            "public" => plugins.public += n,
            _ => plugins.private += n,
        }
        let s = &mut plugins.build_status;
        match status.as_str() {
            "queued" => s.queued += n,
            "running" => s.running += n,
            "completed" => s.completed += n,
            "timed_out" => s.timed_out += n,
            _ => s.failed += n,
        }
    }
    let mut builds = Attempts::default();
    for a in &attempts {
        builds.total += 1;
        match a.outcome.as_str() {
            "succeeded" => builds.succeeded += 1,
            "timed_out" => builds.timed_out += 1,
            _ => builds.failed += 1,
        }
    }
    Ok(PluginSummaryReport {
        scope: query.scope(),
        plugins,
        builds,
    })
}

/// The build success-rate report.
pub async fn build_success_rate(
    state: &AppState,
    query: &ReportQuery,
) -> ServiceResult<BuildRateReport> {
    let attempts = state.store.build_attempts(&query.attempt_scope()).await?;
    let (overall, series) = rate_series(
        query,
        attempts.iter().map(|a| {
            (
                Some(query.granularity.bucket_of(a.started_at)),
                attempt_outcome(&a.outcome),
                1,
            )
        }),
    );
    Ok(BuildRateReport {
        scope: query.scope(),
        granularity: query.granularity,
        overall,
        series,
    })
}

/// The build duration report.
pub async fn build_duration(
    state: &AppState,
    query: &ReportQuery,
) -> ServiceResult<BuildDurationReport> {
    let attempts = state.store.build_attempts(&query.attempt_scope()).await?;
    Ok(build_duration_of(query, &attempts))
}

/// The build durations of `attempts` (pure).
pub fn build_duration_of(query: &ReportQuery, attempts: &[AttemptRow]) -> BuildDurationReport {
    let mut all = Vec::new();
    let mut by_plugin: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for a in attempts {
        all.push(a.duration_ms);
        by_plugin
            .entry(&a.plugin_name)
            .or_default()
            .push(a.duration_ms);
    }
    let mut plugins: Vec<PluginDurations> = by_plugin
        .into_iter()
        .filter_map(|(name, values)| {
            Some(PluginDurations {
                plugin_name: name.to_owned(),
                durations: Summary::of(values)?,
            })
        })
        .collect();
    plugins.sort_by(|a, b| {
        by_p95_then_key(
            (&a.durations, &a.plugin_name),
            (&b.durations, &b.plugin_name),
        )
    });
    plugins.truncate(query.limit);
    BuildDurationReport {
        scope: query.scope(),
        overall: Summary::of(all),
        plugins,
    }
}

/// The build failure report.
pub async fn build_failures(
    state: &AppState,
    query: &ReportQuery,
) -> ServiceResult<BuildFailureReport> {
    let attempts = state.store.build_attempts(&query.attempt_scope()).await?;
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    let mut failures = 0u64;
    for a in attempts
        .iter()
        .filter(|a| attempt_outcome(&a.outcome) == "failure")
    {
        failures += 1;
        *counts
            .entry(a.reason.as_deref().unwrap_or("failed without output"))
            .or_default() += 1;
    }
    let mut reasons: Vec<ReasonCount> = counts
        .into_iter()
        .map(|(reason, count)| ReasonCount {
            reason: reason.to_owned(),
            count,
            share: count as f64 / failures.max(1) as f64,
        })
        .collect();
    reasons.sort_by(|a, b| b.count.cmp(&a.count).then(a.reason.cmp(&b.reason)));
    reasons.truncate(query.limit);
    Ok(BuildFailureReport {
        scope: query.scope(),
        failures,
        reasons,
    })
}
