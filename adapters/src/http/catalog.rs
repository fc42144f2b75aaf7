//! The published catalog and subscriptions (document 1's thirteen endpoints).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use compliance_core::{
    AttributeLimits, Attributes, Dependencies, Rule, RuleSet, Scope, Target, Waivers,
};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::http::extract::{Json, Query, SortOrder};
use crate::http::gate::Granted;
use crate::http::response::{ok, paginated};
use crate::http::rules::{parse_rule, RuleQuery};
use crate::http::state::{event, AppState, Caller};
use crate::services::rules::{check as check_rule, invalidate};
use crate::storage::{new_id, OrgRecord};

/// How many stored entities an impact preview evaluates at most, per target.
pub const IMPACT_SAMPLE_LIMIT: u32 = 10_000;

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

async fn published(state: &AppState, rule_id: &str) -> Result<Rule, ApiError> {
    state
        .store
        .published_rule(rule_id)
        .await?
        .map(|s| s.rule)
        .ok_or_else(|| ApiError::not_found("published rule"))
}

async fn changed(state: &AppState, org: &OrgRecord) -> Result<(), ApiError> {
    Ok(invalidate(state, org, false).await?)
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
    let mut filter = q.filter()?;
    filter.scope = Some("published".to_owned());
    filter.include_deleted = false;
    let (rules, total) = state
        .store
        .rules(
            None,
            &filter,
            page.limit,
            page.offset,
            page.sort_order == SortOrder::Asc,
        )
        .await?;
    let subscriptions = state.store.subscriptions(&granted.org.id).await?;
    let items: Vec<Value> = rules
        .into_iter()
        .map(|r| {
            let subscribed = subscriptions.iter().any(|s| s.rule_id == r.rule.id);
            let mut value = serde_json::to_value(r).unwrap_or(Value::Null);
            if let Some(object) = value.as_object_mut() {
                object.insert("subscribed".into(), json!(subscribed));
            }
            value
        })
        .collect();
    Ok(paginated("rules", items, total, &page))
}

/// `GET /compliance/subscriptions`: with each rule's details (at its pinned version).
pub(crate) async fn list(
    State(state): State<AppState>,
    granted: Granted,
    Query(params): Query<crate::http::extract::PageParams>,
) -> Result<Response, ApiError> {
    let page = params.check(state.config.http.max_page_limit, &["createdAt"])?;
    let (subscriptions, total) = state
        .store
        .subscriptions_page(&granted.org.id, page.limit, page.offset)
        .await?;
    let ids: Vec<String> = subscriptions.iter().map(|s| s.rule_id.clone()).collect();
    let versions = state.store.published_versions(&ids).await?;
    let items: Vec<Value> = subscriptions
        .iter()
        .map(|s| {
            let latest = versions
                .iter()
                .filter(|r| r.id == s.rule_id)
                .max_by_key(|r| r.version);
            let shown = s
                .pinned_version
                .and_then(|v| {
                    versions
                        .iter()
                        .find(|r| r.id == s.rule_id && r.version == v)
                })
                .or(latest);
            json!({
                "ruleId": s.rule_id,
                "isActive": s.active,
                "pinnedVersion": s.pinned_version,
                "latestVersion": latest.map(|r| r.version),
                "rule": shown,
            })
        })
        .collect();
    Ok(crate::http::response::paginated(
        "subscriptions",
        items,
        total,
        &page,
    ))
}

/// `POST /compliance/subscriptions`: subscribe, inactive.
pub(crate) async fn subscribe(
    State(state): State<AppState>,
    granted: Granted,
    Json(body): Json<RuleRef>,
) -> Result<Response, ApiError> {
    published(&state, &body.rule_id).await?;
    state
        .store
        .subscribe(&granted.org.id, &body.rule_id, Utc::now(), &[])
        .await?;
    changed(&state, &granted.org).await?;
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
    let mut rule = published(&state, &body.rule_id).await?;
    rule.id = new_id();
    rule.version = 1;
    rule.scope = Scope::Org;
    rule.is_template = false;
    rule.conditions
        .iter_mut()
        .for_each(|c| c.depends_on_rule = None);
    if let Some(name) = body.name {
        rule.name = name;
    }
    check_rule(&state, &granted.org, &rule).await?;
    let audit = [event(
        &caller,
        "compliance.rule.create",
        &granted.org.id,
        "rule",
        &rule.id,
        json!({"clonedFrom": body.rule_id}),
    )];
    let stored = state
        .store
        .create_rule(&granted.org.id, &rule, &caller.user_id, Utc::now(), &audit)
        .await?;
    changed(&state, &granted.org).await?;
    Ok(ok(StatusCode::CREATED, stored))
}

/// `POST /compliance/subscriptions/auto-subscribe`: every published rule, inactive.
pub(crate) async fn auto_subscribe(
    State(state): State<AppState>,
    granted: Granted,
) -> Result<Response, ApiError> {
    let filter = crate::storage::RuleFilter {
        scope: Some("published".to_owned()),
        ..Default::default()
    };
    let (rules, _) = state.store.rules(None, &filter, u32::MAX, 0, true).await?;
    let ids: Vec<String> = rules.into_iter().map(|r| r.rule.id).collect();
    let added = state
        .store
        .subscribe_missing(&granted.org.id, &ids, Utc::now(), &[])
        .await?;
    changed(&state, &granted.org).await?;
    Ok(ok(
        StatusCode::OK,
        json!({"subscribed": added, "published": ids.len()}),
    ))
}

async fn activate(
    state: &AppState,
    caller: &Caller,
    granted: Granted,
    rule_ids: &[String],
    active: bool,
) -> Result<(), ApiError> {
    if rule_ids.is_empty() || rule_ids.len() > 500 {
        return Err(ApiError::invalid_field(
            "ruleIds",
            "must list 1 to 500 rules",
        ));
    }
    let audit: Vec<_> = rule_ids
        .iter()
        .map(|rule_id| {
            event(
                caller,
                "compliance.rule.toggle",
                &granted.org.id,
                "subscription",
                rule_id,
                json!({"isActive": active}),
            )
        })
        .collect();
    state
        .store
        .set_subscriptions_active(&granted.org.id, rule_ids, active, Utc::now(), &audit)
        .await?;
    changed(state, &granted.org).await?;
    Ok(())
}

/// `PATCH /compliance/subscriptions/:ruleId`: activate or deactivate.
pub(crate) async fn set_active(
    State(state): State<AppState>,
    caller: Caller,
    granted: Granted,
    Path(rule_id): Path<String>,
    Json(body): Json<Activation>,
) -> Result<Response, ApiError> {
    activate(
        &state,
        &caller,
        granted,
        std::slice::from_ref(&rule_id),
        body.is_active,
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
    activate(&state, &caller, granted, &body.rule_ids, body.is_active).await?;
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
    let target = rule.target;
    let set = single(&state, rule)?;
    let snapshots = state
        .store
        .snapshots(&granted.org.id, target.as_str(), IMPACT_SAMPLE_LIMIT)
        .await?;
    let limits = AttributeLimits {
        max_depth: usize::MAX,
        max_keys: usize::MAX,
    };
    let mut failing = Vec::new();
    for (entity, attributes) in &snapshots {
        if let Ok(attrs) = Attributes::new(attributes, &limits) {
            let result = set.evaluate(target, &attrs, &Waivers::none());
            if let Some(violation) = result.violations.into_iter().next() {
                failing.push(json!({"entityId": entity, "violation": violation}));
            }
        }
    }
    let samples: Vec<Value> = failing.iter().take(10).cloned().collect();
    Ok(ok(
        StatusCode::OK,
        json!({
            "target": target,
            "evaluated": snapshots.len(),
            "failing": failing.len(),
            "samples": samples,
            "source": "entities this service has validated (last attributes per entity); the plugin and pipeline inventories are not consulted yet",
        }),
    ))
}

fn single(state: &AppState, mut rule: Rule) -> Result<RuleSet, ApiError> {
    if rule.id.is_empty() {
        rule.id = "preview".to_owned();
    }
    rule.conditions
        .iter_mut()
        .for_each(|c| c.depends_on_rule = None);
    RuleSet::compile(
        [rule],
        &crate::compliance::compile_options(&state.config, Dependencies::Strict),
    )
    .map_err(ApiError::rules)
}

/// `POST /compliance/subscriptions/preview`: one rule against caller-supplied attributes.
pub(crate) async fn preview(
    State(state): State<AppState>,
    Json(body): Json<Preview>,
) -> Result<Response, ApiError> {
    let rule = parse_rule(body.rule)?;
    let target: Target = rule.target;
    let set = single(&state, rule)?;
    let attributes = Attributes::new(&body.attributes, &state.config.attribute_limits()).map_err(
        |e| match e {
            compliance_core::Error::AttributeLimitExceeded(l) => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "ATTRIBUTE_LIMIT_EXCEEDED",
                l.to_string(),
            )
            .with_details(json!({"limit": l.limit, "max": l.max, "actual": l.actual})),
            other => ApiError::invalid_field("attributes", other.to_string()),
        },
    )?;
    let result = set.evaluate(target, &attributes, &Waivers::none());
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
    let rule = published(&state, &rule_id).await?;
    state
        .store
        .pin_subscription(
            &granted.org.id,
            &rule_id,
            Some(rule.version),
            Utc::now(),
            &[],
        )
        .await?;
    changed(&state, &granted.org).await?;
    Ok(ok(
        StatusCode::OK,
        json!({"ruleId": rule_id, "pinnedVersion": rule.version}),
    ))
}

/// `DELETE /compliance/subscriptions/:ruleId/pin`: follow the latest version again.
pub(crate) async fn unpin(
    State(state): State<AppState>,
    granted: Granted,
    Path(rule_id): Path<String>,
) -> Result<Response, ApiError> {
    state
        .store
        .pin_subscription(&granted.org.id, &rule_id, None, Utc::now(), &[])
        .await?;
    changed(&state, &granted.org).await?;
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
    state
        .store
        .unsubscribe(&granted.org.id, &rule_id, &[])
        .await?;
    changed(&state, &granted.org).await?;
    Ok(ok(
        StatusCode::OK,
        json!({"ruleId": rule_id, "unsubscribed": true}),
    ))
}
