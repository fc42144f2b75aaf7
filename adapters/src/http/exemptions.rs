//! `/compliance/exemptions`: requests for a waiver of one rule for some entities, and
//! their review (the workflow is `services::exemptions`).

use axum::extract::{Path, State};

use chrono::{DateTime, Utc};
use compliance_core::{ExemptionAction, ExemptionStatus};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::http::error::ApiError;
use crate::http::extract::{Json, PageParams, Query};
use crate::http::gate::Granted;
use crate::http::organizations::text;
use crate::http::response::{Answer, Paged};
use crate::http::state::{AppState, Caller};
use crate::services::exemptions::{self, ExemptionRecord};

/// The most exemptions one bulk request may ask for.
pub const BULK_LIMIT: usize = 500;

/// An exemption as the API answers it.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Exemption {
    pub id: String,
    pub org_id: String,
    pub rule_id: String,
    pub entity_id: String,
    pub reason: String,
    pub status: ExemptionStatus,
    pub requested_by: String,
    pub reviewed_by: Option<String>,
    pub review_note: Option<String>,
    /// When it stops waiving; none: until revoked.
    pub expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

impl From<ExemptionRecord> for Exemption {
    fn from(e: ExemptionRecord) -> Self {
        Exemption {
            id: e.id,
            org_id: e.org_id,
            rule_id: e.rule_id,
            entity_id: e.entity_id,
            reason: e.reason,
            status: e.status,
            requested_by: e.requested_by,
            reviewed_by: e.reviewed_by,
            review_note: e.review_note,
            expires_at: e.expires_at,
            created_at: e.created_at,
        }
    }
}

/// A request to waive one rule for one entity.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ExemptionRequest {
    #[schema(max_length = 200)]
    rule_id: String,
    #[schema(min_length = 1, max_length = 200)]
    entity_id: String,
    #[schema(min_length = 1, max_length = 2000)]
    reason: String,
    expires_at: Option<DateTime<Utc>>,
}

/// A request to waive one rule for up to 500 entities.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct BulkExemptionRequest {
    #[schema(max_length = 200)]
    rule_id: String,
    #[schema(min_items = 1, max_items = 500)]
    entity_ids: Vec<String>,
    #[schema(min_length = 1, max_length = 2000)]
    reason: String,
    expires_at: Option<DateTime<Utc>>,
}

/// What a bulk request created.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ExemptionIds {
    pub ids: Vec<String>,
    pub count: u64,
}

/// A reviewer's decision (`approved` and `rejected` are accepted too).
#[derive(Debug, Clone, Copy, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Decision {
    #[serde(alias = "approved")]
    Approve,
    #[serde(alias = "rejected")]
    Reject,
}

/// A review of a requested exemption.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Review {
    decision: Decision,
    note: Option<String>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(crate) struct ExemptionQuery {
    #[param(value_type = Option<ExemptionStatus>, inline)]
    status: Option<String>,
    rule_id: Option<String>,
    entity_id: Option<String>,
    #[serde(flatten)]
    #[param(ignore)]
    page: PageParams,
}

/// `POST /compliance/exemptions`: request a waiver of one rule for one entity.
pub(crate) async fn request(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<ExemptionRequest>,
) -> Result<Answer<Exemption>, ApiError> {
    let request = exemptions::Request {
        rule_id: body.rule_id,
        entity_ids: vec![text("entityId", &body.entity_id, 200)?],
        reason: text("reason", &body.reason, 2000)?,
        expires_at: body.expires_at,
    };
    let stored = exemptions::request_one(
        &state.infra.store,
        &caller,
        &granted.org,
        request,
        Utc::now(),
    )
    .await?;
    Ok(Answer::created(stored.into()))
}

/// `POST /compliance/exemptions/bulk`: one rule, many entities, at most 500, all or nothing.
pub(crate) async fn request_bulk(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<BulkExemptionRequest>,
) -> Result<Answer<ExemptionIds>, ApiError> {
    if body.entity_ids.len() > BULK_LIMIT {
        return Err(ApiError::new(
            crate::code::ErrorCode::BulkLimitExceeded,
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
    let ids = exemptions::request(
        &state.infra.store,
        &caller,
        &granted.org,
        request,
        Utc::now(),
    )
    .await?;
    let count = ids.len() as u64;
    Ok(Answer::created(ExemptionIds { ids, count }))
}

/// `GET /compliance/exemptions`: filtered by status, rule and entity.
pub(crate) async fn list_exemptions(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<ExemptionQuery>,
) -> Result<Paged<Exemption>, ApiError> {
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
    let (items, total) = exemptions::list(
        &state.infra.store,
        &granted.org,
        filter,
        page.limit,
        page.offset,
    )
    .await?;
    let items = items.into_iter().map(Exemption::from).collect();
    Ok(Paged::new("exemptions", items, total, page))
}

/// `PUT /compliance/exemptions/:id/review` (`compliance:review`): approve or reject;
/// the requester may not review their own request.
pub(crate) async fn review(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
    Json(body): Json<Review>,
) -> Result<Answer<Exemption>, ApiError> {
    let action = match body.decision {
        Decision::Approve => ExemptionAction::Approve,
        Decision::Reject => ExemptionAction::Reject,
    };
    let decided = exemptions::decide(
        &state.infra.store,
        &caller,
        &granted.org,
        &id,
        action,
        body.note.as_deref(),
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(decided.into()))
}

/// `DELETE /compliance/exemptions/:id`: revoke.
pub(crate) async fn revoke(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(id): Path<String>,
) -> Result<Answer<Exemption>, ApiError> {
    let decided = exemptions::decide(
        &state.infra.store,
        &caller,
        &granted.org,
        &id,
        ExemptionAction::Revoke,
        None,
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(decided.into()))
}
