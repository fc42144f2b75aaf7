//! The recurring scans of an organization: listed, created, changed, turned on and off,
//! deleted.

use super::*;

/// A recurring scan to create.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ScheduleBody {
    target: ScanTarget,
    /// Five cron fields: minute hour dayOfMonth month dayOfWeek (UTC).
    #[schema(max_length = 200)]
    cron_expression: String,
}

/// A schedule's new target and/or cron expression (at least one).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(min_properties = 1)]
pub(crate) struct ScheduleChange {
    target: Option<ScanTarget>,
    #[schema(max_length = 200)]
    cron_expression: Option<String>,
}

/// Whether a schedule runs.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ActiveBody {
    is_active: bool,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(crate) struct ScheduleQuery {
    #[serde(flatten)]
    #[param(ignore)]
    page: PageParams,
}

/// `GET /compliance/scan-schedules`.
pub(crate) async fn schedules(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<ScheduleQuery>,
) -> Result<Paged<ScanSchedule>, ApiError> {
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    let (items, total) =
        schedules::list(&state.infra.store, &granted.org, page.limit, page.offset).await?;
    let items = items.into_iter().map(ScanSchedule::from).collect();
    Ok(Paged::new("schedules", items, total, page))
}

/// `POST /compliance/scan-schedules`.
pub(crate) async fn create_schedule(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<ScheduleBody>,
) -> Result<Answer<ScanSchedule>, ApiError> {
    let schedule = schedules::create(
        &state.infra.store,
        &state.config,
        &caller,
        &granted.org,
        body.target.as_str(),
        &body.cron_expression,
    )
    .await?;
    Ok(Answer::created(schedule.into()))
}

/// `PUT /compliance/scan-schedules/:id`.
pub(crate) async fn update_schedule(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<ScheduleChange>,
) -> Result<Answer<ScanSchedule>, ApiError> {
    let change = Change {
        target: body.target.map(ScanTarget::as_str),
        cron_expression: body.cron_expression.as_deref(),
        is_active: None,
    };
    let schedule = schedules::change(
        &state.infra.store,
        &state.config,
        &caller,
        &granted.org,
        &id,
        change,
    )
    .await?;
    Ok(Answer::ok(schedule.into()))
}

/// `PATCH /compliance/scan-schedules/:id/active`.
pub(crate) async fn toggle_schedule(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<ActiveBody>,
) -> Result<Answer<ScanSchedule>, ApiError> {
    let change = Change {
        is_active: Some(body.is_active),
        ..Change::default()
    };
    let schedule = schedules::change(
        &state.infra.store,
        &state.config,
        &caller,
        &granted.org,
        &id,
        change,
    )
    .await?;
    Ok(Answer::ok(schedule.into()))
}

/// `DELETE /compliance/scan-schedules/:id`: deactivates.
pub(crate) async fn delete_schedule(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<ScanSchedule>, ApiError> {
    let schedule = schedules::deactivate(
        &state.infra.store,
        &state.config,
        &caller,
        &granted.org,
        &id,
    )
    .await?;
    Ok(Answer::ok(schedule.into()))
}
