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
use crate::config::Config;
use crate::storage::{
    unit_of_work, AttemptRow, Derived, ExecutionRow, NewReportEvent, ReportScope, StageRow, Store,
    StoreError, UnattributedRow,
};

mod executions;
mod plugins;

pub use executions::*;
pub use plugins::*;
mod reading;
pub use reading::*;

/// The most events one request may carry.
pub const MAX_BATCH: usize = 1000;
/// The largest request of events, in bytes.
pub const MAX_BATCH_BYTES: usize = 4 << 20;
/// The largest `limit` of a report.
pub const MAX_LIMIT: u32 = 100;
/// The `limit` of a report when none is given.
pub const DEFAULT_LIMIT: u32 = 10;

/// What an ingest did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
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
    store: &Store,
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
    let stored = unit_of_work!(store, |tx| {
        Ok(tx.record_report_events(&rows, now).await?)
    })?;
    let mut executions = 0;
    for (resource, execution) in &touched {
        if derive(store, resource, execution, now).await? {
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
    store: &Store,
    resource: &str,
    execution_id: &str,
    now: DateTime<Utc>,
) -> ServiceResult<bool> {
    let derived = unit_of_work!(store, |tx| {
        Ok(tx
            .derive_execution((resource, execution_id), &derivation, now)
            .await?)
    })?;
    Ok(derived)
}

/// Derives up to `limit` waiting executions (the worker, after a crash between an
/// ingest and its derivation, or after a registration); how many.
pub async fn derive_pending(store: &Store, limit: u32) -> ServiceResult<usize> {
    let pending = store.pending_executions(limit).await?;
    let mut done = 0;
    for (resource, execution) in &pending {
        if derive(store, resource, execution, Utc::now()).await? {
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
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
pub async fn unattributed(store: &Store) -> ServiceResult<Vec<Unattributed>> {
    Ok(store
        .unattributed()
        .await?
        .into_iter()
        .map(Unattributed::from)
        .collect())
}

/// The organizations a report of `org` reads: it, and its teams when asked.
pub async fn organizations_of(
    store: &Store,
    org: &crate::storage::OrgRecord,
    include_teams: bool,
) -> ServiceResult<Vec<String>> {
    let mut ids = vec![org.id.clone()];
    if include_teams {
        let (teams, _) = store.teams(&org.id, 1000, 0, true).await?;
        ids.extend(teams.into_iter().map(|t| t.id));
    }
    Ok(ids)
}

/// The parameters every report takes, as a request's query or a dashboard panel
/// gives them (text, as a query carries it).
#[derive(
    Debug, Clone, Default, PartialEq, Eq, serde::Deserialize, Serialize, utoipa::IntoParams,
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ReportParams {
    /// The first instant in (RFC 3339; default 30 days before `to`).
    #[param(value_type = Option<String>, format = DateTime)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The first instant out (RFC 3339; default now). At most 366 days after `from`.
    #[param(value_type = Option<String>, format = DateTime)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// One pipeline only (execution reports).
    #[param(max_length = 200)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pipeline_id: Option<String>,
    /// One plugin only, by name (plugin reports).
    #[param(max_length = 200)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin_name: Option<String>,
    /// The series' bucket: `hour`, `day` (default) or `week` (UTC, from Monday).
    #[param(value_type = Option<String>, pattern = "^(hour|day|week)$")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub granularity: Option<String>,
    /// Top N (1 to 100, default 10).
    #[param(value_type = Option<i64>, minimum = 1, maximum = 100)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
    /// The organization's teams too (needs `reports:rollup`).
    #[param(value_type = Option<bool>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub include_teams: Option<String>,
}

/// The report parameters, checked (the organizations not yet found).
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedParams {
    /// `[from, to)`.
    pub range: TimeRange,
    /// One pipeline only.
    pub pipeline_id: Option<String>,
    /// One plugin only.
    pub plugin_name: Option<String>,
    /// The series' bucket.
    pub granularity: Granularity,
    /// Top N.
    pub limit: usize,
    /// The organization's teams too.
    pub include_teams: bool,
}

fn instant(field: &'static str, value: Option<&str>) -> ServiceResult<Option<DateTime<Utc>>> {
    value
        .map(|v| {
            DateTime::parse_from_rfc3339(v.trim())
                .map(|t| t.with_timezone(&Utc))
                .map_err(|_| ServiceError::invalid(field, "must be an RFC 3339 instant"))
        })
        .transpose()
}

/// A filter's text: trimmed, not empty, at most `max` characters, no control
/// characters.
pub fn filter_text(field: &'static str, value: &str, max: usize) -> ServiceResult<String> {
    let value = value.trim();
    if value.is_empty() {
        return Err(ServiceError::invalid(field, "must not be empty"));
    }
    if value.chars().count() > max {
        return Err(ServiceError::invalid(
            field,
            format!("must be at most {max} characters"),
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(ServiceError::invalid(
            field,
            "must not contain control characters",
        ));
    }
    Ok(value.to_owned())
}

impl ReportParams {
    /// Checks every parameter as the reports do, naming the first bad one; the
    /// range is relative to `now`.
    pub fn check(&self, now: DateTime<Utc>) -> ServiceResult<CheckedParams> {
        let range = TimeRange::new(
            instant("from", self.from.as_deref())?,
            instant("to", self.to.as_deref())?,
            now,
        )
        .map_err(|e| ServiceError::invalid(e.parameter, e.problem))?;
        let granularity = match self.granularity.as_deref() {
            None => Granularity::Day,
            Some(text) => Granularity::parse(text)
                .ok_or_else(|| ServiceError::invalid("granularity", "must be hour, day or week"))?,
        };
        let limit = match self.limit.as_deref() {
            None => DEFAULT_LIMIT,
            Some(text) => text
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=MAX_LIMIT).contains(n))
                .ok_or_else(|| {
                    ServiceError::invalid(
                        "limit",
                        format!("must be a whole number from 1 to {MAX_LIMIT}"),
                    )
                })?,
        };
        let include_teams = match self.include_teams.as_deref() {
            None | Some("false") => false,
            Some("true") => true,
            Some(_) => {
                return Err(ServiceError::invalid(
                    "includeTeams",
                    "must be true or false",
                ))
            }
        };
        Ok(CheckedParams {
            range,
            pipeline_id: self
                .pipeline_id
                .as_deref()
                .map(|p| filter_text("pipelineId", p, 200))
                .transpose()?,
            plugin_name: self
                .plugin_name
                .as_deref()
                .map(|p| filter_text("pluginName", p, 200))
                .transpose()?,
            granularity,
            limit: usize::try_from(limit).unwrap_or(10),
            include_teams,
        })
    }

    /// Reads a panel's parameters: a JSON object whose values are text, numbers or
    /// booleans (as a query would carry them).
    pub fn from_json(value: &Value) -> Result<ReportParams, String> {
        let Value::Object(map) = value else {
            return Err("must be an object of the report's query parameters".to_owned());
        };
        let mut text = serde_json::Map::new();
        for (key, value) in map {
            let as_text = match value {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                Value::Null => continue,
                _ => return Err(format!("`{key}` must be text, a number or a boolean")),
            };
            text.insert(key.clone(), Value::String(as_text));
        }
        serde_json::from_value(Value::Object(text)).map_err(|e| e.to_string())
    }
}

/// The query a report of `org` runs for checked parameters: the organization, and
/// its teams when asked (the caller checked `reports:rollup`).
pub async fn query_for(
    store: &Store,
    config: &Config,
    reporting: &Option<Store>,
    org: &crate::storage::OrgRecord,
    params: CheckedParams,
) -> ServiceResult<ReportQuery> {
    let org_ids = organizations_of(store, org, params.include_teams).await?;
    Ok(ReportQuery {
        range: params.range,
        pipeline_id: params.pipeline_id,
        plugin_name: params.plugin_name,
        granularity: params.granularity,
        limit: params.limit,
        org_ids,
        reading: reading(store, config, reporting).await,
    })
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
    /// Where it reads.
    pub reading: Reading,
}

/// The range and filters a report answered for.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
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
    /// The data are those of this instant or later (a standby's last replayed
    /// heartbeat; now, on the primary).
    pub as_of: DateTime<Utc>,
    /// Which database answered: `standby` (`REPORTING_DATABASE_URL`) or `primary`.
    pub read_from: ReadFrom,
}

impl ReportQuery {
    /// What a report of this query answered for.
    pub fn scope(&self) -> ReportBasis {
        ReportBasis {
            from: self.range.from,
            to: self.range.to,
            pipeline_id: self.pipeline_id.clone(),
            plugin_name: self.plugin_name.clone(),
            org_ids: self.org_ids.clone(),
            as_of: self.reading.as_of,
            read_from: self.reading.read_from,
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

/// Successes and failures, and their rate (none when both are zero).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema,
)]
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
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RateBucket {
    /// The bucket's start.
    pub start: DateTime<Utc>,
    /// Its successes, failures and rate.
    #[serde(flatten)]
    pub rate: Rate,
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

fn by_p95_then_key<K: Ord>(a: (&Summary, K), b: (&Summary, K)) -> std::cmp::Ordering {
    b.0.p95
        .partial_cmp(&a.0.p95)
        .unwrap_or(std::cmp::Ordering::Equal)
        .then(a.1.cmp(&b.1))
}
