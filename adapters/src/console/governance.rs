//! The catalog with subscribe, activate, pin and an impact preview; exemptions with
//! their requests and reviews.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::Method;
use axum::response::Response;
use compliance_core::Rule;
use serde::de::IgnoredAny;
use serde_json::json;

use super::api::{self, act, segment, Refusal};
use super::page::{self, Frame};
use super::session::{Posted, Visitor};
use super::{field, Console};
use crate::code::ErrorCode;
use crate::http::catalog::{CatalogRule, Pin, RuleImpact, RuleSubscription};
use crate::http::exemptions::Exemption;

/// A rule as a row.
pub struct RuleRow {
    id: String,
    name: String,
    target: String,
    severity: String,
    subscribed: bool,
    active: bool,
    pinned: String,
}

fn rule_row(r: &Rule) -> RuleRow {
    RuleRow {
        id: r.id.clone(),
        name: r.name.clone(),
        target: api::wire(&r.target),
        severity: api::wire(&r.severity),
        subscribed: false,
        active: false,
        pinned: String::new(),
    }
}

#[derive(Template)]
#[template(path = "console/catalog.html")]
struct CatalogPage {
    frame: Frame,
    rules: Vec<RuleRow>,
}

async fn show_catalog(
    console: &Console,
    visitor: &Visitor,
    q: &HashMap<String, String>,
    outcome: Option<Result<String, Refusal>>,
) -> Result<Response, Refusal> {
    let mut frame = Frame::load(console, visitor, q, ("Catalog", "/console/catalog")).await?;
    if frame.org.is_empty() {
        return Ok(page::empty(frame));
    }
    let published = frame
        .list::<CatalogRule>(
            visitor,
            ("publishedRules", "the catalog"),
            "/api/compliance/published-rules?limit=100",
            "rules",
        )
        .await?;
    let subscriptions = frame
        .list::<RuleSubscription>(
            visitor,
            ("listSubscriptions", "subscriptions"),
            "/api/compliance/subscriptions?limit=100",
            "subscriptions",
        )
        .await?;
    let subscribed: HashMap<String, RuleSubscription> = subscriptions
        .items
        .into_iter()
        .map(|s| (s.rule_id.clone(), s))
        .collect();
    let rules = published
        .items
        .iter()
        .map(|r| {
            let mut row = rule_row(&r.rule.rule);
            row.subscribed = r.subscribed;
            if let Some(s) = subscribed.get(&row.id) {
                row.subscribed = true;
                row.active = s.is_active;
                row.pinned = s.pinned_version.map(|v| v.to_string()).unwrap_or_default();
            }
            row
        })
        .collect();
    let code = frame.settle(outcome);
    Ok(page::render(&CatalogPage { frame, rules }, code))
}

/// `GET /console/catalog`.
pub async fn catalog(
    State(console): State<Console>,
    visitor: Visitor,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    show_catalog(&console, &visitor, &q, None)
        .await
        .unwrap_or_else(page::refused)
}

/// `POST /console/catalog`: `subscribe`, `activate`, `deactivate`, `pin`, `preview`.
pub async fn catalog_action(State(console): State<Console>, posted: Posted) -> Response {
    let Posted { visitor, form } = posted;
    let org = field(&form, "org").to_owned();
    let rule = field(&form, "ruleId").to_owned();
    let outcome = async {
        let id = segment(&rule)?;
        let path = format!("/api/compliance/subscriptions/{id}");
        match field(&form, "action") {
            "subscribe" => {
                act::<IgnoredAny>(
                    &visitor.api,
                    (Method::POST, "/api/compliance/subscriptions"),
                    &org,
                    Some(json!({"ruleId": id})),
                )
                .await?;
                Ok(format!("subscribed to {id}"))
            }
            "activate" | "deactivate" => {
                let on = field(&form, "action") == "activate";
                act::<IgnoredAny>(
                    &visitor.api,
                    (Method::PATCH, &path),
                    &org,
                    Some(json!({"isActive": on})),
                )
                .await?;
                Ok(format!(
                    "{id} {}",
                    if on { "activated" } else { "deactivated" }
                ))
            }
            "pin" => {
                let pinned: Pin = act(
                    &visitor.api,
                    (Method::POST, &format!("{path}/pin")),
                    &org,
                    None,
                )
                .await?;
                Ok(format!(
                    "{id} pinned at version {}",
                    pinned
                        .pinned_version
                        .map(|v| v.to_string())
                        .unwrap_or_default()
                ))
            }
            "preview" => {
                let published = visitor
                    .api
                    .list::<CatalogRule>(
                        "/api/compliance/published-rules?limit=100",
                        Some(&org),
                        "rules",
                    )
                    .await?;
                let found = published
                    .items
                    .into_iter()
                    .map(|r| r.rule.rule)
                    .find(|r| r.id == id)
                    .ok_or_else(|| Refusal {
                        status: axum::http::StatusCode::NOT_FOUND,
                        code: ErrorCode::NotFound,
                        message: "no such published rule".to_owned(),
                    })?;
                let impact: RuleImpact = act(
                    &visitor.api,
                    (Method::POST, "/api/compliance/subscriptions/preview/impact"),
                    &org,
                    Some(json!({"rule": found})),
                )
                .await?;
                Ok(format!(
                    "impact of {}: it would fail {} of {} {} entities",
                    found.name,
                    impact.failing,
                    impact.evaluated,
                    api::wire(&impact.target),
                ))
            }
            _ => Err(unknown_action()),
        }
    }
    .await;
    show_catalog(&console, &visitor, &page::again(org), Some(outcome))
        .await
        .unwrap_or_else(page::refused)
}

/// A form's action the page does not have.
pub fn unknown_action() -> Refusal {
    Refusal::invalid("no such action")
}

/// An exemption as a row.
pub struct ExemptionRow {
    id: String,
    rule_id: String,
    entity_id: String,
    reason: String,
    status: String,
    requested_by: String,
    reviewed_by: String,
    own: bool,
}

#[derive(Template)]
#[template(path = "console/exemptions.html")]
struct ExemptionsPage {
    frame: Frame,
    exemptions: Vec<ExemptionRow>,
}

async fn show_exemptions(
    console: &Console,
    visitor: &Visitor,
    q: &HashMap<String, String>,
    outcome: Option<Result<String, Refusal>>,
) -> Result<Response, Refusal> {
    let mut frame = Frame::load(console, visitor, q, ("Exemptions", "/console/exemptions")).await?;
    if frame.org.is_empty() {
        return Ok(page::empty(frame));
    }
    let list = frame
        .list::<Exemption>(
            visitor,
            ("listExemptions", "exemptions"),
            "/api/compliance/exemptions?limit=100",
            "exemptions",
        )
        .await?;
    let me = &visitor.session.user_id;
    let exemptions = list
        .items
        .into_iter()
        .map(|e| ExemptionRow {
            own: &e.requested_by == me,
            status: api::wire(&e.status),
            id: e.id,
            rule_id: e.rule_id,
            entity_id: e.entity_id,
            reason: e.reason,
            requested_by: e.requested_by,
            reviewed_by: e.reviewed_by.unwrap_or_default(),
        })
        .collect();
    let code = frame.settle(outcome);
    Ok(page::render(&ExemptionsPage { frame, exemptions }, code))
}

/// `GET /console/exemptions`.
pub async fn exemptions(
    State(console): State<Console>,
    visitor: Visitor,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    show_exemptions(&console, &visitor, &q, None)
        .await
        .unwrap_or_else(page::refused)
}

/// `POST /console/exemptions`: `approve`, `reject`, `request`.
pub async fn exemption_action(State(console): State<Console>, posted: Posted) -> Response {
    let Posted { visitor, form } = posted;
    let org = field(&form, "org").to_owned();
    let outcome = async {
        match field(&form, "action") {
            decision @ ("approve" | "reject") => {
                let id = segment(field(&form, "id"))?;
                let uri = format!("/api/compliance/exemptions/{id}/review");
                let done: Exemption = act(
                    &visitor.api,
                    (Method::PUT, &uri),
                    &org,
                    Some(json!({"decision": decision})),
                )
                .await?;
                Ok(format!("exemption {id} is {}", api::wire(&done.status)))
            }
            "request" => {
                let body = json!({
                    "ruleId": field(&form, "ruleId"),
                    "entityId": field(&form, "entityId"),
                    "reason": field(&form, "reason"),
                });
                let done: Exemption = act(
                    &visitor.api,
                    (Method::POST, "/api/compliance/exemptions"),
                    &org,
                    Some(body),
                )
                .await?;
                Ok(format!("exemption {} requested", done.id))
            }
            _ => Err(unknown_action()),
        }
    }
    .await;
    show_exemptions(&console, &visitor, &page::again(org), Some(outcome))
        .await
        .unwrap_or_else(page::refused)
}
