//! `/api/reports/*`: execution events in (a service), the execution reports out
//! (`reports:read`; with `includeTeams`, `reports:rollup`). Every report takes the
//! same parameters; each is checked here, a bad one named in the 400.

use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;
use tenancy::Permission;

use crate::http::error::ApiError;
use crate::http::extract::{Json, Query};
use crate::http::gate::Granted;
use crate::http::response::Answer;
use crate::http::state::AppState;
use crate::services::reports::{
    self, BottleneckReport, BuildDurationReport, BuildFailureReport, BuildRateReport, CountReport,
    DurationReport, ErrorReport, Ingested, PluginSummaryReport, ReportQuery, StageFailureReport,
    SuccessRateReport, Unattributed, DEFAULT_LIMIT, MAX_LIMIT,
};

/// `POST /api/reports/events` (a service token): one EventBridge envelope or an
/// array of them.
pub(crate) async fn ingest(
    State(state): State<AppState>,
    Json(body): Json<Value>,
) -> Result<Answer<Ingested>, ApiError> {
    let events = reports::parse_batch(&body)?;
    Ok(Answer::ok(
        reports::ingest(&state, events, Utc::now()).await?,
    ))
}

/// The parameters every report takes.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct ReportParams {
    /// The first instant in (RFC 3339; default 30 days before `to`).
    #[param(value_type = Option<String>, format = DateTime)]
    from: Option<String>,
    /// The first instant out (RFC 3339; default now). At most 366 days after `from`.
    #[param(value_type = Option<String>, format = DateTime)]
    to: Option<String>,
    /// One pipeline only (execution reports).
    #[param(max_length = 200)]
    pipeline_id: Option<String>,
    /// One plugin only, by name (plugin reports).
    #[param(max_length = 200)]
    plugin_name: Option<String>,
    /// The series' bucket: `hour`, `day` (default) or `week` (UTC, from Monday).
    #[param(value_type = Option<String>, pattern = "^(hour|day|week)$")]
    granularity: Option<String>,
    /// Top N (1 to 100, default 10).
    #[param(value_type = Option<i64>, minimum = 1, maximum = 100)]
    limit: Option<String>,
    /// The organization's teams too (needs `reports:rollup`).
    #[param(value_type = Option<bool>)]
    include_teams: Option<String>,
}

fn instant(field: &str, value: Option<&str>) -> Result<Option<DateTime<Utc>>, ApiError> {
    value
        .map(|v| {
            DateTime::parse_from_rfc3339(v.trim())
                .map(|t| t.with_timezone(&Utc))
                .map_err(|_| ApiError::invalid_field(field, "must be an RFC 3339 instant"))
        })
        .transpose()
}

/// Checks the parameters and finds the organizations a report reads.
async fn query_of(
    state: &AppState,
    granted: &Granted,
    params: ReportParams,
) -> Result<ReportQuery, ApiError> {
    let range = reporting::TimeRange::new(
        instant("from", params.from.as_deref())?,
        instant("to", params.to.as_deref())?,
        Utc::now(),
    )
    .map_err(|e| ApiError::invalid_field(e.parameter, e.problem))?;
    let granularity = match params.granularity.as_deref() {
        None => reporting::Granularity::Day,
        Some(text) => reporting::Granularity::parse(text)
            .ok_or_else(|| ApiError::invalid_field("granularity", "must be hour, day or week"))?,
    };
    let limit = match params.limit.as_deref() {
        None => DEFAULT_LIMIT,
        Some(text) => text
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_LIMIT).contains(n))
            .ok_or_else(|| {
                ApiError::invalid_field(
                    "limit",
                    format!("must be a whole number from 1 to {MAX_LIMIT}"),
                )
            })?,
    };
    let include_teams = match params.include_teams.as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => {
            return Err(ApiError::invalid_field(
                "includeTeams",
                "must be true or false",
            ))
        }
    };
    let pipeline_id = params
        .pipeline_id
        .as_deref()
        .map(|p| crate::http::organizations::text("pipelineId", p, 200))
        .transpose()?;
    if include_teams
        && !granted.super_admin
        && !granted.permissions.contains(&Permission::ReportsRollup)
    {
        return Err(ApiError::forbidden(
            "the `reports:rollup` permission is required to include the teams",
        )
        .with_details(serde_json::json!({"missing": "reports:rollup"})));
    }
    let plugin_name = params
        .plugin_name
        .as_deref()
        .map(|p| crate::http::organizations::text("pluginName", p, 200))
        .transpose()?;
    let org_ids = reports::organizations_of(state, &granted.org, include_teams).await?;
    Ok(ReportQuery {
        range,
        pipeline_id,
        plugin_name,
        granularity,
        limit: usize::try_from(limit).unwrap_or(10),
        org_ids,
    })
}

macro_rules! report {
    ($name:ident, $answer:ty) => {
        #[doc = concat!("`GET /api/reports/...`: the `", stringify!($name), "` report.")]
        pub(crate) async fn $name(
            State(state): State<AppState>,
            granted: Granted,
            Query(params): Query<ReportParams>,
        ) -> Result<Answer<$answer>, ApiError> {
            let query = query_of(&state, &granted, params).await?;
            Ok(Answer::ok(reports::$name(&state, &query).await?))
        }
    };
}

report!(count, CountReport);
report!(success_rate, SuccessRateReport);
report!(duration, DurationReport);
report!(stage_failures, StageFailureReport);
report!(stage_bottlenecks, BottleneckReport);
report!(errors, ErrorReport);
report!(plugin_summary, PluginSummaryReport);
report!(build_success_rate, BuildRateReport);
report!(build_duration, BuildDurationReport);
report!(build_failures, BuildFailureReport);

/// The resource names waiting for a registration.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct UnattributedList {
    resources: Vec<Unattributed>,
}

/// `GET /api/reports/unattributed` (super-admin).
pub(crate) async fn unattributed(
    State(state): State<AppState>,
) -> Result<Answer<UnattributedList>, ApiError> {
    Ok(Answer::ok(UnattributedList {
        resources: reports::unattributed(&state).await?,
    }))
}
