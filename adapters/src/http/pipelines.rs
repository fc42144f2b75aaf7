//! `/pipelines`: the organization's pipelines and the pipeline registry.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use serde::Deserialize;
use serde_json::json;

use crate::http::error::ApiError;
use crate::http::extract::{Json, PageParams, Query, SortOrder};
use crate::http::gate::Granted;
use crate::http::response::{ok, paginated};
use crate::http::state::{AppState, Caller};
use crate::services::pipelines::{self, PipelineInput};
use crate::storage::PipelineFilter;

/// The fields a pipeline list sorts by.
pub(crate) const SORTABLE: [&str; 4] = ["createdAt", "updatedAt", "pipelineName", "project"];

/// The filters of the pipeline list and find.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PipelineQuery {
    project: Option<String>,
    organization: Option<String>,
    pipeline_name: Option<String>,
    access_modifier: Option<String>,
    #[serde(flatten)]
    page: PageParams,
}

impl PipelineQuery {
    fn filter(&self) -> Result<PipelineFilter, ApiError> {
        if self
            .access_modifier
            .as_deref()
            .is_some_and(|a| !["public", "private"].contains(&a))
        {
            return Err(ApiError::invalid_field(
                "accessModifier",
                "must be public or private",
            ));
        }
        let given = |v: &Option<String>| v.clone().filter(|s| !s.is_empty());
        Ok(PipelineFilter {
            project: given(&self.project),
            organization: given(&self.organization),
            pipeline_name: given(&self.pipeline_name),
            access_modifier: given(&self.access_modifier),
        })
    }
}

/// `GET /pipelines`.
pub(crate) async fn list(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<PipelineQuery>,
) -> Result<Response, ApiError> {
    let page = q.page.check(state.config.http.max_page_limit, &SORTABLE)?;
    let filter = q.filter()?;
    let order = (page.sort_by.as_str(), page.sort_order == SortOrder::Asc);
    let (items, total) = pipelines::list(
        &state,
        &granted.org,
        &filter,
        order,
        (page.limit, page.offset),
    )
    .await?;
    Ok(paginated("pipelines", items, total, &page))
}

/// `GET /pipelines/find`: the newest pipeline matching the filters (at least one).
pub(crate) async fn find(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<PipelineQuery>,
) -> Result<Response, ApiError> {
    let filter = q.filter()?;
    if filter.project.is_none() && filter.organization.is_none() && filter.pipeline_name.is_none() {
        return Err(ApiError::validation(
            "name at least one of project, organization, pipelineName",
        ));
    }
    let pipeline = pipelines::find(&state, &granted.org, &filter).await?;
    Ok(ok(StatusCode::OK, pipeline))
}

/// `GET /pipelines/:id`.
pub(crate) async fn get(
    State(state): State<AppState>,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let pipeline = pipelines::get(&state, &granted.org, &id).await?;
    Ok(ok(StatusCode::OK, pipeline))
}

/// `POST /pipelines` (`pipelines:write`): compliance and quota at the door.
pub(crate) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<PipelineInput>,
) -> Result<Response, ApiError> {
    let pipeline = pipelines::create(&state, &caller, &granted.org, body, Utc::now()).await?;
    Ok(ok(StatusCode::CREATED, pipeline))
}

/// `PUT /pipelines/:id` (`pipelines:write`): judged again like a create.
pub(crate) async fn update(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<PipelineInput>,
) -> Result<Response, ApiError> {
    let pipeline = pipelines::update(
        &state,
        &caller,
        (&granted.org, &granted.permissions),
        &id,
        body,
        Utc::now(),
    )
    .await?;
    Ok(ok(StatusCode::OK, pipeline))
}

/// `DELETE /pipelines/:id` (`pipelines:write`): frees its quota.
pub(crate) async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    pipelines::delete(
        &state,
        &caller,
        (&granted.org, &granted.permissions),
        &id,
        Utc::now(),
    )
    .await?;
    Ok(ok(StatusCode::OK, json!({"id": id, "deleted": true})))
}

/// `GET /pipelines/registry`.
pub(crate) async fn registry(
    State(state): State<AppState>,
    granted: Granted,
    Query(params): Query<PageParams>,
) -> Result<Response, ApiError> {
    let page = params.check(state.config.http.max_page_limit, &["createdAt"])?;
    let (items, total) = pipelines::registry(&state, &granted.org, page.limit, page.offset).await?;
    Ok(paginated("registry", items, total, &page))
}

/// A registry entry as the deploy hook posts it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Registration {
    arn: String,
    pipeline_id: String,
}

fn arn(value: &str) -> Result<&str, ApiError> {
    if value.trim().is_empty() || value.len() > 2048 || value.chars().any(char::is_control) {
        return Err(ApiError::invalid_field(
            "arn",
            "must be 1 to 2048 characters, without control characters",
        ));
    }
    Ok(value)
}

/// `POST /pipelines/registry` (`pipelines:write`): upsert; the pipeline must be the
/// organization's.
pub(crate) async fn register(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<Registration>,
) -> Result<Response, ApiError> {
    let entry = pipelines::register(
        &state,
        &caller,
        &granted.org,
        (arn(&body.arn)?, &body.pipeline_id),
        Utc::now(),
    )
    .await?;
    Ok(ok(StatusCode::OK, entry))
}

/// The query of `DELETE /pipelines/registry`.
#[derive(Debug, Deserialize)]
pub(crate) struct ArnQuery {
    arn: Option<String>,
}

/// `DELETE /pipelines/registry?arn=` (`pipelines:write`).
pub(crate) async fn deregister(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Query(q): Query<ArnQuery>,
) -> Result<Response, ApiError> {
    let arn = arn(q.arn.as_deref().unwrap_or_default())?;
    pipelines::deregister(&state, &caller, &granted.org, arn).await?;
    Ok(ok(StatusCode::OK, json!({"arn": arn, "deleted": true})))
}
