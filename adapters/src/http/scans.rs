//! `/compliance/scans`, `/compliance/scan-schedules` and `/compliance/posture`.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use compliance_core::{Severity, Target};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::http::error::ApiError;
use crate::http::extract::{Json, PageParams, Query};
use crate::http::gate::Granted;
use crate::http::response::{Answer, Paged};
use crate::http::state::{AppState, Caller};
use crate::inventory::{AccessModifier, EntityResult};
use crate::policy_report::PolicyReport;
use crate::services::posture::{FailingRule, Posture, StatusCounts};
use crate::services::scans::{ScanRecord, ScanResult, ScheduleRecord};
use crate::services::schedules::Change;
use crate::services::{posture, scans, schedules};
mod recurring;
pub(crate) use recurring::*;

/// What a scan sweeps.
#[derive(Debug, Clone, Copy, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ScanTarget {
    Plugin,
    Pipeline,
    All,
}

impl ScanTarget {
    fn as_str(self) -> &'static str {
        match self {
            ScanTarget::Plugin => "plugin",
            ScanTarget::Pipeline => "pipeline",
            ScanTarget::All => "all",
        }
    }
}

/// Where a scan stands.
#[derive(Debug, Clone, Copy, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ScanStatus {
    Running,
    Completed,
    Cancelled,
    Failed,
}

impl ScanStatus {
    fn as_str(self) -> &'static str {
        match self {
            ScanStatus::Running => "running",
            ScanStatus::Completed => "completed",
            ScanStatus::Cancelled => "cancelled",
            ScanStatus::Failed => "failed",
        }
    }
}

/// What narrows a sweep; `orgId` is always the organization's.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(dead_code)]
pub(crate) struct ScanFilter {
    /// Replaced by the organization's.
    org_id: Option<String>,
    #[schema(max_length = 200)]
    name: Option<String>,
    access_modifier: Option<AccessModifier>,
    #[schema(max_length = 200)]
    project: Option<String>,
}

/// A scan to start.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ScanBody {
    target: ScanTarget,
    /// Read by the scan service, which names the field at fault.
    #[schema(value_type = Option<ScanFilter>)]
    filter: Option<Map<String, Value>>,
}

/// A scan's counts.
#[derive(Debug, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ScanCounts {
    /// Entities matching when it started (reconciled to `scanned` at the end).
    pub total: u64,
    pub scanned: u64,
    pub passed: u64,
    pub warned: u64,
    pub blocked: u64,
    /// Entities that could not be judged.
    pub errors: u64,
}

/// A scan as the API answers it.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Scan {
    pub id: String,
    pub org_id: String,
    #[schema(value_type = ScanTarget)]
    pub target: String,
    /// What narrows the sweep.
    #[schema(value_type = ScanFilter)]
    pub filter: Value,
    #[schema(value_type = ScanStatus)]
    pub status: String,
    /// `manual`, `schedule` or `rule-change`.
    pub origin: String,
    pub schedule_id: Option<String>,
    pub requested_by: String,
    pub counts: ScanCounts,
    /// SHA-256 of the rules the sweep used, once it has begun.
    pub rule_set_fingerprint: Option<String>,
    pub error: Option<String>,
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
}

impl From<ScanRecord> for Scan {
    fn from(r: ScanRecord) -> Self {
        let c = r.counts;
        Scan {
            id: r.id,
            org_id: r.org_id,
            target: r.target,
            filter: r.filter,
            status: r.status,
            origin: r.origin,
            schedule_id: r.schedule_id,
            requested_by: r.requested_by,
            counts: ScanCounts {
                total: c.total,
                scanned: c.scanned,
                passed: c.passed,
                warned: c.warned,
                blocked: c.blocked,
                errors: c.errors,
            },
            rule_set_fingerprint: r.rule_set_fingerprint,
            error: r.error,
            started_at: r.started_at,
            ended_at: r.ended_at,
            updated_at: r.updated_at,
        }
    }
}

/// One entity's result in a scan.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScanEntityResult {
    pub scan_id: String,
    #[schema(value_type = Target)]
    pub target: String,
    pub entity_id: String,
    /// A plugin's `name@version`, a pipeline's name.
    pub entity_name: String,
    #[schema(value_type = EntityResult)]
    pub result: String,
    /// The bounded violations.
    pub violations: Vec<compliance_core::Violation>,
    /// Why it could not be judged.
    pub error: Option<String>,
    pub scanned_at: DateTime<Utc>,
}

impl From<ScanResult> for ScanEntityResult {
    fn from(r: ScanResult) -> Self {
        ScanEntityResult {
            scan_id: r.scan_id,
            target: r.target,
            entity_id: r.entity_id,
            entity_name: r.entity_name,
            result: r.result,
            violations: r.violations,
            error: r.error,
            scanned_at: r.scanned_at,
        }
    }
}

/// A recurring scan.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScanSchedule {
    pub id: String,
    pub org_id: String,
    #[schema(value_type = ScanTarget)]
    pub target: String,
    /// Five fields: minute hour dayOfMonth month dayOfWeek (UTC).
    pub cron_expression: String,
    pub is_active: bool,
    /// None while inactive, or when the expression never fires.
    pub next_run_at: Option<DateTime<Utc>>,
    pub last_run_at: Option<DateTime<Utc>>,
    pub last_scan_id: Option<String>,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<ScheduleRecord> for ScanSchedule {
    fn from(r: ScheduleRecord) -> Self {
        ScanSchedule {
            id: r.id,
            org_id: r.org_id,
            target: r.target,
            cron_expression: r.cron_expression,
            is_active: r.is_active,
            next_run_at: r.next_run_at,
            last_run_at: r.last_run_at,
            last_scan_id: r.last_scan_id,
            created_by: r.created_by,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// Entities by current result.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ResultCounts {
    pub total: u64,
    pub pass: u64,
    pub warn: u64,
    pub block: u64,
    pub error: u64,
}

impl From<StatusCounts> for ResultCounts {
    fn from(c: StatusCounts) -> Self {
        ResultCounts {
            total: c.total,
            pass: c.pass,
            warn: c.warn,
            block: c.block,
            error: c.error,
        }
    }
}

/// A rule and how many violations of it the entities carry.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailingRuleCount {
    pub rule_id: String,
    pub rule_name: String,
    #[schema(value_type = Severity)]
    pub severity: String,
    #[schema(value_type = Target)]
    pub target: String,
    pub violations: u64,
}

impl From<FailingRule> for FailingRuleCount {
    fn from(r: FailingRule) -> Self {
        FailingRuleCount {
            rule_id: r.rule_id,
            rule_name: r.rule_name,
            severity: r.severity,
            target: r.target,
            violations: r.violations,
        }
    }
}

/// The organization's entities by current result and the rules failing most.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompliancePosture {
    pub org_id: String,
    pub entities: ResultCounts,
    /// The same per target (`plugin`, `pipeline`).
    pub by_target: BTreeMap<String, ResultCounts>,
    pub top_failing_rules: Vec<FailingRuleCount>,
    pub generated_at: DateTime<Utc>,
}

impl From<Posture> for CompliancePosture {
    fn from(p: Posture) -> Self {
        CompliancePosture {
            org_id: p.org_id,
            entities: p.entities.into(),
            by_target: p
                .by_target
                .into_iter()
                .map(|(t, c)| (t.as_str().to_owned(), c.into()))
                .collect(),
            top_failing_rules: p.top_failing_rules.into_iter().map(Into::into).collect(),
            generated_at: p.generated_at,
        }
    }
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(crate) struct ScanQuery {
    #[param(inline)]
    target: Option<ScanTarget>,
    #[param(inline)]
    status: Option<ScanStatus>,
    #[serde(flatten)]
    #[param(ignore)]
    page: PageParams,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(crate) struct ResultQuery {
    #[param(value_type = Option<EntityResult>, inline)]
    result: Option<String>,
    #[serde(flatten)]
    #[param(ignore)]
    page: PageParams,
}

/// `POST /compliance/scans`: 202, the scan as stored (swept by a worker).
pub(crate) async fn start(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<ScanBody>,
) -> Result<Answer<Scan>, ApiError> {
    let scan = scans::start(
        &state.infra.store,
        &state.config,
        &state.infra.metrics,
        &caller,
        &granted.org,
        body.target.as_str(),
        body.filter.as_ref(),
    )
    .await?;
    Ok(Answer::accepted(scan.into()))
}

/// `GET /compliance/scans`.
pub(crate) async fn list(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<ScanQuery>,
) -> Result<Paged<Scan>, ApiError> {
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    let (items, total) = scans::list(
        &state.infra.store,
        &granted.org,
        (
            q.target.map(ScanTarget::as_str),
            q.status.map(ScanStatus::as_str),
        ),
        page.limit,
        page.offset,
    )
    .await?;
    let items = items.into_iter().map(Scan::from).collect();
    Ok(Paged::new("scans", items, total, page))
}

/// `GET /compliance/scans/:id`.
pub(crate) async fn get(
    State(state): State<AppState>,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<Scan>, ApiError> {
    let scan = scans::get(&state.infra.store, &granted.org, &id).await?;
    Ok(Answer::ok(scan.into()))
}

/// `GET /compliance/scans/:id/results`.
pub(crate) async fn results(
    State(state): State<AppState>,
    granted: Granted,
    Path(id): Path<String>,
    Query(q): Query<ResultQuery>,
) -> Result<Paged<ScanEntityResult>, ApiError> {
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    let (items, total) = scans::results(
        &state.infra.store,
        &granted.org,
        &id,
        q.result.as_deref(),
        page.limit,
        page.offset,
    )
    .await?;
    let items = items.into_iter().map(ScanEntityResult::from).collect();
    Ok(Paged::new("results", items, total, page))
}

/// `POST /compliance/scans/:id/cancel`.
pub(crate) async fn cancel(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<Scan>, ApiError> {
    let scan = scans::cancel(&state.infra.store, &caller, &granted.org, &id).await?;
    Ok(Answer::ok(scan.into()))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct PostureQuery {
    #[param(value_type = Option<Target>, inline)]
    target: Option<String>,
    #[param(value_type = Option<u32>, minimum = 1, maximum = 100)]
    top: Option<String>,
}

/// `GET /compliance/posture`.
pub(crate) async fn posture(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<PostureQuery>,
) -> Result<Answer<CompliancePosture>, ApiError> {
    let top = match q.top.as_deref() {
        None => 10,
        Some(text) => text
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=posture::MAX_TOP_RULES).contains(n))
            .ok_or_else(|| {
                ApiError::invalid_field(
                    "top",
                    format!(
                        "must be a whole number from 1 to {}",
                        posture::MAX_TOP_RULES
                    ),
                )
            })?,
    };
    let answer =
        posture::posture(&state.infra.store, &granted.org, q.target.as_deref(), top).await?;
    Ok(Answer::ok(answer.into()))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(crate) struct ReportQuery {
    #[param(value_type = Target, required = true, inline)]
    target: Option<String>,
    /// Only entities whose current result is this one.
    #[param(value_type = Option<String>, pattern = "^(pass|warn|block|error)$")]
    status: Option<String>,
    /// Only entities whose current result violates this rule (its id), and only
    /// that rule's results.
    #[param(max_length = 200)]
    rule: Option<String>,
    #[serde(flatten)]
    #[param(ignore)]
    page: PageParams,
}

/// `GET /compliance/posture/policy-report`: the report itself (no envelope), as
/// policy report tooling reads it.
pub(crate) async fn policy_report(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<ReportQuery>,
) -> Result<Response, ApiError> {
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    let target = q
        .target
        .as_deref()
        .ok_or_else(|| ApiError::invalid_field("target", "is required: plugin or pipeline"))?;
    let rule = q
        .rule
        .as_deref()
        .map(|r| crate::http::organizations::text("rule", r, 200))
        .transpose()?;
    let filter = posture::JudgedFilter {
        status: q.status,
        rule_id: rule,
    };
    let report: PolicyReport = posture::policy_report(
        &state.infra.store,
        &granted.org,
        (target, &filter),
        page.limit,
        page.offset,
    )
    .await?;
    Ok((StatusCode::OK, axum::Json(report)).into_response())
}
