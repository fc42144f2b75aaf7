//! compliance-core's behaviour, read against SEMANTICS.md section 1.

// Test code: a panic is how a test fails.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod conditions;
mod cron;
mod effective;
mod limits;
mod operators;
mod order_and_result;
mod properties;
mod validation;
mod violations;

use compliance_core::*;
use serde_json::{json, Value};

/// A minimal rule on `field`, for tables.
pub fn rule(id: &str, field: &str, operator: &str, value: Value) -> Rule {
    serde_json::from_value(json!({
        "id": id, "name": id, "target": "plugin", "severity": "error",
        "field": field, "operator": operator, "value": value,
    }))
    .unwrap()
}

/// Evaluates rules (as JSON) against a document for plugins.
pub fn evaluate(rules: Value, doc: &Value) -> Evaluation {
    evaluate_with(rules, doc, &Waivers::none())
}

pub fn evaluate_with(rules: Value, doc: &Value, waivers: &Waivers) -> Evaluation {
    let rules: Vec<Rule> = serde_json::from_value(rules).unwrap();
    let set = RuleSet::compile(rules, &CompileOptions::default()).unwrap();
    let attrs = Attributes::new(doc, &AttributeLimits::default()).unwrap();
    set.evaluate(Target::Plugin, &attrs, waivers)
}

/// Whether a single rule passes for the document.
pub fn passes(field: &str, operator: &str, value: Value, doc: &Value) -> bool {
    let set = RuleSet::compile(
        [rule("r", field, operator, value)],
        &CompileOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{field} {operator}: {e}"));
    let attrs = Attributes::new(doc, &AttributeLimits::default()).unwrap();
    set.evaluate(Target::Plugin, &attrs, &Waivers::none())
        .violations
        .is_empty()
}
