//! `/quotas` (document 2, "Quota service"): the caller's quotas, every
//! organization's, those at risk, one organization's or one type, a system admin's
//! tier and limits, resets, and other services' increments.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use chrono::Utc;
use entitlements::{Dimension, Limit, Tier};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::http::error::ApiError;
use crate::http::extract::{Json, PageParams, Query, RawBody};
use crate::http::gate::Granted;
use crate::http::response::{ok, paginated};
use crate::http::state::{AppState, Caller, ServiceCaller};
use crate::services::quotas::{self, Increment};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RiskQuery {
    threshold: Option<String>,
    #[serde(flatten)]
    page: PageParams,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct UpdateBody {
    tier: Option<String>,
    limits: Option<Map<String, Value>>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ResetBody {
    #[serde(rename = "type")]
    dimension: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct IncrementBody {
    #[serde(rename = "type")]
    dimension: String,
    amount: i64,
}

/// `GET /quotas` (the `x-org-id` organization) and `GET /quotas/:orgId` (its own, a
/// managed team, or a system admin): the organization's quotas.
pub(crate) async fn of(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Response, ApiError> {
    Ok(ok(
        StatusCode::OK,
        quotas::of(&state, &granted.org, Utc::now()).await?,
    ))
}

/// `GET /quotas/all` (system admin): a page of every organization's quotas.
pub(crate) async fn all(
    State(state): State<AppState>,
    Query(page): Query<PageParams>,
) -> Result<Response, ApiError> {
    let page = page.check(state.config.http.max_page_limit, &["createdAt"])?;
    let (items, total) = quotas::all(&state, (page.limit, page.offset), Utc::now()).await?;
    Ok(paginated("quotas", items, total, &page))
}

/// `GET /quotas/at-risk?threshold=` (system admin): account roots at or above the
/// threshold percent (default 80) on any quota type.
pub(crate) async fn at_risk(
    State(state): State<AppState>,
    Query(q): Query<RiskQuery>,
) -> Result<Response, ApiError> {
    let page = q
        .page
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    let threshold = match q.threshold.as_deref() {
        None => 80.0,
        Some(text) => text
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|t| t.is_finite())
            .ok_or_else(|| {
                ApiError::invalid_field("threshold", "must be a number (a percentage)")
            })?,
    };
    let (items, total) =
        quotas::at_risk(&state, threshold, (page.limit, page.offset), Utc::now()).await?;
    Ok(paginated("quotas", items, total, &page))
}

/// `GET /quotas/:orgId/:type`.
pub(crate) async fn one_type(
    State(state): State<AppState>,
    granted: Granted,
    Path((_, name)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    Ok(ok(
        StatusCode::OK,
        quotas::one(&state, &granted.org, &name, Utc::now()).await?,
    ))
}

/// `PUT /quotas/:orgId` (system admin): the account's tier and limit overrides.
pub(crate) async fn update(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<UpdateBody>,
) -> Result<Response, ApiError> {
    let tier = body
        .tier
        .as_deref()
        .map(|t| {
            Tier::parse(t).ok_or_else(|| {
                ApiError::invalid_field("tier", "must be developer, pro, team or enterprise")
            })
        })
        .transpose()?;
    let mut limits = Vec::new();
    for (name, value) in body.limits.unwrap_or_default() {
        let dimension = Dimension::from_name(&name)
            .filter(|d| d.is_quota_type())
            .ok_or_else(|| {
                ApiError::invalid_field("limits", format!("`{name}` is not a quota type"))
            })?;
        let limit = match value {
            Value::Null => None,
            Value::Number(n) => Some(n.as_i64().and_then(Limit::from_wire).ok_or_else(|| {
                ApiError::invalid_field(
                    "limits",
                    format!("`{name}` must be -1 (unlimited), a non-negative integer or null"),
                )
            })?),
            _ => {
                return Err(ApiError::invalid_field(
                    "limits",
                    format!("`{name}` must be -1 (unlimited), a non-negative integer or null"),
                ))
            }
        };
        limits.push((dimension, limit));
    }
    if tier.is_none() && limits.is_empty() {
        return Err(ApiError::validation("give `tier`, `limits` or both"));
    }
    let record =
        quotas::update(&state, &caller, &granted.org.id, (tier, limits), Utc::now()).await?;
    Ok(ok(StatusCode::OK, record))
}

/// `POST /quotas/:orgId/reset` (system admin): monthly usage back to zero.
pub(crate) async fn reset(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    RawBody(bytes): RawBody,
) -> Result<Response, ApiError> {
    let body: ResetBody = if bytes.iter().all(u8::is_ascii_whitespace) {
        ResetBody::default()
    } else {
        serde_json::from_slice(&bytes).map_err(|e| ApiError::validation(e.to_string()))?
    };
    let record = quotas::reset(
        &state,
        &caller,
        &granted.org.id,
        body.dimension.as_deref(),
        Utc::now(),
    )
    .await?;
    Ok(ok(StatusCode::OK, record))
}

/// `POST /quotas/:orgId/increment` (service tokens): one atomic check-and-increment
/// of the account's pool; an `Idempotency-Key` makes a retry count once.
pub(crate) async fn increment(
    State(state): State<AppState>,
    service: ServiceCaller,
    Path(org_id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<IncrementBody>,
) -> Result<Response, ApiError> {
    let key = crate::http::extract::idempotency_key(&headers)?;
    let amount = u64::try_from(body.amount)
        .map_err(|_| ApiError::invalid_field("amount", "must be between 1 and 1000"))?;
    let status = quotas::increment(
        &state,
        &service.service,
        &org_id,
        Increment {
            dimension: body.dimension,
            amount,
            key,
        },
        Utc::now(),
    )
    .await?;
    Ok(ok(StatusCode::OK, status))
}
