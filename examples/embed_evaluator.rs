//! Embedding the evaluator: compile an organization's rules once, then evaluate
//! plugin attributes in-process, with no server.
//!
//! Run: cargo run -p examples --example embed_evaluator

use compliance_core::{
    AttributeLimits, Attributes, CompileOptions, Rule, RuleSet, Target, Waivers,
};
use serde_json::json;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rules: Vec<Rule> = serde_json::from_value(json!([
        {"id": "semver", "name": "Plugin versions are semver", "target": "plugin",
         "severity": "error", "field": "version", "operator": "regex",
         "value": "^\\d+\\.\\d+\\.\\d+$", "priority": 100},
        {"id": "public-needs-dockerfile", "name": "Public plugins ship a Dockerfile",
         "target": "plugin", "severity": "warning", "conditionMode": "any",
         "field": "accessModifier", "operator": "neq", "value": "public",
         "conditions": [{"field": "dockerfile", "operator": "exists"}]}
    ]))?;
    let rules = RuleSet::compile(rules, &CompileOptions::default())?;

    let upload = json!({"name": "eslint", "version": "latest", "accessModifier": "public"});
    let attributes = Attributes::new(&upload, &AttributeLimits::default())?;
    let result = rules.evaluate(Target::Plugin, &attributes, &Waivers::none());

    println!("{}", serde_json::to_string_pretty(&result)?);
    std::process::exit(if result.blocked { 1 } else { 0 });
}
