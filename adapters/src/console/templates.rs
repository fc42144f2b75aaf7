//! Templates and policies: the platform's template rules (what each adds, applied
//! into the organization under a name of its choosing), its template policies (the
//! rules each brings, cloned all or nothing), and the organization's own policies.

use std::collections::HashMap;

use askama::Template;
use axum::http::Method;
use axum::response::Response;
use serde::de::IgnoredAny;
use serde_json::json;

use super::api::{self, act, segment, Refusal};
use super::governance::unknown_action;
use super::page::{self, Frame};
use super::session::Visitor;
use super::{field, Console};
use crate::http::policies::Policy;
use crate::http::rules::OrgRule;
use crate::http::templates::Templates;

/// Where the page lives.
pub const PATH: &str = "/console/rules/templates";

/// A template rule: what applying it adds.
pub struct Adds {
    id: String,
    name: String,
    target: String,
    severity: String,
    /// `field operator value`, and how many further conditions.
    test: String,
}

/// A policy and the rules it brings, by name.
pub struct Bundle {
    id: String,
    name: String,
    description: String,
    rules: Vec<String>,
}

#[derive(Template)]
#[template(path = "console/templates.html")]
struct TemplatesPage {
    frame: Frame,
    rules: Vec<Adds>,
    template_policies: Vec<Bundle>,
    policies: Vec<Bundle>,
}

fn adds(rule: &OrgRule) -> Adds {
    let r = &rule.rule;
    let mut test = format!(
        "{} {} {}",
        r.field,
        api::wire(&r.operator),
        api::wire(&r.value)
    );
    if !r.conditions.is_empty() {
        test.push_str(&format!(
            " (and {} further condition(s))",
            r.conditions.len()
        ));
    }
    Adds {
        id: r.id.clone(),
        name: r.name.clone(),
        target: api::wire(&r.target),
        severity: api::wire(&r.severity),
        test,
    }
}

/// A policy with its rules named from `names` (by id; an id not found as itself).
fn bundle(policy: Policy, names: &HashMap<String, String>) -> Bundle {
    Bundle {
        rules: policy
            .rule_ids
            .iter()
            .map(|id| names.get(id).cloned().unwrap_or_else(|| id.clone()))
            .collect(),
        id: policy.id,
        name: policy.name,
        description: policy.description.unwrap_or_default(),
    }
}

/// The page: [`page::get`] and [`page::post`] are its handlers.
pub struct Page;

impl page::Acting for Page {
    const PLACE: (&'static str, &'static str) = ("Templates and policies", PATH);

    async fn show(
        _console: &Console,
        visitor: &Visitor,
        mut frame: Frame,
        _q: &HashMap<String, String>,
        outcome: Option<Result<String, Refusal>>,
    ) -> Result<Response, Refusal> {
        let templates: Option<Templates> = frame
            .read(
                visitor,
                ("listTemplates", "the templates"),
                "/api/compliance/templates",
            )
            .await?;
        let own = frame
            .list::<Policy>(
                visitor,
                ("listPolicies", "the policies"),
                "/api/compliance/policies?limit=100",
                "policies",
            )
            .await?;
        let own_rules = frame
            .list::<OrgRule>(
                visitor,
                ("listRules", "rules"),
                "/api/compliance/rules?limit=100",
                "rules",
            )
            .await?;
        let Templates { rules, policies } = templates.unwrap_or(Templates {
            rules: Vec::new(),
            policies: Vec::new(),
        });
        let names: HashMap<String, String> = rules
            .iter()
            .chain(own_rules.items.iter())
            .map(|r| (r.rule.id.clone(), r.rule.name.clone()))
            .collect();
        let code = frame.settle(outcome);
        Ok(page::render(
            &TemplatesPage {
                frame,
                rules: rules.iter().map(adds).collect(),
                template_policies: policies.into_iter().map(|p| bundle(p, &names)).collect(),
                policies: own.items.into_iter().map(|p| bundle(p, &names)).collect(),
            },
            code,
        ))
    }

    /// `POST /console/rules/templates`: `apply` a template rule (optionally renamed),
    /// `clone` a template policy with its rules.
    async fn act(
        visitor: &Visitor,
        form: &HashMap<String, String>,
        org: &str,
    ) -> Result<String, Refusal> {
        let id = segment(field(form, "templateId"))?;
        let name = field(form, "name");
        match field(form, "action") {
            "apply" => {
                let name = Some(name).filter(|n| !n.is_empty());
                let body = json!({ "templateId": id, "name": name });
                let applied: OrgRule = act(
                    &visitor.api,
                    (Method::POST, "/api/compliance/templates/apply"),
                    org,
                    Some(body),
                )
                .await?;
                Ok(format!(
                    "rule {} added from the template",
                    applied.rule.name
                ))
            }
            "clone" => {
                let uri = format!("/api/compliance/templates/policies/{id}/clone");
                let body = (!name.is_empty()).then(|| json!({ "name": name }));
                act::<IgnoredAny>(&visitor.api, (Method::POST, &uri), org, body).await?;
                Ok(format!("policy {id} cloned with its rules"))
            }
            _ => Err(unknown_action()),
        }
    }
}
