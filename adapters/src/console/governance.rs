//! Rules with their history; the catalog with subscribe, activate, pin and an
//! impact preview; exemptions with their requests and reviews.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::Method;
use axum::response::Response;
use serde_json::{json, Value};

use super::api::{self, act, segment, Refusal};
use super::page::{self, Frame};
use super::session::{Posted, Visitor};
use super::{field, Console};
use crate::code::ErrorCode;

/// A rule as a row.
pub struct RuleRow {
    id: String,
    name: String,
    target: String,
    severity: String,
    field: String,
    operator: String,
    subscribed: bool,
    active: bool,
    pinned: String,
}

fn rule_row(r: &Value) -> RuleRow {
    RuleRow {
        id: api::text(r, "id"),
        name: api::text(r, "name"),
        target: api::text(r, "target"),
        severity: api::text(r, "severity"),
        field: api::text(r, "field"),
        operator: api::text(r, "operator"),
        subscribed: r
            .get("subscribed")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        active: false,
        pinned: String::new(),
    }
}

/// A version of a rule.
pub struct Version {
    version: String,
    change: String,
    changed_at: String,
    changed_by: String,
}

#[derive(Template)]
#[template(path = "console/rules.html")]
struct RulesPage {
    frame: Frame,
    rules: Vec<RuleRow>,
    history_of: String,
    history: Vec<Version>,
}

/// `GET /console/rules` (`?history=<rule id>` shows its versions).
pub async fn rules(
    State(console): State<Console>,
    visitor: Visitor,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let shown = async {
        let mut frame = Frame::load(&console, &visitor, &q, ("Rules", "/console/rules")).await?;
        if frame.org.is_empty() {
            return Ok(page::empty(frame));
        }
        let list = frame
            .read(
                &visitor,
                ("listRules", "rules"),
                "/api/compliance/rules?limit=100",
            )
            .await?;
        let rules = api::items(&list).iter().map(rule_row).collect();
        let history_of = q.get("history").cloned().unwrap_or_default();
        let history = if history_of.is_empty() {
            Vec::new()
        } else {
            let uri = format!("/api/compliance/rules/{}/history", segment(&history_of)?);
            let versions = frame
                .read(&visitor, ("ruleHistory", "the rule's history"), &uri)
                .await?;
            versions
                .as_array()
                .cloned()
                .unwrap_or_else(|| api::items(&versions))
                .iter()
                .map(|v| Version {
                    version: api::text(v, "version"),
                    change: api::text(v, "change"),
                    changed_at: api::text(v, "changedAt"),
                    changed_by: api::text(v, "changedBy"),
                })
                .collect()
        };
        Ok::<_, Refusal>(page::render(
            &RulesPage {
                frame,
                rules,
                history_of,
                history,
            },
            axum::http::StatusCode::OK,
        ))
    };
    shown.await.unwrap_or_else(page::refused)
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
        .read(
            visitor,
            ("publishedRules", "the catalog"),
            "/api/compliance/published-rules?limit=100",
        )
        .await?;
    let subscriptions = frame
        .read(
            visitor,
            ("listSubscriptions", "subscriptions"),
            "/api/compliance/subscriptions?limit=100",
        )
        .await?;
    let subscribed: HashMap<String, Value> = api::items(&subscriptions)
        .into_iter()
        .map(|s| (api::text(&s, "ruleId"), s))
        .collect();
    let rules = api::items(&published)
        .iter()
        .map(|r| {
            let mut row = rule_row(r);
            if let Some(s) = subscribed.get(&row.id) {
                row.subscribed = true;
                row.active = s.get("isActive").and_then(Value::as_bool).unwrap_or(false);
                row.pinned = api::text(s, "pinnedVersion");
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

/// The rule a catalog preview tries: the published rule without what only the
/// answer carries.
fn previewed(rule: &Value) -> Value {
    let mut rule = rule.clone();
    if let Some(map) = rule.as_object_mut() {
        for key in ["orgId", "createdAt", "updatedAt", "deletedAt", "subscribed"] {
            map.remove(key);
        }
    }
    rule
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
                act(
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
                act(
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
                let pinned = act(
                    &visitor.api,
                    (Method::POST, &format!("{path}/pin")),
                    &org,
                    None,
                )
                .await?;
                Ok(format!(
                    "{id} pinned at version {}",
                    api::text(&pinned, "pinnedVersion")
                ))
            }
            "preview" => {
                let published = visitor
                    .api
                    .get("/api/compliance/published-rules?limit=100", Some(&org))
                    .await?;
                let found = api::items(&published)
                    .into_iter()
                    .find(|r| api::text(r, "id") == id)
                    .ok_or_else(|| Refusal {
                        status: axum::http::StatusCode::NOT_FOUND,
                        code: ErrorCode::NotFound,
                        message: "no such published rule".to_owned(),
                    })?;
                let impact = act(
                    &visitor.api,
                    (Method::POST, "/api/compliance/subscriptions/preview/impact"),
                    &org,
                    Some(json!({"rule": previewed(&found)})),
                )
                .await?;
                Ok(format!(
                    "impact of {}: it would fail {} of {} {} entities",
                    api::text(&found, "name"),
                    api::number(&impact, "failing"),
                    api::number(&impact, "evaluated"),
                    api::text(&impact, "target"),
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
    Refusal {
        status: axum::http::StatusCode::BAD_REQUEST,
        code: ErrorCode::ValidationError,
        message: "no such action".to_owned(),
    }
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
        .read(
            visitor,
            ("listExemptions", "exemptions"),
            "/api/compliance/exemptions?limit=100",
        )
        .await?;
    let me = &visitor.session.user_id;
    let exemptions = api::items(&list)
        .iter()
        .map(|e| ExemptionRow {
            id: api::text(e, "id"),
            rule_id: api::text(e, "ruleId"),
            entity_id: api::text(e, "entityId"),
            reason: api::text(e, "reason"),
            status: api::text(e, "status"),
            requested_by: api::text(e, "requestedBy"),
            reviewed_by: api::text(e, "reviewedBy"),
            own: &api::text(e, "requestedBy") == me,
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
                let done = act(
                    &visitor.api,
                    (Method::PUT, &uri),
                    &org,
                    Some(json!({"decision": decision})),
                )
                .await?;
                Ok(format!("exemption {id} is {}", api::text(&done, "status")))
            }
            "request" => {
                let body = json!({
                    "ruleId": field(&form, "ruleId"),
                    "entityId": field(&form, "entityId"),
                    "reason": field(&form, "reason"),
                });
                let done = act(
                    &visitor.api,
                    (Method::POST, "/api/compliance/exemptions"),
                    &org,
                    Some(body),
                )
                .await?;
                Ok(format!("exemption {} requested", api::text(&done, "id")))
            }
            _ => Err(unknown_action()),
        }
    }
    .await;
    show_exemptions(&console, &visitor, &page::again(org), Some(outcome))
        .await
        .unwrap_or_else(page::refused)
}
