//! Validation as a rule is saved, and the checks made when a set is compiled:
//! each problem names its field (SEMANTICS.md 1.2-1.4).

use super::rule;
use compliance_core::*;
use serde_json::json;

fn problems(rules: Vec<Rule>, options: &CompileOptions) -> Vec<Problem> {
    match RuleSet::compile(rules, options) {
        Err(Error::InvalidRules { problems }) => problems,
        other => panic!("expected invalid rules, got {other:?}"),
    }
}

fn fields(rules: Vec<Rule>) -> Vec<String> {
    problems(rules, &CompileOptions::default())
        .into_iter()
        .map(|p| p.field)
        .collect()
}

#[test]
fn each_bad_field_is_named() {
    let cases = [
        (rule("r", "a..b", "exists", json!(null)), "field"),
        (rule("r", "$size(a)", "exists", json!(null)), "field"),
        (rule("r", "a", "in", json!("not an array")), "value"),
        (rule("r", "a", "notIn", json!({"a": 1})), "value"),
        (rule("r", "a", "gt", json!("5")), "value"),
        (rule("r", "a", "regex", json!("(unclosed")), "value"),
        (rule("r", "a", "regex", json!("x".repeat(101))), "value"),
        (rule("r", "a", "regex", json!(42)), "value"),
        (rule("r", "a", "countGt", json!(-1)), "value"),
        (rule("r", "a", "lengthLt", json!(0.5)), "value"),
    ];
    for (rule, field) in cases {
        let operator = rule.operator;
        assert_eq!(fields(vec![rule]), [field], "{operator}");
    }
}

#[test]
fn priority_name_and_conditions_are_checked() {
    let mut r = rule("r", "a", "exists", json!(null));
    r.priority = 10_001;
    r.name = " ".into();
    r.conditions = vec![
        Condition {
            field: "ok".into(),
            operator: Operator::Exists,
            value: json!(null),
            depends_on_rule: None,
        },
        Condition {
            field: "".into(),
            operator: Operator::In,
            value: json!(1),
            depends_on_rule: Some("r".into()),
        },
    ];
    let mut found = fields(vec![r]);
    found.sort();
    assert_eq!(
        found,
        [
            "conditions[1].dependsOnRule",
            "conditions[1].field",
            "conditions[1].value",
            "name",
            "priority"
        ]
    );
    let mut negative = rule("r", "a", "exists", json!(null));
    negative.priority = -1;
    assert_eq!(fields(vec![negative]), ["priority"]);
    let mut edge = rule("r", "a", "exists", json!(null));
    edge.priority = 10_000;
    assert!(edge.validate(&RegexLimits::default()).is_ok());
}

#[test]
fn the_regex_cap_is_configurable() {
    let r = rule("r", "a", "regex", json!("abcdef"));
    let tight = RegexLimits {
        max_length: 5,
        ..RegexLimits::default()
    };
    assert!(r.validate(&tight).is_err());
    assert!(r.validate(&RegexLimits::default()).is_ok());
}

#[test]
fn problems_of_a_set_name_their_rule() {
    let found = problems(
        vec![
            rule("good", "a", "exists", json!(null)),
            rule("bad", "a", "in", json!(1)),
        ],
        &CompileOptions::default(),
    );
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].rule.as_deref(), Some("bad"));
    let text = Error::InvalidRules { problems: found }.to_string();
    assert!(text.contains("bad") && text.contains("value"), "{text}");
}

fn depends(id: &str, on: &str) -> Rule {
    let mut r = rule(id, "a", "exists", json!(null));
    r.conditions.push(Condition {
        field: "b".into(),
        operator: Operator::Exists,
        value: json!(null),
        depends_on_rule: Some(on.into()),
    });
    r
}

#[test]
fn strict_sets_refuse_unknown_references_cycles_and_duplicate_ids() {
    let unknown = problems(vec![depends("a", "ghost")], &CompileOptions::default());
    assert_eq!(unknown[0].field, "conditions[0].dependsOnRule");

    let cycle = problems(
        vec![
            depends("a", "b"),
            depends("b", "c"),
            depends("c", "a"),
            rule("d", "x", "exists", json!(null)),
        ],
        &CompileOptions::default(),
    );
    assert_eq!(cycle.len(), 3, "{cycle:?}");
    assert!(cycle.iter().all(|p| p.message.contains("cycle")));

    let duplicate = problems(
        vec![
            rule("a", "x", "exists", json!(null)),
            rule("a", "y", "exists", json!(null)),
        ],
        &CompileOptions::default(),
    );
    assert_eq!(duplicate[0].field, "id");

    let mut pipeline = rule("p", "x", "exists", json!(null));
    pipeline.target = Target::Pipeline;
    let cross = problems(
        vec![depends("a", "p"), pipeline],
        &CompileOptions::default(),
    );
    assert!(cross[0].message.contains("another target"));
}

#[test]
fn lenient_sets_skip_conditions_they_cannot_honour() {
    let lenient = CompileOptions {
        dependencies: Dependencies::Lenient,
        ..Default::default()
    };
    // A cycle a <-> b, and c depending on a (behind the cycle, not on it).
    let set = RuleSet::compile(
        vec![
            depends("a", "b"),
            depends("b", "a"),
            depends("c", "a"),
            depends("d", "ghost"),
        ],
        &lenient,
    )
    .unwrap();
    let order: Vec<&str> = set.rules(Target::Plugin).map(|r| r.id.as_str()).collect();
    assert_eq!(order.len(), 4);
    let pos = |id: &str| order.iter().position(|x| *x == id).unwrap();
    assert!(pos("a") < pos("c"), "c still runs after a: {order:?}");

    // Conditions on the cycle and on the ghost are skipped: `b` is absent yet all pass
    // on their own predicate `a`; c's condition counts because a passed.
    let doc = json!({"a": 1});
    let attrs = Attributes::new(&doc, &AttributeLimits::default()).unwrap();
    let e = set.evaluate(Target::Plugin, &attrs, &Waivers::none());
    let failed: Vec<&str> = e.violations.iter().map(|v| v.rule_id()).collect();
    assert_eq!(failed, ["c"]);
}
