//! The organization's rules: the list with each rule's value, the editor (every
//! field of a rule, its conditions and chaining included) with a preview that asks
//! the dry-run endpoint what the rule being written finds in a pasted attribute
//! document, deletion, and a rule's history as a side-by-side difference of two
//! versions.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::Method;
use axum::response::Response;
use compliance_core::{ConditionMode, Operator, Rule, Scope, Severity, Target};
use serde::de::IgnoredAny;
use serde_json::{json, Map, Value};

use super::api::{self, act, segment, Named, Refusal};
use super::diff::{side_by_side, Line};
use super::governance::unknown_action;
use super::page::{self, Frame};
use super::session::{Posted, Visitor};
use super::{field, Console};
use crate::http::pipelines::Pipeline;
use crate::http::plugins::Plugin;
use crate::http::rules::{OrgRule, RuleVersion};
use crate::http::validate::Verdict;
use crate::services::{pipelines, plugins};
mod editor;
pub use editor::*;

/// A rule as a row of the list.
pub struct Row {
    id: String,
    name: String,
    target: String,
    severity: String,
    field: String,
    operator: String,
    value: String,
    priority: i64,
    conditions: usize,
}

/// A version of a rule, as the history lists it.
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
    rules: Vec<Row>,
    history_of: String,
    history: Vec<Version>,
    /// The two versions compared (empty when there are none).
    from: String,
    to: String,
    difference: Vec<Line>,
}

fn row(rule: &Rule) -> Row {
    Row {
        id: rule.id.clone(),
        name: rule.name.clone(),
        target: api::wire(&rule.target),
        severity: api::wire(&rule.severity),
        field: rule.field.clone(),
        operator: api::wire(&rule.operator),
        value: shown(&rule.value),
        priority: rule.priority,
        conditions: rule.conditions.len(),
    }
}

/// A value as the editor and the list show it: a string as itself, anything else as
/// its JSON.
fn shown(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

async fn show_rules(
    console: &Console,
    visitor: &Visitor,
    q: &HashMap<String, String>,
    outcome: Option<Result<String, Refusal>>,
) -> Result<Response, Refusal> {
    let mut frame = Frame::load(console, visitor, q, ("Rules", "/console/rules")).await?;
    if frame.org.is_empty() {
        return Ok(page::empty(frame));
    }
    let list = frame
        .list::<OrgRule>(
            visitor,
            ("listRules", "rules"),
            "/api/compliance/rules?limit=100",
            "rules",
        )
        .await?;
    let rules = list.items.iter().map(|r| row(&r.rule)).collect();
    let history_of = q.get("history").cloned().unwrap_or_default();
    let mut history = Vec::new();
    let (mut from_shown, mut to_shown) = (String::new(), String::new());
    let mut difference = Vec::new();
    if !history_of.is_empty() {
        let uri = format!("/api/compliance/rules/{}/history", segment(&history_of)?);
        let versions: Vec<RuleVersion> = frame
            .read(visitor, ("ruleHistory", "the rule's history"), &uri)
            .await?
            .unwrap_or_default();
        // Two versions side by side: those asked for, else the last two.
        let asked = |key: &str| q.get(key).and_then(|v| v.parse::<u32>().ok());
        let newest = versions.iter().map(|v| v.version).max().unwrap_or(1);
        let to = asked("to").unwrap_or(newest);
        let from = asked("from").unwrap_or(to.saturating_sub(1).max(1));
        let text_of = |number: u32| {
            versions
                .iter()
                .find(|v| v.version == number)
                .map(|v| serde_json::to_string_pretty(&v.rule).unwrap_or_default())
        };
        if let (Some(old), Some(new)) = (text_of(from), text_of(to)) {
            difference = side_by_side(&old, &new);
            (from_shown, to_shown) = (from.to_string(), to.to_string());
        }
        history = versions
            .into_iter()
            .map(|v| Version {
                version: v.version.to_string(),
                change: api::wire(&v.change),
                changed_at: api::instant(&v.changed_at),
                changed_by: v.changed_by,
            })
            .collect();
    }
    let code = frame.settle(outcome);
    Ok(page::render(
        &RulesPage {
            frame,
            rules,
            history_of,
            history,
            from: from_shown,
            to: to_shown,
            difference,
        },
        code,
    ))
}

/// `GET /console/rules` (`?history=<rule id>` shows its versions, and two of them
/// side by side: `from` and `to`, the last two when not named).
pub async fn rules(
    State(console): State<Console>,
    visitor: Visitor,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    show_rules(&console, &visitor, &q, None)
        .await
        .unwrap_or_else(page::refused)
}

/// `POST /console/rules`: `delete`.
pub async fn action(State(console): State<Console>, posted: Posted) -> Response {
    let Posted { visitor, form } = posted;
    let org = field(&form, "org").to_owned();
    let outcome = async {
        match field(&form, "action") {
            "delete" => {
                let id = segment(field(&form, "ruleId"))?;
                let uri = format!("/api/compliance/rules/{id}");
                act::<IgnoredAny>(&visitor.api, (Method::DELETE, &uri), &org, None).await?;
                Ok(format!("rule {id} deleted"))
            }
            _ => Err(unknown_action()),
        }
    }
    .await;
    show_rules(&console, &visitor, &page::again(org), Some(outcome))
        .await
        .unwrap_or_else(page::refused)
}
