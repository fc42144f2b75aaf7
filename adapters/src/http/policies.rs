//! `/compliance/policies`: named groups of an organization's rules.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use serde::Deserialize;
use serde_json::json;
use tenancy::Permission;

use crate::error::ApiError;
use crate::http::extract::{Json, PageParams, Query};
use crate::http::organizations::text;
use crate::http::response::{ok, paginated};
use crate::http::rules::tenant;
use crate::http::state::{event, AppState, Caller};

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
    Json(body): Json<PolicyBody>,
) -> Result<Response, ApiError> {
    let granted = tenant(
        &state,
        &caller,
        Permission::ComplianceWrite,
        true,
        "POST /compliance/policies",
    )
    .await?;
    let name = text("name", body.name.as_deref().unwrap_or_default(), 200)?;
    let is_template = body.is_template.unwrap_or(false);
    if is_template && !granted.org.is_system {
        return Err(ApiError::forbidden(
            "only the system organization owns template policies",
        ));
    }
    let rule_ids = body.rule_ids.unwrap_or_default();
    let audit = |policy_id: &str| {
        vec![event(
            &caller,
            "compliance.policy.create",
            &granted.org.id,
            "policy",
            policy_id,
            json!({"name": name}),
        )]
    };
    let policy = state
        .store
        .create_policy(
            &granted.org.id,
            (&name, body.description.as_deref()),
            &rule_ids,
            is_template,
            Utc::now(),
            &audit,
        )
        .await?;

    Ok(ok(StatusCode::CREATED, policy))
}

/// `GET /compliance/policies`.
pub(crate) async fn list_policies(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<PolicyQuery>,
) -> Result<Response, ApiError> {
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    let granted = tenant(
        &state,
        &caller,
        Permission::ComplianceRead,
        false,
        "GET /compliance/policies",
    )
    .await?;
    let (items, total) = state
        .store
        .policies(
            &granted.org.id,
            q.name.as_deref(),
            None,
            page.limit,
            page.offset,
        )
        .await?;
    Ok(paginated("policies", items, total, &page))
}

/// `GET /compliance/policies/:id`.
pub(crate) async fn get_policy(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let granted = tenant(
        &state,
        &caller,
        Permission::ComplianceRead,
        false,
        "GET /compliance/policies/:id",
    )
    .await?;
    let policy = state
        .store
        .policy(&granted.org.id, &id)
        .await?
        .ok_or_else(|| ApiError::not_found("policy"))?;
    Ok(ok(StatusCode::OK, policy))
}

/// `PUT /compliance/policies/:id`.
pub(crate) async fn update_policy(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Json(body): Json<PolicyBody>,
) -> Result<Response, ApiError> {
    let granted = tenant(
        &state,
        &caller,
        Permission::ComplianceWrite,
        true,
        "PUT /compliance/policies/:id",
    )
    .await?;
    let name = body
        .name
        .as_deref()
        .map(|n| text("name", n, 200))
        .transpose()?;
    let audit = [event(
        &caller,
        "compliance.policy.update",
        &granted.org.id,
        "policy",
        &id,
        json!({}),
    )];
    let policy = state
        .store
        .update_policy(
            &granted.org.id,
            &id,
            (
                name.as_deref(),
                body.description.as_deref(),
                body.rule_ids.as_deref(),
            ),
            Utc::now(),
            &audit,
        )
        .await?;

    Ok(ok(StatusCode::OK, policy))
}

/// `DELETE /compliance/policies/:id`.
pub(crate) async fn delete_policy(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let granted = tenant(
        &state,
        &caller,
        Permission::ComplianceWrite,
        true,
        "DELETE /compliance/policies/:id",
    )
    .await?;
    let audit = [event(
        &caller,
        "compliance.policy.delete",
        &granted.org.id,
        "policy",
        &id,
        json!({}),
    )];
    state
        .store
        .delete_policy(&granted.org.id, &id, &audit)
        .await?;

    Ok(ok(StatusCode::OK, json!({"id": id, "deleted": true})))
}
