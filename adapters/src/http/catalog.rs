//! The published catalog and subscriptions (document 1's thirteen endpoints).

use axum::extract::{Path, State};
use chrono::Utc;
use compliance_core::{Evaluation, Rule, Target};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::http::error::ApiError;
use crate::http::extract::{Json, PageParams, Query, SortOrder};
use crate::http::gate::Granted;
use crate::http::response::{Answer, Paged};
use crate::http::rules::{OrgRule, RuleQuery};
use crate::http::state::{AppState, Caller};
use crate::services::catalog::{self, CatalogEntry, Impact, SubscriptionView};

/// A published rule and a name for the organization's copy of it.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RuleRef {
    #[schema(max_length = 200)]
    rule_id: String,
    /// The copy's name (clone only; default the published rule's).
    #[schema(max_length = 200)]
    name: Option<String>,
}

/// Whether a subscription is enforced.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Activation {
    is_active: bool,
}

/// Several subscriptions activated or deactivated, all or nothing.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct BulkActivation {
    #[schema(min_items = 1, max_items = 500)]
    rule_ids: Vec<String>,
    is_active: bool,
}

/// A rule to try on attributes.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Preview {
    rule: Rule,
    /// The entity's attributes.
    #[schema(value_type = Object)]
    attributes: Value,
}

/// A rule to try on the organization's validated entities.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ImpactPreview {
    rule: Rule,
}

/// A published rule, with whether the organization subscribes to it.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogRule {
    #[serde(flatten)]
    pub rule: OrgRule,
    pub subscribed: bool,
}

/// A subscription, with the rule as it applies (its pinned version, or the latest).
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuleSubscription {
    pub rule_id: String,
    pub is_active: bool,
    pub pinned_version: Option<u32>,
    /// The latest published version (none once the rule is withdrawn).
    pub latest_version: Option<u32>,
    /// The rule at the version that applies.
    pub rule: Option<Rule>,
}

impl From<SubscriptionView> for RuleSubscription {
    fn from(s: SubscriptionView) -> Self {
        RuleSubscription {
            rule_id: s.rule_id,
            is_active: s.is_active,
            pinned_version: s.pinned_version,
            latest_version: s.latest_version,
            rule: s.rule,
        }
    }
}

/// A subscription's state after a change.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Subscribed {
    pub rule_id: String,
    pub is_active: bool,
    pub pinned_version: Option<u32>,
}

/// A subscription activated or deactivated.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Activated {
    pub rule_id: String,
    pub is_active: bool,
}

/// A subscription's pin.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Pin {
    pub rule_id: String,
    /// None: the subscription follows the latest version.
    pub pinned_version: Option<u32>,
}

/// `{ruleId, unsubscribed: true}`.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Unsubscribed {
    pub rule_id: String,
    pub unsubscribed: bool,
}

/// What auto-subscribe did.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct AutoSubscribed {
    /// Subscriptions added.
    pub subscribed: u64,
    /// Rules in the catalog.
    pub published: u64,
}

/// Which validated entities a rule would fail.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct RuleImpact {
    pub target: Target,
    pub evaluated: u64,
    pub failing: u64,
    /// The first failures: `{entityId, violation}`.
    pub samples: Vec<Value>,
    /// Where the entities come from.
    pub source: String,
}

impl From<Impact> for RuleImpact {
    fn from(i: Impact) -> Self {
        RuleImpact {
            target: i.target,
            evaluated: i.evaluated as u64,
            failing: i.failing as u64,
            samples: i.samples,
            source: i.source.to_owned(),
        }
    }
}

/// `GET /compliance/published-rules`: the catalog, each entry with `subscribed`.
pub(crate) async fn catalog(
    State(state): State<AppState>,
    granted: Granted,
    Query(q): Query<RuleQuery>,
) -> Result<Paged<CatalogRule>, ApiError> {
    let page = q
        .page()
        .check(state.config.http.max_page_limit, &["createdAt"])?;
    let filter = q.filter()?;
    let ascending = page.sort_order == SortOrder::Asc;
    let (items, total) = catalog::catalog(
        &state.infra.store,
        &granted.org,
        filter,
        (page.limit, page.offset, ascending),
    )
    .await?;
    let items = items
        .into_iter()
        .map(|CatalogEntry { rule, subscribed }| CatalogRule {
            rule: rule.into(),
            subscribed,
        })
        .collect();
    Ok(Paged::new("rules", items, total, page))
}

/// `GET /compliance/subscriptions`: with each rule's details (at its pinned version).
pub(crate) async fn list(
    State(state): State<AppState>,
    granted: Granted,
    Query(params): Query<PageParams>,
) -> Result<Paged<RuleSubscription>, ApiError> {
    let page = params.check(state.config.http.max_page_limit, &["createdAt"])?;
    let (items, total) =
        catalog::subscriptions(&state.infra.store, &granted.org, page.limit, page.offset).await?;
    let items = items.into_iter().map(RuleSubscription::from).collect();
    Ok(Paged::new("subscriptions", items, total, page))
}

/// `POST /compliance/subscriptions`: subscribe, inactive.
pub(crate) async fn subscribe(
    State(state): State<AppState>,
    granted: Granted,
    Json(body): Json<RuleRef>,
) -> Result<Answer<Subscribed>, ApiError> {
    catalog::subscribe(
        &state.infra.store,
        &state.replica.rule_cache,
        &granted.org,
        &body.rule_id,
        Utc::now(),
    )
    .await?;
    Ok(Answer::created(Subscribed {
        rule_id: body.rule_id,
        is_active: false,
        pinned_version: None,
    }))
}

/// `POST /compliance/subscriptions/clone`: an editable org rule made from a published one.
pub(crate) async fn clone(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<RuleRef>,
) -> Result<Answer<OrgRule>, ApiError> {
    let stored = catalog::clone(
        &state.infra.store,
        &state.config,
        &state.replica.rule_cache,
        &caller,
        &granted.org,
        (&body.rule_id, body.name),
        Utc::now(),
    )
    .await?;
    Ok(Answer::created(stored.into()))
}

/// `POST /compliance/subscriptions/auto-subscribe`: every published rule, inactive.
pub(crate) async fn auto_subscribe(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Answer<AutoSubscribed>, ApiError> {
    let (added, published) = catalog::auto_subscribe(
        &state.infra.store,
        &state.replica.rule_cache,
        &granted.org,
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(AutoSubscribed {
        subscribed: added,
        published: published as u64,
    }))
}

/// `PATCH /compliance/subscriptions/:ruleId`: activate or deactivate.
pub(crate) async fn set_active(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(rule_id): Path<String>,
    Json(body): Json<Activation>,
) -> Result<Answer<Activated>, ApiError> {
    let ids = std::slice::from_ref(&rule_id);
    catalog::activate(
        &state.infra.store,
        &state.replica.rule_cache,
        &caller,
        &granted.org,
        (ids, body.is_active),
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(Activated {
        rule_id,
        is_active: body.is_active,
    }))
}

/// `POST /compliance/subscriptions/bulk`: activate or deactivate many, all or nothing.
pub(crate) async fn bulk(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Json(body): Json<BulkActivation>,
) -> Result<Answer<BulkActivation>, ApiError> {
    let change = (body.rule_ids.as_slice(), body.is_active);
    catalog::activate(
        &state.infra.store,
        &state.replica.rule_cache,
        &caller,
        &granted.org,
        change,
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(body))
}

/// `GET /compliance/subscriptions/enforced`: own rules, active subscriptions and rules
/// propagated from the parent, as they are enforced.
pub(crate) async fn enforced(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Answer<Vec<Rule>>, ApiError> {
    Ok(Answer::ok(
        catalog::enforced(&state.infra.store, &granted.org).await?,
    ))
}

/// `POST /compliance/subscriptions/preview/impact`: how many of the organization's
/// known entities would fail the rule, with samples. The entities are those the
/// re-evaluation store holds: the last attributes validated (non-dry-run, with an
/// entityId) for each plugin and pipeline.
pub(crate) async fn impact(
    State(state): State<AppState>,
    granted: Granted,
    Json(body): Json<ImpactPreview>,
) -> Result<Answer<RuleImpact>, ApiError> {
    let impact = catalog::impact(
        &state.infra.store,
        &state.config,
        &state.infra.cpu,
        &granted.org,
        body.rule,
    )
    .await?;
    Ok(Answer::ok(impact.into()))
}

/// `POST /compliance/subscriptions/preview`: one rule against caller-supplied attributes.
pub(crate) async fn preview(
    State(state): State<AppState>,
    Json(body): Json<Preview>,
) -> Result<Answer<Evaluation>, ApiError> {
    let result =
        catalog::preview(&state.config, &state.infra.cpu, body.rule, body.attributes).await?;
    Ok(Answer::ok(result))
}

/// `POST /compliance/subscriptions/:ruleId/pin`: pin to the rule's current version.
pub(crate) async fn pin(
    State(state): State<AppState>,
    granted: Granted,
    Path(rule_id): Path<String>,
) -> Result<Answer<Pin>, ApiError> {
    let version = catalog::pin(
        &state.infra.store,
        &state.replica.rule_cache,
        &granted.org,
        &rule_id,
        true,
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(Pin {
        rule_id,
        pinned_version: version,
    }))
}

/// `DELETE /compliance/subscriptions/:ruleId/pin`: follow the latest version again.
pub(crate) async fn unpin(
    State(state): State<AppState>,
    granted: Granted,
    Path(rule_id): Path<String>,
) -> Result<Answer<Pin>, ApiError> {
    catalog::pin(
        &state.infra.store,
        &state.replica.rule_cache,
        &granted.org,
        &rule_id,
        false,
        Utc::now(),
    )
    .await?;
    Ok(Answer::ok(Pin {
        rule_id,
        pinned_version: None,
    }))
}

/// `DELETE /compliance/subscriptions/:ruleId`: unsubscribe.
pub(crate) async fn unsubscribe(
    State(state): State<AppState>,
    granted: Granted,
    Path(rule_id): Path<String>,
) -> Result<Answer<Unsubscribed>, ApiError> {
    catalog::unsubscribe(
        &state.infra.store,
        &state.replica.rule_cache,
        &granted.org,
        &rule_id,
    )
    .await?;
    Ok(Answer::ok(Unsubscribed {
        rule_id,
        unsubscribed: true,
    }))
}
