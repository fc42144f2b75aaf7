//! `/compliance/rules`: an organization's rules, validated by compliance-core.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use compliance_core::Rule;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::http::error::ApiError;
use crate::http::extract::{Json, PageParams, Query, SortOrder};
use crate::http::gate::Granted;
use crate::http::response::{ok, paginated};
use crate::http::state::{AppState, Caller};
use crate::services::rules;
use crate::storage::RuleFilter;

/// Parses a rule body in the API's form; the server owns `id` and `version`.
pub(crate) fn parse_rule(body: Value) -> Result<Rule, ApiError> {
    if !body.is_object() {
        return Err(ApiError::validation("the rule must be a JSON object"));
    }
    serde_json::from_value::<Rule>(body).map_err(|e| {
        ApiError::validation(format!("invalid rule: {e}"))
            .with_details(json!({"problems": [{"field": "body", "message": e.to_string()}]}))
    })
}

/// Query filters of the rule lists.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RuleQuery {
    target: Option<String>,
    severity: Option<String>,
    scope: Option<String>,
    tag: Option<String>,
    name: Option<String>,
    include_deleted: Option<bool>,
    #[serde(flatten)]
    page: PageParams,
}

impl RuleQuery {
    pub(crate) fn filter(&self) -> Result<RuleFilter, ApiError> {
        let check = |field: &str, value: &Option<String>, allowed: &[&str]| match value {
            Some(v) if !allowed.contains(&v.as_str()) => Err(ApiError::invalid_field(
                field,
                format!("must be one of {}", allowed.join(", ")),
            )),
            _ => Ok(()),
        };
        check("target", &self.target, &["plugin", "pipeline"])?;
        check(
            "severity",
            &self.severity,
            &["warning", "error", "critical"],
        )?;
        check("scope", &self.scope, &["org", "published"])?;
        Ok(RuleFilter {
            target: self.target.clone(),
            severity: self.severity.clone(),
            scope: self.scope.clone(),
            tag: self.tag.clone(),
            name: self.name.clone(),
            is_template: None,
            include_deleted: self.include_deleted.unwrap_or(false),
        })
    }

    pub(crate) fn page(&self) -> &PageParams {
        &self.page
    }
}

/// `GET /compliance/rules`.
pub(crate) async fn list(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<RuleQuery>,
) -> Result<Response, ApiError> {
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    let filter = q.filter()?;
    let ascending = page.sort_order == SortOrder::Asc;
    let (rules, total) = rules::list(
        &state,
        &granted.org,
        &filter,
        (page.limit, page.offset, ascending),
    )
    .await?;
    Ok(paginated("rules", rules, total, &page))
}

/// `GET /compliance/rules/:id`.
pub(crate) async fn get(
    State(state): State<AppState>,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let rule = rules::get(&state, &granted.org, &id, true).await?;
    Ok(ok(StatusCode::OK, rule))
}

/// `GET /compliance/rules/:id/history`: every version, oldest first.
pub(crate) async fn history(
    State(state): State<AppState>,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let history = rules::history(&state, &granted.org, &id).await?;
    Ok(ok(StatusCode::OK, history))
}

/// `POST /compliance/rules`: scope defaults to org.
pub(crate) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<Value>,
) -> Result<Response, ApiError> {
    let rule = parse_rule(body)?;
    let stored = rules::create(&state, &caller, &granted.org, rule, Utc::now()).await?;
    Ok(ok(StatusCode::CREATED, stored))
}

/// `PUT /compliance/rules/:id`: replaces the rule's fields; its version goes up by one.
pub(crate) async fn update(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<Value>,
) -> Result<Response, ApiError> {
    let rule = parse_rule(body)?;
    let stored = rules::update(&state, &caller, &granted.org, &id, rule, Utc::now()).await?;
    Ok(ok(StatusCode::OK, stored))
}

/// `DELETE /compliance/rules/:id`: a soft delete; the rule is no longer evaluated.
pub(crate) async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    rules::delete(&state, &caller, &granted.org, &id, Utc::now()).await?;
    Ok(ok(StatusCode::OK, json!({"id": id, "deleted": true})))
}
