//! A violation's own form: what it shares with its rule, what it copies of the
//! document, its message written on demand, and its wire form read back.

use super::rule;
use compliance_core::*;
use serde_json::{json, Value};

fn run(rules: Vec<Rule>, doc: &Value) -> Evaluation {
    let set = RuleSet::compile(rules, &CompileOptions::default()).unwrap();
    let attrs = Attributes::new(doc, &AttributeLimits::default()).unwrap();
    set.evaluate(Target::Plugin, &attrs, &Waivers::none())
}

fn by_id<'e>(e: &'e Evaluation, id: &str) -> &'e Violation {
    e.violations.iter().find(|v| v.rule_id() == id).unwrap()
}

#[test]
fn rules_failing_on_the_same_values_share_one_copy_and_others_get_their_own() {
    let long = "z".repeat(300);
    let doc = json!({"items": ["a", "b", long], "obj": {"k": [1, 2, 3], "l": "m"}});
    let e = run(
        vec![
            rule("all-x", "items.*", "eq", json!("x")),
            rule("all-x-again", "items.*", "eq", json!("y")),
            rule("not-b", "items.*", "neq", json!("b")),
            rule("short", "items.*", "lengthLt", json!(2)),
            rule("obj", "obj", "countLt", json!(1)),
            rule("obj-again", "obj", "eq", json!({})),
        ],
        &doc,
    );
    let cut: String = "z".repeat(MAX_ACTUAL_CHARS);
    assert_eq!(by_id(&e, "all-x").actual(), Some(json!(["a", "b", cut])));
    assert_eq!(
        by_id(&e, "all-x-again").actual(),
        by_id(&e, "all-x").actual()
    );
    assert_eq!(
        by_id(&e, "all-x").truncated(),
        by_id(&e, "all-x-again").truncated()
    );
    assert_eq!(by_id(&e, "all-x").truncated()[0].at, "/2");
    // Another predicate over the same path fails on other values: its own copy.
    assert_eq!(by_id(&e, "not-b").actual(), Some(json!("b")));
    assert!(by_id(&e, "not-b").truncated().is_empty());
    assert_eq!(by_id(&e, "short").actual(), Some(json!(cut)));
    let obj = json!({"k": [1, 2, 3], "l": "m"});
    assert_eq!(by_id(&e, "obj").actual(), Some(obj.clone()));
    assert_eq!(by_id(&e, "obj-again").actual(), Some(obj));
    // Each keeps its own rule's facts.
    assert_eq!(by_id(&e, "obj-again").operator(), Operator::Eq);
    assert_eq!(by_id(&e, "obj-again").value(), &json!({}));
}

#[test]
fn every_kind_of_actual_reads_back_and_round_trips_on_the_wire() {
    let doc = json!({"s": "short", "n": 7, "f": 1.5, "b": true, "long": "é".repeat(400),
        "list": [1, "two", null, {"three": 3}], "obj": {"a\"b": "c\nd"}});
    let fields = [
        "s",
        "n",
        "f",
        "b",
        "long",
        "list",
        "obj",
        "missing",
        "$count(list)",
        "$keys(obj)",
    ];
    let rules: Vec<Rule> = fields
        .iter()
        .map(|f| rule(f, f, "eq", json!("never")))
        .collect();
    let e = run(rules, &doc);
    assert_eq!(e.violations.len(), fields.len());
    assert_eq!(by_id(&e, "s").actual(), Some(json!("short")));
    assert_eq!(by_id(&e, "n").actual(), Some(json!(7)));
    assert_eq!(by_id(&e, "f").actual(), Some(json!(1.5)));
    assert_eq!(by_id(&e, "b").actual(), Some(json!(true)));
    assert_eq!(by_id(&e, "missing").actual(), None);
    assert_eq!(by_id(&e, "$count(list)").actual(), Some(json!(4)));
    assert_eq!(by_id(&e, "$keys(obj)").actual(), Some(json!(["a\"b"])));
    assert_eq!(
        by_id(&e, "long").actual(),
        Some(json!("é".repeat(MAX_ACTUAL_CHARS)))
    );
    assert_eq!(by_id(&e, "long").truncated()[0].bytes, Some(800));
    assert_eq!(by_id(&e, "list").actual(), Some(doc["list"].clone()));
    assert_eq!(by_id(&e, "obj").actual(), Some(doc["obj"].clone()));
    for v in &e.violations {
        let wire = serde_json::to_value(v).unwrap();
        assert_eq!(wire["ruleId"], v.rule_id());
        assert_eq!(wire["message"], v.message());
        assert_eq!(wire.get("actual").cloned(), v.actual());
        assert_eq!(wire.get("truncated").is_some(), !v.truncated().is_empty());
        let back: Violation = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(&back, v, "{wire}");
        assert_eq!(back.message(), v.message());
        // And as text, the way the API sends it.
        let text = serde_json::to_string(v).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), wire);
    }
    // The message is written from the bounded value, and cut for a line.
    let long = by_id(&e, "long").message();
    assert!(
        long.starts_with("long: `long` must equal \"never\"; found \"éé"),
        "{long}"
    );
    assert!(long.ends_with('…') && long.len() < 200, "{long}");
    assert_eq!(
        by_id(&e, "missing").message(),
        "missing: `missing` must equal \"never\"; the field is missing"
    );
    assert_eq!(
        by_id(&e, "obj").to_string(),
        r#"obj: `obj` must equal "never"; found {"a\"b":"c\nd"}"#
    );
}

#[test]
fn a_violation_from_the_wire_without_a_message_gets_one() {
    let v: Violation = serde_json::from_value(json!({"ruleId": "r", "ruleName": "R",
        "severity": "warning", "field": "x", "operator": "lengthGt", "value": 3,
        "actual": "ab"}))
    .unwrap();
    assert_eq!(
        v.message(),
        "R: `x` must be longer than 3 characters; found \"ab\""
    );
    assert!(serde_json::from_value::<Violation>(json!({"ruleId": "r"})).is_err());
}
