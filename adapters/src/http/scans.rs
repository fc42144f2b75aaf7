//! `/compliance/scans`, `/compliance/scan-schedules` and `/compliance/posture`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::http::error::ApiError;
use crate::http::extract::{Json, PageParams, Query};
use crate::http::gate::Granted;
use crate::http::response::{ok, paginated};
use crate::http::state::{AppState, Caller};
use crate::services::schedules::Change;
use crate::services::{posture, scans, schedules};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ScanBody {
    target: String,
    filter: Option<Map<String, Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ScanQuery {
    target: Option<String>,
    status: Option<String>,
    #[serde(flatten)]
    page: PageParams,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResultQuery {
    result: Option<String>,
    #[serde(flatten)]
    page: PageParams,
}

/// `POST /compliance/scans`: 202, the scan as stored (swept by a worker).
pub(crate) async fn start(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<ScanBody>,
) -> Result<Response, ApiError> {
    let scan = scans::start(
        &state,
        &caller,
        &granted.org,
        &body.target,
        body.filter.as_ref(),
    )
    .await?;
    Ok(ok(StatusCode::ACCEPTED, scan))
}

/// `GET /compliance/scans`.
pub(crate) async fn list(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<ScanQuery>,
) -> Result<Response, ApiError> {
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    let (items, total) = scans::list(
        &state,
        &granted.org,
        (q.target.as_deref(), q.status.as_deref()),
        page.limit,
        page.offset,
    )
    .await?;
    Ok(paginated("scans", items, total, &page))
}

/// `GET /compliance/scans/:id`.
pub(crate) async fn get(
    State(state): State<AppState>,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let scan = scans::get(&state, &granted.org, &id).await?;
    Ok(ok(StatusCode::OK, scan))
}

/// `GET /compliance/scans/:id/results`.
pub(crate) async fn results(
    State(state): State<AppState>,
    granted: Granted,
    Path(id): Path<String>,
    Query(q): Query<ResultQuery>,
) -> Result<Response, ApiError> {
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    let (items, total) = scans::results(
        &state,
        &granted.org,
        &id,
        q.result.as_deref(),
        page.limit,
        page.offset,
    )
    .await?;
    Ok(paginated("results", items, total, &page))
}

/// `POST /compliance/scans/:id/cancel`.
pub(crate) async fn cancel(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let scan = scans::cancel(&state, &caller, &granted.org, &id).await?;
    Ok(ok(StatusCode::OK, scan))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ScheduleBody {
    target: String,
    cron_expression: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ScheduleChange {
    target: Option<String>,
    cron_expression: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ActiveBody {
    is_active: bool,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ScheduleQuery {
    #[serde(flatten)]
    page: PageParams,
}

/// `GET /compliance/scan-schedules`.
pub(crate) async fn schedules(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<ScheduleQuery>,
) -> Result<Response, ApiError> {
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    let (items, total) = schedules::list(&state, &granted.org, page.limit, page.offset).await?;
    Ok(paginated("schedules", items, total, &page))
}

/// `POST /compliance/scan-schedules`.
pub(crate) async fn create_schedule(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<ScheduleBody>,
) -> Result<Response, ApiError> {
    let schedule = schedules::create(
        &state,
        &caller,
        &granted.org,
        &body.target,
        &body.cron_expression,
    )
    .await?;
    Ok(ok(StatusCode::CREATED, schedule))
}

/// `PUT /compliance/scan-schedules/:id`.
pub(crate) async fn update_schedule(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<ScheduleChange>,
) -> Result<Response, ApiError> {
    let change = Change {
        target: body.target.as_deref(),
        cron_expression: body.cron_expression.as_deref(),
        is_active: None,
    };
    let schedule = schedules::change(&state, &caller, &granted.org, &id, change).await?;
    Ok(ok(StatusCode::OK, schedule))
}

/// `PATCH /compliance/scan-schedules/:id/active`.
pub(crate) async fn toggle_schedule(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<ActiveBody>,
) -> Result<Response, ApiError> {
    let change = Change {
        is_active: Some(body.is_active),
        ..Change::default()
    };
    let schedule = schedules::change(&state, &caller, &granted.org, &id, change).await?;
    Ok(ok(StatusCode::OK, schedule))
}

/// `DELETE /compliance/scan-schedules/:id`: deactivates.
pub(crate) async fn delete_schedule(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let schedule = schedules::deactivate(&state, &caller, &granted.org, &id).await?;
    Ok(ok(StatusCode::OK, schedule))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PostureQuery {
    target: Option<String>,
    top: Option<String>,
}

/// `GET /compliance/posture`.
pub(crate) async fn posture(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<PostureQuery>,
) -> Result<Response, ApiError> {
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
    let answer = posture::posture(&state, &granted.org, q.target.as_deref(), top).await?;
    Ok(ok(StatusCode::OK, answer))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReportQuery {
    target: Option<String>,
    #[serde(flatten)]
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
    let report =
        posture::policy_report(&state, &granted.org, target, page.limit, page.offset).await?;
    Ok((StatusCode::OK, axum::Json(report)).into_response())
}
