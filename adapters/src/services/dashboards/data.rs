//! A dashboard's data: each panel's report run for a range as the report service runs
//! it, in an organization the caller may read.

use super::*;

/// One of the reports' answers, named by its report.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(tag = "report", content = "data")]
pub enum ReportAnswer {
    /// `execution/count`.
    #[serde(rename = "execution/count")]
    Count(reports::CountReport),
    /// `execution/success-rate`.
    #[serde(rename = "execution/success-rate")]
    SuccessRate(reports::SuccessRateReport),
    /// `execution/duration`.
    #[serde(rename = "execution/duration")]
    Duration(reports::DurationReport),
    /// `execution/stage-failures`.
    #[serde(rename = "execution/stage-failures")]
    StageFailures(reports::StageFailureReport),
    /// `execution/stage-bottlenecks`.
    #[serde(rename = "execution/stage-bottlenecks")]
    StageBottlenecks(reports::BottleneckReport),
    /// `execution/errors`.
    #[serde(rename = "execution/errors")]
    Errors(reports::ErrorReport),
    /// `plugins/summary`.
    #[serde(rename = "plugins/summary")]
    PluginSummary(reports::PluginSummaryReport),
    /// `plugins/build-success-rate`.
    #[serde(rename = "plugins/build-success-rate")]
    BuildSuccessRate(reports::BuildRateReport),
    /// `plugins/build-duration`.
    #[serde(rename = "plugins/build-duration")]
    BuildDuration(reports::BuildDurationReport),
    /// `plugins/build-failures`.
    #[serde(rename = "plugins/build-failures")]
    BuildFailures(reports::BuildFailureReport),
    /// `compliance/posture-trend`.
    #[serde(rename = "compliance/posture-trend")]
    PostureTrend(crate::services::posture::PostureTrendReport),
}

/// Runs a report by name: the report service's own function.
pub async fn run_report(
    store: &Store,
    report: ReportName,
    query: &ReportQuery,
) -> ServiceResult<ReportAnswer> {
    Ok(match report {
        ReportName::ExecutionCount => ReportAnswer::Count(reports::count(query).await?),
        ReportName::SuccessRate => ReportAnswer::SuccessRate(reports::success_rate(query).await?),
        ReportName::Duration => ReportAnswer::Duration(reports::duration(query).await?),
        ReportName::StageFailures => {
            ReportAnswer::StageFailures(reports::stage_failures(query).await?)
        }
        ReportName::StageBottlenecks => {
            ReportAnswer::StageBottlenecks(reports::stage_bottlenecks(query).await?)
        }
        ReportName::Errors => ReportAnswer::Errors(reports::errors(query).await?),
        ReportName::PluginSummary => {
            ReportAnswer::PluginSummary(reports::plugin_summary(query).await?)
        }
        ReportName::BuildSuccessRate => {
            ReportAnswer::BuildSuccessRate(reports::build_success_rate(query).await?)
        }
        ReportName::BuildDuration => {
            ReportAnswer::BuildDuration(reports::build_duration(query).await?)
        }
        ReportName::BuildFailures => {
            ReportAnswer::BuildFailures(reports::build_failures(query).await?)
        }
        ReportName::PostureTrend => {
            ReportAnswer::PostureTrend(crate::services::posture::trend(store, query).await?)
        }
    })
}

/// One panel's data.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PanelData {
    /// The panel's index.
    pub index: usize,
    /// The panel.
    pub panel: Panel,
    /// Its report's answer for the range (`report` names it, `data` holds it).
    pub answer: ReportAnswer,
}

/// A dashboard's data over a range.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DashboardData {
    /// The dashboard.
    pub dashboard_id: String,
    /// Its version.
    pub version: i64,
    /// The range's start.
    pub from: DateTime<Utc>,
    /// The range's end.
    pub to: DateTime<Utc>,
    /// Every panel's data, in the dashboard's order.
    pub panels: Vec<PanelData>,
}

/// Every panel's report over `[from, to)` (a panel's own `from`/`to` win): each
/// computed by the report service, as `GET /api/reports/...` computes it.
pub async fn data(
    store: &Store,
    config: &Config,
    reporting: &Option<Store>,
    org: &OrgRecord,
    id: &str,
    (from, to): (Option<String>, Option<String>),
    now: DateTime<Utc>,
) -> ServiceResult<DashboardData> {
    let dashboard = get(store, org, id).await?;
    let range = ReportParams {
        from: from.clone(),
        to: to.clone(),
        ..ReportParams::default()
    }
    .check(now)?
    .range;
    let mut panels = Vec::with_capacity(dashboard.panels.len());
    for (index, panel) in dashboard.panels.into_iter().enumerate() {
        let mut params = panel.params.clone();
        if params.from.is_none() && params.to.is_none() {
            params.from = Some(range.from.to_rfc3339());
            params.to = Some(range.to.to_rfc3339());
        }
        let query = reports::query_for(store, config, reporting, org, params.check(now)?).await?;
        let data = run_report(store, panel.report, &query).await?;
        panels.push(PanelData {
            index,
            panel,
            answer: data,
        });
    }
    Ok(DashboardData {
        dashboard_id: dashboard.id,
        version: dashboard.version,
        from: range.from,
        to: range.to,
        panels,
    })
}

/// The organization a clone reads from: one where the caller holds `reports:read`
/// (else 404, as the gate answers for what is absent or not the caller's).
pub async fn readable_org(
    store: &Store,
    config: &Config,
    kept: &KeptFacts,
    caller: &Caller,
    org_id: &str,
) -> ServiceResult<OrgRecord> {
    let org = store
        .organization(org_id)
        .await?
        .ok_or_else(|| ServiceError::NotFound("organization".into()))?;
    if !crate::services::access::holds(
        store,
        config,
        kept,
        caller,
        &org.id,
        tenancy::Permission::ReportsRead,
    )
    .await?
    {
        return Err(ServiceError::NotFound("organization".into()));
    }
    Ok(org)
}
