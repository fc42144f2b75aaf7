//! `/compliance/exemptions`: requests for a waiver of one rule for some entities, and
//! their review (the workflow is `services::exemptions`).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use compliance_core::ExemptionAction;
use serde::Deserialize;
use serde_json::json;

use crate::http::error::ApiError;
use crate::http::extract::{Json, PageParams, Query};
use crate::http::gate::Granted;
use crate::http::organizations::text;
use crate::http::response::{ok, paginated};
use crate::http::state::{AppState, Caller};
use crate::services::exemptions;

/// The most exemptions one bulk request may ask for.
pub const BULK_LIMIT: usize = 500;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ExemptionRequest {
    rule_id: String,
    entity_id: String,
    reason: String,
    expires_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct BulkExemptionRequest {
    rule_id: String,
    entity_ids: Vec<String>,
    reason: String,
    expires_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Review {
    decision: String,
    note: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ExemptionQuery {
    status: Option<String>,
    rule_id: Option<String>,
    entity_id: Option<String>,
    #[serde(flatten)]
    page: PageParams,
}

/// `POST /compliance/exemptions`: request a waiver of one rule for one entity.
pub(crate) async fn request(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<ExemptionRequest>,
) -> Result<Response, ApiError> {
    let request = exemptions::Request {
        rule_id: body.rule_id,
        entity_ids: vec![text("entityId", &body.entity_id, 200)?],
        reason: text("reason", &body.reason, 2000)?,
        expires_at: body.expires_at,
    };
    let stored =
        exemptions::request_one(&state.store, &caller, &granted.org, request, Utc::now()).await?;
    Ok(ok(StatusCode::CREATED, stored))
}

/// `POST /compliance/exemptions/bulk`: one rule, many entities, at most 500, all or nothing.
pub(crate) async fn request_bulk(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<BulkExemptionRequest>,
) -> Result<Response, ApiError> {
    if body.entity_ids.len() > BULK_LIMIT {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "BULK_LIMIT_EXCEEDED",
            format!(
                "at most {BULK_LIMIT} exemptions per call, got {}",
                body.entity_ids.len()
            ),
        )
        .with_details(json!({"max": BULK_LIMIT, "actual": body.entity_ids.len()})));
    }
    if body.entity_ids.is_empty() {
        return Err(ApiError::invalid_field(
            "entityIds",
            "must list at least one entity",
        ));
    }
    let entity_ids = body
        .entity_ids
        .iter()
        .map(|entity| text("entityIds", entity, 200))
        .collect::<Result<Vec<_>, ApiError>>()?;
    let request = exemptions::Request {
        rule_id: body.rule_id,
        entity_ids,
        reason: text("reason", &body.reason, 2000)?,
        expires_at: body.expires_at,
    };
    let ids = exemptions::request(&state.store, &caller, &granted.org, request, Utc::now()).await?;
    Ok(ok(
        StatusCode::CREATED,
        json!({"ids": ids, "count": ids.len()}),
    ))
}

/// `GET /compliance/exemptions`: filtered by status, rule and entity.
pub(crate) async fn list_exemptions(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<ExemptionQuery>,
) -> Result<Response, ApiError> {
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    if let Some(status) = &q.status {
        if !["requested", "approved", "rejected", "revoked"].contains(&status.as_str()) {
            return Err(ApiError::invalid_field(
                "status",
                "must be requested, approved, rejected or revoked",
            ));
        }
    }
    let filter = exemptions::Filter {
        status: q.status.as_deref(),
        rule_id: q.rule_id.as_deref(),
        entity_id: q.entity_id.as_deref(),
    };
    let (items, total) =
        exemptions::list(&state.store, &granted.org, filter, page.limit, page.offset).await?;
    Ok(paginated("exemptions", items, total, &page))
}

/// `PUT /compliance/exemptions/:id/review` (`compliance:review`): approve or reject;
/// the requester may not review their own request.
pub(crate) async fn review(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<Review>,
) -> Result<Response, ApiError> {
    let action = match body.decision.as_str() {
        "approve" | "approved" => ExemptionAction::Approve,
        "reject" | "rejected" => ExemptionAction::Reject,
        _ => {
            return Err(ApiError::invalid_field(
                "decision",
                "must be approve or reject",
            ))
        }
    };
    let decided = exemptions::decide(
        &state.store,
        &caller,
        &granted.org,
        &id,
        action,
        body.note.as_deref(),
        Utc::now(),
    )
    .await?;
    Ok(ok(StatusCode::OK, decided))
}

/// `DELETE /compliance/exemptions/:id`: revoke.
pub(crate) async fn revoke(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let decided = exemptions::decide(
        &state.store,
        &caller,
        &granted.org,
        &id,
        ExemptionAction::Revoke,
        None,
        Utc::now(),
    )
    .await?;
    Ok(ok(StatusCode::OK, decided))
}
