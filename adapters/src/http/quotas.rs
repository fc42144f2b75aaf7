//! `/quotas` (document 2, "Quota service"): the caller's quotas, every
//! organization's, those at risk, one organization's or one type, a system admin's
//! tier and limits, resets, and other services' increments.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use chrono::{DateTime, Utc};
use entitlements::{Dimension, Limit, Tier};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::http::error::ApiError;
use crate::http::extract::{Json, PageParams, Query, RawBody};
use crate::http::gate::Granted;
use crate::http::response::{Answer, Paged};
use crate::http::state::{AppState, Caller, ServiceCaller};
use crate::services::quotas::{self, Increment};

/// The schema of a quota type's name: the dimensions the quota service tracks
/// (entitlements' [`Dimension::is_quota_type`]; seats go to the platform).
pub(crate) struct QuotaType;

impl utoipa::PartialSchema for QuotaType {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        names(|d| d.is_quota_type())
    }
}

impl utoipa::ToSchema for QuotaType {}

/// The schema of a type services count by increments (not from the inventory).
pub(crate) struct CountedType;

impl utoipa::PartialSchema for CountedType {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        names(|d| d.is_quota_type() && !d.is_inventory())
    }
}

impl utoipa::ToSchema for CountedType {}

/// A string schema listing the names of the dimensions `keep` keeps.
fn names(keep: fn(&Dimension) -> bool) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    let names: Vec<&'static str> = Dimension::ALL
        .into_iter()
        .filter(keep)
        .map(|d| d.name())
        .collect();
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(names))
        .into()
}

/// One quota type of one organization.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct QuotaStatus {
    #[serde(rename = "type")]
    #[schema(value_type = QuotaType)]
    dimension: Dimension,
    /// The account's limit (-1 unlimited).
    #[schema(minimum = -1)]
    pub(crate) limit: i64,
    /// Used by the whole account (the root and its teams): what the limit bounds.
    pub(crate) used: u64,
    /// Used by this organization itself.
    own_used: u64,
    /// What is left (-1 unlimited).
    #[schema(minimum = -1)]
    remaining: i64,
    /// `used` as a percentage of the limit (none: unlimited; a zero limit is 100).
    percent: Option<f64>,
    /// When a monthly type starts again from zero.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reset_at: Option<DateTime<Utc>>,
}

impl From<quotas::QuotaStatus> for QuotaStatus {
    fn from(q: quotas::QuotaStatus) -> Self {
        QuotaStatus {
            dimension: q.dimension,
            limit: q.limit,
            used: q.used,
            own_used: q.own_used,
            remaining: q.remaining,
            percent: q.percent,
            reset_at: q.reset_at,
        }
    }
}

/// One organization's quotas.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct OrgQuotas {
    org_id: String,
    /// The account root whose pool it draws from.
    root_org_id: String,
    pub(crate) tier: Tier,
    /// One entry per quota type, by its name.
    pub(crate) quotas: BTreeMap<String, QuotaStatus>,
}

impl From<quotas::OrgQuotas> for OrgQuotas {
    fn from(q: quotas::OrgQuotas) -> Self {
        OrgQuotas {
            org_id: q.org_id,
            root_org_id: q.root_org_id,
            tier: q.tier,
            quotas: q
                .quotas
                .into_iter()
                .map(|(name, status)| (name.to_owned(), status.into()))
                .collect(),
        }
    }
}

fn page_of(items: Vec<quotas::OrgQuotas>) -> Vec<OrgQuotas> {
    items.into_iter().map(OrgQuotas::from).collect()
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(crate) struct RiskQuery {
    #[param(value_type = Option<f64>, minimum = 0)]
    threshold: Option<String>,
    #[serde(flatten)]
    #[param(ignore)]
    page: PageParams,
}

/// Limit overrides by quota type: -1 unlimited, `null` back to the entitlement's.
///
/// The schema of the `limits` object; the handler reads it by name, so that each
/// type's error names it.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(dead_code)]
pub(crate) struct LimitOverrides {
    plugins: Option<Limit>,
    pipelines: Option<Limit>,
    api_calls: Option<Limit>,
    ai_calls: Option<Limit>,
    storage: Option<Limit>,
}

/// An account root's tier and limit overrides (at least one of the two).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct QuotaUpdate {
    tier: Option<Tier>,
    /// Read by quota type, each named in the error it makes.
    #[schema(value_type = Option<LimitOverrides>)]
    limits: Option<Map<String, Value>>,
}

/// Which monthly counter to reset (all of them when left out).
#[derive(Debug, Deserialize, Default, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct QuotaReset {
    #[serde(rename = "type")]
    #[schema(value_type = Option<CountedType>)]
    dimension: Option<String>,
}

/// An increment of one counted type.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct QuotaIncrement {
    #[serde(rename = "type")]
    #[schema(value_type = CountedType)]
    dimension: String,
    #[schema(minimum = 1, maximum = 1000)]
    amount: i64,
}

/// `GET /quotas` (the `x-org-id` organization) and `GET /quotas/:orgId` (its own, a
/// managed team, or a system admin): the organization's quotas.
pub(crate) async fn of(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Answer<OrgQuotas>, ApiError> {
    let quotas = quotas::of(
        &state.infra.store,
        &state.config,
        &state.replica.allowances,
        &granted.org,
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(quotas.into()))
}

/// `GET /quotas/all` (system admin): a page of every organization's quotas.
pub(crate) async fn all(
    State(state): State<AppState>,
    Query(page): Query<PageParams>,
) -> Result<Paged<OrgQuotas>, ApiError> {
    let page = page.check(state.config.http.max_page_limit, &["createdAt"])?;
    let (items, total) = quotas::all(
        &state.infra.store,
        &state.config,
        &state.replica.allowances,
        (page.limit, page.offset),
        Utc::now(),
    )
    .await?;
    Ok(Paged::new("quotas", page_of(items), total, page))
}

/// `GET /quotas/at-risk?threshold=` (system admin): account roots at or above the
/// threshold percent (default 80) on any quota type.
pub(crate) async fn at_risk(
    State(state): State<AppState>,
    Query(q): Query<RiskQuery>,
) -> Result<Paged<OrgQuotas>, ApiError> {
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
    let (items, total) = quotas::at_risk(
        &state.infra.store,
        &state.replica.allowances,
        threshold,
        (page.limit, page.offset),
        Utc::now(),
    )
    .await?;
    Ok(Paged::new("quotas", page_of(items), total, page))
}

/// `GET /quotas/:orgId/:type`.
pub(crate) async fn one_type(
    State(state): State<AppState>,
    granted: Granted,
    Path((_, name)): Path<(String, String)>,
) -> Result<Answer<QuotaStatus>, ApiError> {
    let status = quotas::one(
        &state.infra.store,
        &state.config,
        &state.replica.allowances,
        &granted.org,
        &name,
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(status.into()))
}

/// `PUT /quotas/:orgId` (system admin): the account's tier and limit overrides.
pub(crate) async fn update(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<QuotaUpdate>,
) -> Result<Answer<OrgQuotas>, ApiError> {
    let tier = body.tier;
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
    let record = quotas::update(
        &state.infra.store,
        &state.config,
        &state.replica.allowances,
        &caller,
        &granted.org.id,
        (tier, limits),
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(record.into()))
}

/// `POST /quotas/:orgId/reset` (system admin): monthly usage back to zero.
pub(crate) async fn reset(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    RawBody(bytes): RawBody,
) -> Result<Answer<OrgQuotas>, ApiError> {
    let body: QuotaReset = if bytes.iter().all(u8::is_ascii_whitespace) {
        QuotaReset::default()
    } else {
        serde_json::from_slice(&bytes).map_err(|e| ApiError::validation(e.to_string()))?
    };
    let record = quotas::reset(
        &state.infra.store,
        &state.config,
        &state.replica.allowances,
        &caller,
        &granted.org.id,
        body.dimension.as_deref(),
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(record.into()))
}

/// `POST /quotas/:orgId/increment` (service tokens): one atomic check-and-increment
/// of the account's pool; an `Idempotency-Key` makes a retry count once.
pub(crate) async fn increment(
    State(state): State<AppState>,
    service: ServiceCaller,
    Path(org_id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<QuotaIncrement>,
) -> Result<Answer<QuotaStatus>, ApiError> {
    let key = crate::http::extract::idempotency_key(&headers)?;
    let amount = u64::try_from(body.amount)
        .map_err(|_| ApiError::invalid_field("amount", "must be between 1 and 1000"))?;
    let status = quotas::increment(
        &state.infra.store,
        &state.config,
        &state.replica.allowances,
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
    Ok(Answer::ok(status.into()))
}
