//! `/api/dashboards`: dashboards over the reports (`reports:read` to read,
//! `dashboards:write` to change) and their data.

use axum::extract::{Path, State};
use chrono::Utc;
use serde::Deserialize;
use serde_json::Value;
use tenancy::Permission;

use crate::http::error::ApiError;
use crate::http::extract::{Json, PageParams, Query};
use crate::http::gate::Granted;
use crate::http::response::{Answer, Deleted, Paged};
use crate::http::state::{AppState, Caller};
use crate::services::dashboards::{self, Dashboard, DashboardData, DashboardInput, Rollup};

/// A dashboard as written.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct DashboardBody {
    /// Its title (1 to 200 characters).
    #[schema(max_length = 200)]
    title: String,
    /// At most 24 panels: `{title?, kind: stat|timeseries|table|heatmap, report,
    /// params, position: {x, y, w, h}}`, `report` one of the reports by its path
    /// under `/api/reports/` (`execution/success-rate`), `params` that report's own
    /// query parameters, checked as the report checks them.
    #[serde(default)]
    #[schema(value_type = Vec<crate::services::dashboards::Panel>)]
    panels: Vec<Value>,
    /// `PUT`: the version read; another is 409.
    #[serde(default)]
    version: Option<i64>,
}

/// What a clone names.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct DashboardCloneBody {
    /// The organization the dashboard is read from (default the `x-org-id` one;
    /// `reports:read` there).
    #[serde(default)]
    source_org_id: Option<String>,
    /// The copy's title (default the source's and ` (copy)`).
    #[serde(default)]
    #[schema(max_length = 200)]
    title: Option<String>,
}

/// The range of a dashboard's data.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct DataQuery {
    /// The first instant in (RFC 3339; default 30 days before `to`).
    #[param(value_type = Option<String>, format = DateTime)]
    from: Option<String>,
    /// The first instant out (RFC 3339; default now).
    #[param(value_type = Option<String>, format = DateTime)]
    to: Option<String>,
}

fn rollup(granted: &Granted) -> Rollup {
    Rollup(granted.super_admin || granted.permissions.contains(&Permission::ReportsRollup))
}

/// `GET /api/dashboards`.
pub(crate) async fn list(
    State(state): State<AppState>,
    granted: Granted,
    Query(page): Query<PageParams>,
) -> Result<Paged<Dashboard>, ApiError> {
    let page = page.check_sorted(
        state.config.http.max_page_limit,
        &["createdAt"],
        "createdAt",
    )?;
    let (items, total) =
        dashboards::list(&state.infra.store, &granted.org, page.limit, page.offset).await?;
    Ok(Paged::new("dashboards", items, total, page))
}

/// `POST /api/dashboards`.
pub(crate) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<DashboardBody>,
) -> Result<Answer<Dashboard>, ApiError> {
    let input = DashboardInput {
        title: body.title,
        panels: body.panels,
    };
    let made = dashboards::create(
        &state.infra.store,
        &caller,
        &granted.org,
        input,
        rollup(&granted),
        Utc::now(),
    )
    .await?;
    Ok(Answer::created(made))
}

/// `GET /api/dashboards/{id}`.
pub(crate) async fn get(
    State(state): State<AppState>,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<Dashboard>, ApiError> {
    Ok(Answer::ok(
        dashboards::get(&state.infra.store, &granted.org, &id).await?,
    ))
}

/// `PUT /api/dashboards/{id}`.
pub(crate) async fn update(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<DashboardBody>,
) -> Result<Answer<Dashboard>, ApiError> {
    let version = body
        .version
        .ok_or_else(|| ApiError::invalid_field("version", "is required: the version read"))?;
    let input = DashboardInput {
        title: body.title,
        panels: body.panels,
    };
    Ok(Answer::ok(
        dashboards::update(
            &state.infra.store,
            &caller,
            &granted.org,
            (&id, version),
            input,
            rollup(&granted),
            Utc::now(),
        )
        .await?,
    ))
}

/// `DELETE /api/dashboards/{id}`.
pub(crate) async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<Deleted>, ApiError> {
    dashboards::delete(&state.infra.store, &caller, &granted.org, &id).await?;
    Ok(Answer::ok(Deleted::new(id)))
}

/// `POST /api/dashboards/{id}/clone`.
pub(crate) async fn clone(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    bytes: axum::body::Bytes,
) -> Result<Answer<Dashboard>, ApiError> {
    // The body may be left out.
    let body: DashboardCloneBody = if bytes.iter().all(u8::is_ascii_whitespace) {
        DashboardCloneBody::default()
    } else {
        serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::invalid_field("body", e.to_string()))?
    };
    let source = match body.source_org_id.as_deref() {
        None => granted.org.clone(),
        Some(org_id) => {
            dashboards::readable_org(
                &state.infra.store,
                &state.config,
                &state.replica.kept,
                &caller,
                org_id,
            )
            .await?
        }
    };
    let made = dashboards::clone(
        &state.infra.store,
        &caller,
        (&source, &id),
        &granted.org,
        body.title,
        rollup(&granted),
        Utc::now(),
    )
    .await?;
    Ok(Answer::created(made))
}

/// `GET /api/dashboards/{id}/data`.
pub(crate) async fn data(
    State(state): State<AppState>,
    granted: Granted,
    Path(id): Path<String>,
    Query(q): Query<DataQuery>,
) -> Result<Answer<DashboardData>, ApiError> {
    Ok(Answer::ok(
        dashboards::data(
            &state.infra.store,
            &state.config,
            &state.infra.reporting,
            &granted.org,
            &id,
            (q.from, q.to),
            Utc::now(),
        )
        .await?,
    ))
}
