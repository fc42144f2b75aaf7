//! `/compliance/policies`: named groups of an organization's rules.

use axum::extract::{Path, State};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::http::error::ApiError;
use crate::http::extract::{Json, PageParams, Query};
use crate::http::gate::Granted;
use crate::http::organizations::text;
use crate::http::response::{Answer, Deleted, Paged};
use crate::http::state::{AppState, Caller};
use crate::services::policies::{self, PolicyRecord};

/// A policy as the API answers it: a named set of the organization's rules.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    pub id: String,
    pub org_id: String,
    pub name: String,
    pub description: Option<String>,
    pub rule_ids: Vec<String>,
    pub is_template: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<PolicyRecord> for Policy {
    fn from(p: PolicyRecord) -> Self {
        Policy {
            id: p.id,
            org_id: p.org_id,
            name: p.name,
            description: p.description,
            rule_ids: p.rule_ids,
            is_template: p.is_template,
            created_at: p.created_at,
            updated_at: p.updated_at,
        }
    }
}

/// A policy's fields: a create needs `name`; an update changes what it names.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PolicyBody {
    #[schema(max_length = 200)]
    name: Option<String>,
    description: Option<String>,
    rule_ids: Option<Vec<String>>,
    /// A template of the system organization (create only).
    is_template: Option<bool>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(crate) struct PolicyQuery {
    name: Option<String>,
    #[serde(flatten)]
    #[param(ignore)]
    page: PageParams,
}

/// `POST /compliance/policies`.
pub(crate) async fn create_policy(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<PolicyBody>,
) -> Result<Answer<Policy>, ApiError> {
    let name = text("name", body.name.as_deref().unwrap_or_default(), 200)?;
    let fields = policies::Fields {
        name: Some(&name),
        description: body.description.as_deref(),
        rule_ids: body.rule_ids.as_deref(),
    };
    let policy = policies::create(
        &state.infra.store,
        &caller,
        &granted.org,
        fields,
        body.is_template.unwrap_or(false),
        Utc::now(),
    )
    .await?;
    Ok(Answer::created(policy.into()))
}

/// `GET /compliance/policies`.
pub(crate) async fn list_policies(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<PolicyQuery>,
) -> Result<Paged<Policy>, ApiError> {
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    let (items, total) = policies::list(
        &state.infra.store,
        &granted.org,
        q.name.as_deref(),
        page.limit,
        page.offset,
    )
    .await?;
    let items = items.into_iter().map(Policy::from).collect();
    Ok(Paged::new("policies", items, total, page))
}

/// `GET /compliance/policies/:id`.
pub(crate) async fn get_policy(
    State(state): State<AppState>,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<Policy>, ApiError> {
    let policy = policies::get(&state.infra.store, &granted.org, &id).await?;
    Ok(Answer::ok(policy.into()))
}

/// `PUT /compliance/policies/:id`.
pub(crate) async fn update_policy(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<PolicyBody>,
) -> Result<Answer<Policy>, ApiError> {
    let name = body
        .name
        .as_deref()
        .map(|n| text("name", n, 200))
        .transpose()?;
    let fields = policies::Fields {
        name: name.as_deref(),
        description: body.description.as_deref(),
        rule_ids: body.rule_ids.as_deref(),
    };
    let policy = policies::update(
        &state.infra.store,
        &caller,
        &granted.org,
        &id,
        fields,
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(policy.into()))
}

/// `DELETE /compliance/policies/:id`.
pub(crate) async fn delete_policy(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<Deleted>, ApiError> {
    policies::delete(&state.infra.store, &caller, &granted.org, &id).await?;
    Ok(Answer::ok(Deleted::new(id)))
}
