//! `/pipelines`: the organization's pipelines and the pipeline registry.

use axum::extract::{Path, State};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::http::error::ApiError;
use crate::http::extract::{Json, PageParams, Query, SortOrder};
use crate::http::gate::Granted;
use crate::http::response::{Answer, Deleted, Paged};
use crate::http::state::{AppState, Caller};
use crate::inventory::{AccessModifier, Arn, EntityCompliance, Name};
use crate::services::pipelines::{
    self, PipelineFilter, PipelineInput, PipelineRecord, RegistryEntry,
};

/// A pipeline as the API answers it.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Pipeline {
    pub id: String,
    pub org_id: String,
    pub project: String,
    pub organization: String,
    pub pipeline_name: String,
    pub access_modifier: AccessModifier,
    /// The pipeline's properties, as stored (checked as `PipelineProps` when saved).
    #[schema(value_type = crate::services::pipelines::PipelineProps)]
    pub props: Value,
    pub compliance: EntityCompliance,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<PipelineRecord> for Pipeline {
    fn from(p: PipelineRecord) -> Self {
        Pipeline {
            id: p.id,
            org_id: p.org_id,
            project: p.project,
            organization: p.organization,
            pipeline_name: p.pipeline_name,
            access_modifier: p.access_modifier,
            props: p.props,
            compliance: p.compliance,
            created_by: p.created_by,
            created_at: p.created_at,
            updated_at: p.updated_at,
        }
    }
}

/// A registry entry: a cloud pipeline resource name mapped to a pipeline.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Registration {
    pub arn: String,
    pub pipeline_id: String,
    pub org_id: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<RegistryEntry> for Registration {
    fn from(e: RegistryEntry) -> Self {
        Registration {
            arn: e.arn,
            pipeline_id: e.pipeline_id,
            org_id: e.org_id,
            created_at: e.created_at,
            updated_at: e.updated_at,
        }
    }
}

/// A registry entry as the deploy hook posts it.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RegistrationBody {
    arn: Arn,
    pipeline_id: Name,
    /// Move a resource name another organization holds to this one (super-admins
    /// only; audited in both organizations). Without it, a name held elsewhere is
    /// 409: the first registrant keeps it.
    #[serde(default)]
    take_over: bool,
}

/// The fields a pipeline list sorts by.
pub(crate) const SORTABLE: [&str; 4] = ["createdAt", "updatedAt", "pipelineName", "project"];

/// The filters of the pipeline list and find.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(crate) struct PipelineQuery {
    project: Option<String>,
    organization: Option<String>,
    pipeline_name: Option<String>,
    #[param(value_type = Option<AccessModifier>, inline)]
    access_modifier: Option<String>,
    #[serde(flatten)]
    #[param(ignore)]
    page: PageParams,
}

impl PipelineQuery {
    fn filter(&self) -> Result<PipelineFilter, ApiError> {
        if self
            .access_modifier
            .as_deref()
            .is_some_and(|a| AccessModifier::parse(a).is_none())
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
) -> Result<Paged<Pipeline>, ApiError> {
    let page = q.page.check(state.config.http.max_page_limit, &SORTABLE)?;
    let filter = q.filter()?;
    let order = (page.sort_by.as_str(), page.sort_order == SortOrder::Asc);
    let (items, total) = pipelines::list(
        &state.infra.store,
        &granted.org,
        &filter,
        order,
        (page.limit, page.offset),
    )
    .await?;
    let items = items.into_iter().map(Pipeline::from).collect();
    Ok(Paged::new("pipelines", items, total, page))
}

/// `GET /pipelines/find`: the newest pipeline matching the filters (at least one).
pub(crate) async fn find(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<PipelineQuery>,
) -> Result<Answer<Pipeline>, ApiError> {
    let filter = q.filter()?;
    if filter.project.is_none() && filter.organization.is_none() && filter.pipeline_name.is_none() {
        return Err(ApiError::validation(
            "name at least one of project, organization, pipelineName",
        ));
    }
    let pipeline = pipelines::find(&state.infra.store, &granted.org, &filter).await?;
    Ok(Answer::ok(pipeline.into()))
}

/// `GET /pipelines/:id`.
pub(crate) async fn get(
    State(state): State<AppState>,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<Pipeline>, ApiError> {
    let pipeline = pipelines::get(&state.infra.store, &granted.org, &id).await?;
    Ok(Answer::ok(pipeline.into()))
}

/// `POST /pipelines` (`pipelines:write`): compliance and quota at the door.
pub(crate) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<PipelineInput>,
) -> Result<Answer<Pipeline>, ApiError> {
    let pipeline = pipelines::create(&state, &caller, &granted.org, body, Utc::now()).await?;
    Ok(Answer::created(pipeline.into()))
}

/// `PUT /pipelines/:id` (`pipelines:write`): judged again like a create.
pub(crate) async fn update(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<PipelineInput>,
) -> Result<Answer<Pipeline>, ApiError> {
    let pipeline = pipelines::update(
        &state,
        &caller,
        (&granted.org, &granted.permissions),
        &id,
        body,
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(pipeline.into()))
}

/// `DELETE /pipelines/:id` (`pipelines:write`): frees its quota.
pub(crate) async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<Deleted>, ApiError> {
    pipelines::delete(
        &state.infra.store,
        &caller,
        (&granted.org, &granted.permissions),
        &id,
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(Deleted::new(id)))
}

/// `GET /pipelines/registry`.
pub(crate) async fn registry(
    State(state): State<AppState>,
    granted: Granted,
    Query(params): Query<PageParams>,
) -> Result<Paged<Registration>, ApiError> {
    let page = params.check(state.config.http.max_page_limit, &["createdAt"])?;
    let (items, total) =
        pipelines::registry(&state.infra.store, &granted.org, page.limit, page.offset).await?;
    let items = items.into_iter().map(Registration::from).collect();
    Ok(Paged::new("registry", items, total, page))
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
    Json(body): Json<RegistrationBody>,
) -> Result<Answer<Registration>, ApiError> {
    let entry = pipelines::register(
        &state.infra.store,
        &caller,
        (&granted.org, granted.super_admin),
        (body.arn.as_str(), body.pipeline_id.as_str(), body.take_over),
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(entry.into()))
}

/// The query of `DELETE /pipelines/registry`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ArnQuery {
    #[param(required = true, min_length = 1, max_length = 2048)]
    arn: Option<String>,
}

/// `DELETE /pipelines/registry?arn=` (`pipelines:write`).
pub(crate) async fn deregister(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Query(q): Query<ArnQuery>,
) -> Result<Answer<Deregistered>, ApiError> {
    let arn = arn(q.arn.as_deref().unwrap_or_default())?;
    pipelines::deregister(&state.infra.store, &caller, &granted.org, arn).await?;
    Ok(Answer::ok(Deregistered {
        arn: arn.to_string(),
        deleted: true,
    }))
}

/// `{arn, deleted: true}`.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Deregistered {
    pub arn: String,
    pub deleted: bool,
}
