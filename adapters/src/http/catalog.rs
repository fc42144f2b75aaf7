//! The published catalog and subscriptions (document 1's thirteen endpoints).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::http::error::ApiError;
use crate::http::extract::{Json, Query, SortOrder};
use crate::http::gate::Granted;
use crate::http::response::{ok, paginated};
use crate::http::rules::{parse_rule, RuleQuery};
use crate::http::state::{AppState, Caller};
use crate::services::catalog;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RuleRef {
    rule_id: String,
    name: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Activation {
    is_active: bool,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct BulkActivation {
    rule_ids: Vec<String>,
    is_active: bool,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Preview {
    rule: Value,
    attributes: Value,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ImpactPreview {
    rule: Value,
}

/// `GET /compliance/published-rules`: the catalog, each entry with `subscribed`.
pub(crate) async fn catalog(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<RuleQuery>,
) -> Result<Response, ApiError> {
    let page = q
        .page()
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    let filter = q.filter()?;
    let ascending = page.sort_order == SortOrder::Asc;
    let (items, total) = catalog::catalog(
        &state,
        &granted.org,
        filter,
        (page.limit, page.offset, ascending),
    )
    .await?;
    Ok(paginated("rules", items, total, &page))
}

/// `GET /compliance/subscriptions`: with each rule's details (at its pinned version).
pub(crate) async fn list(
    State(state): State<AppState>,
    granted: Granted,
    Query(params): Query<crate::http::extract::PageParams>,
) -> Result<Response, ApiError> {
    let page = params.check(state.config.http.max_page_limit, &["createdAt"])?;
    let (items, total) =
        catalog::subscriptions(&state, &granted.org, page.limit, page.offset).await?;
    Ok(paginated("subscriptions", items, total, &page))
}

/// `POST /compliance/subscriptions`: subscribe, inactive.
pub(crate) async fn subscribe(
    State(state): State<AppState>,
    granted: Granted,
    Json(body): Json<RuleRef>,
) -> Result<Response, ApiError> {
    catalog::subscribe(&state, &granted.org, &body.rule_id, Utc::now()).await?;
    Ok(ok(
        StatusCode::CREATED,
        json!({"ruleId": body.rule_id, "isActive": false, "pinnedVersion": null}),
    ))
}

/// `POST /compliance/subscriptions/clone`: an editable org rule made from a published one.
pub(crate) async fn clone(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<RuleRef>,
) -> Result<Response, ApiError> {
    let stored = catalog::clone(
        &state,
        &caller,
        &granted.org,
        (&body.rule_id, body.name),
        Utc::now(),
    )
    .await?;
    Ok(ok(StatusCode::CREATED, stored))
}

/// `POST /compliance/subscriptions/auto-subscribe`: every published rule, inactive.
pub(crate) async fn auto_subscribe(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Response, ApiError> {
    let (added, published) = catalog::auto_subscribe(&state, &granted.org, Utc::now()).await?;
    Ok(ok(
        StatusCode::OK,
        json!({"subscribed": added, "published": published}),
    ))
}

/// `PATCH /compliance/subscriptions/:ruleId`: activate or deactivate.
pub(crate) async fn set_active(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(rule_id): Path<String>,
    Json(body): Json<Activation>,
) -> Result<Response, ApiError> {
    let ids = std::slice::from_ref(&rule_id);
    catalog::activate(
        &state,
        &caller,
        &granted.org,
        (ids, body.is_active),
        Utc::now(),
    )
    .await?;
    Ok(ok(
        StatusCode::OK,
        json!({"ruleId": rule_id, "isActive": body.is_active}),
    ))
}

/// `POST /compliance/subscriptions/bulk`: activate or deactivate many, all or nothing.
pub(crate) async fn bulk(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<BulkActivation>,
) -> Result<Response, ApiError> {
    let change = (body.rule_ids.as_slice(), body.is_active);
    catalog::activate(&state, &caller, &granted.org, change, Utc::now()).await?;
    Ok(ok(
        StatusCode::OK,
        json!({"ruleIds": body.rule_ids, "isActive": body.is_active}),
    ))
}

/// `GET /compliance/subscriptions/enforced`: own rules, active subscriptions and rules
/// propagated from the parent, as they are enforced.
pub(crate) async fn enforced(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Response, ApiError> {
    let rules = crate::compliance::effective(&state.store, &granted.org).await?;
    Ok(ok(StatusCode::OK, rules))
}

/// `POST /compliance/subscriptions/preview/impact`: how many of the organization's
/// known entities would fail the rule, with samples. The entities are those the
/// re-evaluation store holds: the last attributes validated (non-dry-run, with an
/// entityId) for each plugin and pipeline.
pub(crate) async fn impact(
    State(state): State<AppState>,
    granted: Granted,
    Json(body): Json<ImpactPreview>,
) -> Result<Response, ApiError> {
    let rule = parse_rule(body.rule)?;
    let impact = catalog::impact(&state, &granted.org, rule).await?;
    Ok(ok(StatusCode::OK, impact))
}

/// `POST /compliance/subscriptions/preview`: one rule against caller-supplied attributes.
pub(crate) async fn preview(
    State(state): State<AppState>,
    Json(body): Json<Preview>,
) -> Result<Response, ApiError> {
    let rule = parse_rule(body.rule)?;
    let result = catalog::preview(&state, rule, body.attributes).await?;
    Ok(ok(
        StatusCode::OK,
        json!({"blocked": result.blocked, "violations": result.violations, "exempted": result.exempted}),
    ))
}

/// `POST /compliance/subscriptions/:ruleId/pin`: pin to the rule's current version.
pub(crate) async fn pin(
    State(state): State<AppState>,
    granted: Granted,
    Path(rule_id): Path<String>,
) -> Result<Response, ApiError> {
    let version = catalog::pin(&state, &granted.org, &rule_id, true, Utc::now()).await?;
    Ok(ok(
        StatusCode::OK,
        json!({"ruleId": rule_id, "pinnedVersion": version}),
    ))
}

/// `DELETE /compliance/subscriptions/:ruleId/pin`: follow the latest version again.
pub(crate) async fn unpin(
    State(state): State<AppState>,
    granted: Granted,
    Path(rule_id): Path<String>,
) -> Result<Response, ApiError> {
    catalog::pin(&state, &granted.org, &rule_id, false, Utc::now()).await?;
    Ok(ok(
        StatusCode::OK,
        json!({"ruleId": rule_id, "pinnedVersion": null}),
    ))
}

/// `DELETE /compliance/subscriptions/:ruleId`: unsubscribe.
pub(crate) async fn unsubscribe(
    State(state): State<AppState>,
    granted: Granted,
    Path(rule_id): Path<String>,
) -> Result<Response, ApiError> {
    catalog::unsubscribe(&state, &granted.org, &rule_id).await?;
    Ok(ok(
        StatusCode::OK,
        json!({"ruleId": rule_id, "unsubscribed": true}),
    ))
}
