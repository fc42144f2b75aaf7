//! `/compliance/policies`: named groups of an organization's rules.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use serde::Deserialize;
use serde_json::json;

use crate::http::error::ApiError;
use crate::http::extract::{Json, PageParams, Query};
use crate::http::gate::Granted;
use crate::http::organizations::text;
use crate::http::response::{ok, paginated};
use crate::http::state::{AppState, Caller};
use crate::services::policies;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PolicyBody {
    name: Option<String>,
    description: Option<String>,
    rule_ids: Option<Vec<String>>,
    is_template: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PolicyQuery {
    name: Option<String>,
    #[serde(flatten)]
    page: PageParams,
}

/// `POST /compliance/policies`.
pub(crate) async fn create_policy(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<PolicyBody>,
) -> Result<Response, ApiError> {
    let name = text("name", body.name.as_deref().unwrap_or_default(), 200)?;
    let fields = policies::Fields {
        name: Some(&name),
        description: body.description.as_deref(),
        rule_ids: body.rule_ids.as_deref(),
    };
    let policy = policies::create(
        &state.store,
        &caller,
        &granted.org,
        fields,
        body.is_template.unwrap_or(false),
        Utc::now(),
    )
    .await?;
    Ok(ok(StatusCode::CREATED, policy))
}

/// `GET /compliance/policies`.
pub(crate) async fn list_policies(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<PolicyQuery>,
) -> Result<Response, ApiError> {
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    let (items, total) = policies::list(
        &state.store,
        &granted.org,
        q.name.as_deref(),
        page.limit,
        page.offset,
    )
    .await?;
    Ok(paginated("policies", items, total, &page))
}

/// `GET /compliance/policies/:id`.
pub(crate) async fn get_policy(
    State(state): State<AppState>,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let policy = policies::get(&state.store, &granted.org, &id).await?;
    Ok(ok(StatusCode::OK, policy))
}

/// `PUT /compliance/policies/:id`.
pub(crate) async fn update_policy(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<PolicyBody>,
) -> Result<Response, ApiError> {
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
    let policy =
        policies::update(&state.store, &caller, &granted.org, &id, fields, Utc::now()).await?;
    Ok(ok(StatusCode::OK, policy))
}

/// `DELETE /compliance/policies/:id`.
pub(crate) async fn delete_policy(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    policies::delete(&state.store, &caller, &granted.org, &id).await?;
    Ok(ok(StatusCode::OK, json!({"id": id, "deleted": true})))
}
