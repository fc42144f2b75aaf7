//! Conditions in `all` and `any` modes, and `dependsOnRule` chaining (SEMANTICS.md 1.4).

use super::evaluate;
use serde_json::json;

fn ids(e: &compliance_core::Evaluation) -> Vec<&str> {
    e.violations.iter().map(|v| v.rule_id()).collect()
}

#[test]
fn all_mode_needs_every_predicate_and_reports_the_failing_one() {
    let rules = json!([{
        "id": "r", "name": "r", "target": "plugin", "severity": "error",
        "field": "accessModifier", "operator": "eq", "value": "private",
        "conditions": [{"field": "computeType", "operator": "in", "value": ["SMALL", "MEDIUM"]}]
    }]);
    let ok = evaluate(
        rules.clone(),
        &json!({"accessModifier": "private", "computeType": "SMALL"}),
    );
    assert!(ok.violations.is_empty());
    let bad = evaluate(
        rules,
        &json!({"accessModifier": "private", "computeType": "LARGE"}),
    );
    assert_eq!(bad.violations.len(), 1);
    assert_eq!(bad.violations[0].field(), "computeType");
    assert_eq!(bad.violations[0].actual(), Some(json!("LARGE")));
}

#[test]
fn any_mode_expresses_an_implication() {
    // "accessModifier neq public, or dockerfile exists".
    let rules = json!([{
        "id": "r", "name": "public needs dockerfile", "target": "plugin", "severity": "error",
        "field": "accessModifier", "operator": "neq", "value": "public",
        "conditionMode": "any",
        "conditions": [{"field": "dockerfile", "operator": "exists"}]
    }]);
    assert!(
        evaluate(rules.clone(), &json!({"accessModifier": "private"}))
            .violations
            .is_empty()
    );
    assert!(evaluate(
        rules.clone(),
        &json!({"accessModifier": "public", "dockerfile": "FROM x"})
    )
    .violations
    .is_empty());
    let bad = evaluate(rules, &json!({"accessModifier": "public"}));
    assert_eq!(bad.violations.len(), 1);
    assert_eq!(bad.violations[0].field(), "accessModifier");
}

fn chained(mode: &str) -> serde_json::Value {
    json!([
        {"id": "is-public", "name": "is public", "target": "plugin", "severity": "warning",
         "field": "accessModifier", "operator": "eq", "value": "public", "priority": 0},
        {"id": "needs-docs", "name": "public plugins have a description", "target": "plugin",
         "severity": "error", "priority": 100, "conditionMode": mode,
         "field": "name", "operator": "exists",
         "conditions": [{"field": "description", "operator": "lengthGt", "value": 10,
                         "dependsOnRule": "is-public"}]}
    ])
}

#[test]
fn a_dependent_condition_counts_only_when_its_rule_passed() {
    // The dependency runs first even though its priority is lower.
    let public_short = evaluate(
        chained("all"),
        &json!({"name": "p", "accessModifier": "public", "description": "short"}),
    );
    assert_eq!(ids(&public_short), ["needs-docs"]);
    assert!(public_short.blocked);

    // The dependency failed: the condition is skipped, the rule passes on its own predicate.
    let private_short = evaluate(
        chained("all"),
        &json!({"name": "p", "accessModifier": "private", "description": "short"}),
    );
    assert_eq!(ids(&private_short), ["is-public"]);
    assert!(!private_short.blocked, "a warning never blocks");
}

#[test]
fn any_mode_with_a_skipped_condition_falls_back_to_the_own_predicate() {
    let rules = json!([
        {"id": "dep", "name": "dep", "target": "plugin", "severity": "warning",
         "field": "x", "operator": "exists"},
        {"id": "r", "name": "r", "target": "plugin", "severity": "error",
         "conditionMode": "any", "field": "a", "operator": "eq", "value": 1,
         "conditions": [{"field": "b", "operator": "eq", "value": 1, "dependsOnRule": "dep"}]}
    ]);
    // dep fails, so the b-condition is skipped even though it holds.
    let e = evaluate(rules.clone(), &json!({"a": 2, "b": 1}));
    assert_eq!(ids(&e), ["dep", "r"]);
    // dep passes, so the b-condition counts and rescues the rule.
    let e = evaluate(rules, &json!({"x": true, "a": 2, "b": 1}));
    assert!(e.violations.is_empty());
}

#[test]
fn chains_of_dependencies_run_in_dependency_order() {
    let rules = json!([
        {"id": "c", "name": "c", "target": "plugin", "severity": "error", "priority": 10000,
         "field": "n", "operator": "exists",
         "conditions": [{"field": "c", "operator": "eq", "value": 1, "dependsOnRule": "b"}]},
        {"id": "b", "name": "b", "target": "plugin", "severity": "warning", "priority": 5000,
         "field": "n", "operator": "exists",
         "conditions": [{"field": "b", "operator": "eq", "value": 1, "dependsOnRule": "a"}]},
        {"id": "a", "name": "a", "target": "plugin", "severity": "warning", "priority": 0,
         "field": "a", "operator": "eq", "value": 1}
    ]);
    let rules_vec: Vec<compliance_core::Rule> = serde_json::from_value(rules.clone()).unwrap();
    let set = compliance_core::RuleSet::compile(rules_vec, &Default::default()).unwrap();
    let order: Vec<&str> = set
        .rules(compliance_core::Target::Plugin)
        .map(|r| r.id.as_str())
        .collect();
    assert_eq!(order, ["a", "b", "c"]);
    // a passes, b counts its condition and fails, so c's condition is skipped.
    let e = evaluate(rules, &json!({"n": 1, "a": 1, "b": 2, "c": 2}));
    assert_eq!(ids(&e), ["b"]);
}
