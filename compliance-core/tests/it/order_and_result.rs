//! Priority order, blocked versus warning, violations' fields and exemptions
//! (SEMANTICS.md 1.5).

use super::{evaluate, evaluate_with};
use compliance_core::*;
use serde_json::json;

fn three_rules() -> serde_json::Value {
    json!([
        {"id": "low", "name": "b-low", "target": "plugin", "severity": "critical",
         "field": "x", "operator": "exists", "priority": 1},
        {"id": "tie2", "name": "a-tie", "target": "plugin", "severity": "warning",
         "field": "x", "operator": "exists", "priority": 50},
        {"id": "tie1", "name": "a-tie", "target": "plugin", "severity": "warning",
         "field": "x", "operator": "exists", "priority": 50},
        {"id": "name-b", "name": "b", "target": "plugin", "severity": "warning",
         "field": "x", "operator": "exists", "priority": 50},
        {"id": "high", "name": "z-high", "target": "plugin", "severity": "error",
         "field": "x", "operator": "exists", "priority": 10000},
        {"id": "pipe", "name": "pipeline only", "target": "pipeline", "severity": "error",
         "field": "x", "operator": "exists"}
    ])
}

#[test]
fn violations_come_in_priority_order_with_ties_by_name_then_id() {
    let e = evaluate(three_rules(), &json!({}));
    let order: Vec<&str> = e.violations.iter().map(|v| v.rule_id()).collect();
    assert_eq!(order, ["high", "tie1", "tie2", "name-b", "low"]);
    assert_eq!(
        e.rules_evaluated, 5,
        "the pipeline rule does not apply to a plugin"
    );
    assert!(e.blocked);
}

#[test]
fn warnings_never_block() {
    let rules = json!([{"id": "w", "name": "w", "target": "plugin", "severity": "warning",
                        "field": "x", "operator": "exists"}]);
    let e = evaluate(rules, &json!({}));
    assert_eq!(e.violations.len(), 1);
    assert!(!e.blocked);
}

#[test]
fn a_violation_carries_what_the_api_reports() {
    let rules = json!([{"id": "semver", "name": "Semver", "target": "plugin", "severity": "critical",
                        "field": "version", "operator": "regex", "value": "^\\d+\\.\\d+\\.\\d+$"}]);
    let e = evaluate(rules, &json!({"version": "latest"}));
    let v = serde_json::to_value(&e.violations[0]).unwrap();
    assert_eq!(v["ruleId"], "semver");
    assert_eq!(v["ruleName"], "Semver");
    assert_eq!(v["severity"], "critical");
    assert_eq!(v["field"], "version");
    assert_eq!(v["operator"], "regex");
    assert_eq!(v["value"], "^\\d+\\.\\d+\\.\\d+$");
    assert_eq!(v["actual"], "latest");
    let message = v["message"].as_str().unwrap();
    assert!(
        message.contains("Semver") && message.contains("latest"),
        "{message}"
    );
    assert!(!message.contains('\n'));
    let whole = serde_json::to_value(&e).unwrap();
    assert_eq!(whole["blocked"], true);
    assert_eq!(whole["rulesEvaluated"], 1);
    assert!(whole["exempted"].as_array().unwrap().is_empty());
}

#[test]
fn a_missing_field_has_no_actual_and_several_failures_are_listed() {
    let rules = json!([{"id": "r", "name": "r", "target": "plugin", "severity": "error",
                        "field": "steps.*.v", "operator": "eq", "value": 1}]);
    let missing = evaluate(rules.clone(), &json!({}));
    assert_eq!(missing.violations[0].actual(), None);
    assert!(missing.violations[0].message().contains("missing"));
    let several = evaluate(rules, &json!({"steps": [{"v": 1}, {"v": 2}, {"v": 3}]}));
    assert_eq!(several.violations[0].actual(), Some(json!([2, 3])));
}

#[test]
fn an_exemption_moves_a_violation_to_exempted_and_stops_it_blocking() {
    let rules = json!([
        {"id": "a", "name": "a", "target": "plugin", "severity": "critical", "field": "x", "operator": "exists"},
        {"id": "b", "name": "b", "target": "plugin", "severity": "warning", "field": "y", "operator": "exists"}
    ]);
    let e = evaluate_with(rules, &json!({}), &Waivers::for_rules(["a"]));
    assert!(!e.blocked);
    assert_eq!(e.exempted.len(), 1);
    assert_eq!(e.exempted[0].rule_id(), "a");
    assert_eq!(e.violations.len(), 1);
    assert_eq!(e.violations[0].rule_id(), "b");
}

#[test]
fn only_approved_unexpired_exemptions_for_the_entity_waive() {
    use chrono::{TimeZone, Utc};
    let now = Utc.with_ymd_and_hms(2026, 6, 1, 12, 0, 0).unwrap();
    let exemption = |status, expires_at, entity: &str| Exemption {
        rule_id: "r".into(),
        entity_id: entity.into(),
        status,
        expires_at,
    };
    let cases = [
        (exemption(ExemptionStatus::Approved, None, "e"), true),
        (
            exemption(
                ExemptionStatus::Approved,
                Some(now + chrono::Duration::seconds(1)),
                "e",
            ),
            true,
        ),
        (exemption(ExemptionStatus::Approved, Some(now), "e"), false),
        (exemption(ExemptionStatus::Approved, None, "other"), false),
        (exemption(ExemptionStatus::Requested, None, "e"), false),
        (exemption(ExemptionStatus::Rejected, None, "e"), false),
        (exemption(ExemptionStatus::Revoked, None, "e"), false),
    ];
    for (ex, waives) in cases {
        assert_eq!(
            Waivers::for_entity(std::slice::from_ref(&ex), "e", now).waives("r"),
            waives,
            "{ex:?}"
        );
    }
}

#[test]
fn rules_without_an_id_are_known_by_their_name() {
    let rules = json!([{"name": "named", "target": "plugin", "severity": "error",
                        "field": "x", "operator": "exists"}]);
    let e = evaluate(rules, &json!({}));
    assert_eq!(e.violations[0].rule_id(), "named");
}
