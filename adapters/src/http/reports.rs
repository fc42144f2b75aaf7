//! `/api/reports/*`: execution events in (a service), the execution reports out
//! (`reports:read`; with `includeTeams`, `reports:rollup`). Every report takes the
//! same parameters; each is checked here, a bad one named in the 400.

use axum::extract::State;
use chrono::Utc;
use serde_json::Value;
use tenancy::Permission;

use crate::http::error::ApiError;
use crate::http::extract::{Json, Query};
use crate::http::gate::Granted;
use crate::http::response::Answer;
use crate::http::state::AppState;
use crate::services::reports::{
    self, BottleneckReport, BuildDurationReport, BuildFailureReport, BuildRateReport, CountReport,
    DurationReport, ErrorReport, Ingested, PluginSummaryReport, ReportParams, ReportQuery,
    StageFailureReport, SuccessRateReport, Unattributed,
};

/// `POST /api/reports/events` (a service token): one EventBridge envelope or an
/// array of them.
pub(crate) async fn ingest(
    State(state): State<AppState>,
    Json(body): Json<Value>,
) -> Result<Answer<Ingested>, ApiError> {
    let events = reports::parse_batch(&body)?;
    Ok(Answer::ok(
        reports::ingest(&state.infra.store, events, Utc::now()).await?,
    ))
}

/// Checks the parameters and finds the organizations a report reads.
async fn query_of(
    state: &AppState,
    granted: &Granted,
    params: ReportParams,
) -> Result<ReportQuery, ApiError> {
    let checked = params.check(Utc::now())?;
    if checked.include_teams
        && !granted.super_admin
        && !granted.permissions.contains(&Permission::ReportsRollup)
    {
        return Err(ApiError::forbidden(
            "the `reports:rollup` permission is required to include the teams",
        )
        .with_details(serde_json::json!({"missing": "reports:rollup"})));
    }
    Ok(reports::query_for(
        &state.infra.store,
        &state.config,
        &state.infra.reporting,
        &granted.org,
        checked,
    )
    .await?)
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
            Ok(Answer::ok(reports::$name(&query).await?))
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

/// `GET /api/reports/compliance/posture-trend`.
pub(crate) async fn posture_trend(
    State(state): State<AppState>,
    granted: Granted,
    Query(params): Query<ReportParams>,
) -> Result<Answer<crate::services::posture::PostureTrendReport>, ApiError> {
    let query = query_of(&state, &granted, params).await?;
    Ok(Answer::ok(
        crate::services::posture::trend(&state.infra.store, &query).await?,
    ))
}

/// The resource names waiting for a registration.
#[derive(Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnattributedList {
    pub resources: Vec<Unattributed>,
}

/// `GET /api/reports/unattributed` (super-admin).
pub(crate) async fn unattributed(
    State(state): State<AppState>,
) -> Result<Answer<UnattributedList>, ApiError> {
    Ok(Answer::ok(UnattributedList {
        resources: reports::unattributed(&state.infra.store).await?,
    }))
}
