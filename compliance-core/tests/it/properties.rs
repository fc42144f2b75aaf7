//! Laws of evaluation, checked over generated rules and documents (proptest).

use compliance_core::*;
use proptest::prelude::*;
use serde_json::{json, Map, Value};

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        "[a-c0-9.]{0,4}".prop_map(Value::from),
        prop_oneof![Just("1.5"), Just("-2"), Just("inf"), Just(""), Just("a\nb")]
            .prop_map(Value::from),
    ]
}

/// JSON values, with keys drawn from a small alphabet so that paths often hit.
fn json_value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map("[abc]|0|1", inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<String, Value>>())),
        ]
    })
}

fn document() -> impl Strategy<Value = Value> {
    prop::collection::btree_map("[abc]", json_value(), 0..4)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

fn field() -> impl Strategy<Value = String> {
    let path = prop::collection::vec(
        prop_oneof![Just("a"), Just("b"), Just("c"), Just("0"), Just("*")],
        1..4,
    )
    .prop_map(|segments| segments.join("."));
    (
        path,
        prop_oneof![
            Just(""),
            Just("$count"),
            Just("$length"),
            Just("$keys"),
            Just("$lines")
        ],
    )
        .prop_map(|(path, function)| {
            if function.is_empty() {
                path
            } else {
                format!("{function}({path})")
            }
        })
}

fn operator() -> impl Strategy<Value = Operator> {
    prop::sample::select(Operator::ALL.to_vec())
}

fn rule_json() -> impl Strategy<Value = Value> {
    (
        field(),
        operator(),
        json_value(),
        0i64..10_001,
        prop::sample::select(vec!["warning", "error", "critical"]),
        prop::collection::vec((field(), operator(), json_value(), any::<bool>()), 0..3),
        any::<bool>(),
    )
        .prop_map(
            |(field, op, value, priority, severity, conditions, any_mode)| {
                let conditions: Vec<Value> = conditions
                    .into_iter()
                    .map(|(f, o, v, dep)| {
                        let mut c = json!({"field": f, "operator": o, "value": v});
                        if dep {
                            c["dependsOnRule"] = json!("r0");
                        }
                        c
                    })
                    .collect();
                json!({"name": "n", "target": "plugin", "severity": severity, "field": field,
                   "operator": op, "value": value, "priority": priority,
                   "conditions": conditions, "conditionMode": if any_mode { "any" } else { "all" }})
            },
        )
}

fn rule_set(rules: Vec<Value>) -> Option<RuleSet> {
    let rules: Vec<Rule> = rules
        .into_iter()
        .enumerate()
        .map(|(i, mut r)| {
            r["id"] = json!(format!("r{i}"));
            r["name"] = json!(format!("rule {i}"));
            serde_json::from_value(r).unwrap()
        })
        .collect();
    let options = CompileOptions {
        dependencies: Dependencies::Lenient,
        ..Default::default()
    };
    RuleSet::compile(rules, &options).ok()
}

fn holds(field: &str, operator: Operator, value: &Value, doc: &Value) -> Option<bool> {
    let rule: Rule = serde_json::from_value(json!({"id": "r", "name": "r", "target": "plugin",
        "severity": "error", "field": field, "operator": operator, "value": value}))
    .unwrap();
    let set = RuleSet::compile([rule], &CompileOptions::default()).ok()?;
    let attrs = Attributes::new(
        doc,
        &AttributeLimits {
            max_depth: 64,
            max_keys: 10_000,
        },
    )
    .ok()?;
    Some(
        set.evaluate(Target::Plugin, &attrs, &Waivers::none())
            .violations
            .is_empty(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn evaluation_is_deterministic_and_never_panics(
        rules in prop::collection::vec(rule_json(), 1..6),
        doc in document(),
    ) {
        if let Some(set) = rule_set(rules) {
            let limits = AttributeLimits { max_depth: 64, max_keys: 10_000 };
            let attrs = Attributes::new(&doc, &limits).unwrap();
            let first = set.evaluate(Target::Plugin, &attrs, &Waivers::none());
            let second = set.evaluate(Target::Plugin, &attrs, &Waivers::none());
            prop_assert_eq!(&first, &second);
            prop_assert_eq!(first.blocked, first.violations.iter().any(|v| v.severity().blocks()));
            prop_assert_eq!(first.rules_evaluated, set.len());
            // Waiving every rule empties violations and unblocks.
            let all = Waivers::for_rules((0..set.len()).map(|i| format!("r{i}")));
            let waived = set.evaluate(Target::Plugin, &attrs, &all);
            prop_assert!(!waived.blocked);
            prop_assert!(waived.violations.is_empty());
            prop_assert_eq!(waived.exempted, first.violations);
        }
    }

    #[test]
    fn documents_within_the_limits_are_evaluated_and_others_refused(
        doc in document(), max_depth in 1usize..8, max_keys in 0usize..30,
    ) {
        let limits = AttributeLimits { max_depth, max_keys };
        let s = shape(&doc);
        match Attributes::new(&doc, &limits) {
            Ok(_) => prop_assert!(s.depth <= max_depth && s.keys <= max_keys),
            Err(Error::AttributeLimitExceeded(e)) => {
                prop_assert!(s.depth > max_depth || s.keys > max_keys);
                let expected = if s.depth > max_depth { (LimitKind::Depth, s.depth) } else { (LimitKind::Keys, s.keys) };
                prop_assert_eq!((e.limit, e.actual), expected);
            }
            Err(other) => prop_assert!(false, "unexpected {other}"),
        }
    }

    #[test]
    fn negative_operators_negate_on_a_present_value(v in json_value(), expected in json_value()) {
        prop_assume!(!v.is_null());
        let doc = json!({"f": v});
        let pairs = [
            (Operator::Eq, Operator::Neq, expected.clone()),
            (Operator::Contains, Operator::NotContains, expected.clone()),
            (Operator::Exists, Operator::NotExists, Value::Null),
        ];
        for (positive, negative, value) in pairs {
            let p = holds("f", positive, &value, &doc).unwrap();
            let n = holds("f", negative, &value, &doc).unwrap();
            prop_assert_ne!(p, n, "{} / {}", positive, negative);
        }
        // in/notIn negate for a value that is not an array (an array is checked
        // element by element: wholly in, or wholly out).
        if !v.is_array() {
            let set = Value::Array(vec![expected.clone(), json!(1)]);
            let p = holds("f", Operator::In, &set, &doc).unwrap();
            let n = holds("f", Operator::NotIn, &set, &doc).unwrap();
            prop_assert_ne!(p, n);
        }
    }

    #[test]
    fn arbitrary_rules_compile_or_fail_cleanly(rule in rule_json()) {
        if let Ok(rule) = serde_json::from_value::<Rule>(rule) {
            let _ = rule.validate(&RegexLimits::default());
        }
    }
}
