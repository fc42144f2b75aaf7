//! Arbitrary bytes as an attribute document: the text-depth scan never overflows and
//! never reports less than the parsed depth,
//! the limits are enforced exactly, and evaluating an accepted document with a
//! wildcard-heavy rule set never panics.
#![no_main]

use compliance_core::*;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let text_depth = json_text_depth(text);
    let Ok(doc) = serde_json::from_str::<Value>(text) else { return };
    let s = shape(&doc);
    // An upper bound: with a duplicate key, the parser keeps the last value while the
    // text scan also counts the overwritten one. Safe for a pre-parse check.
    assert!(text_depth >= s.depth, "text depth {text_depth} below value depth {}", s.depth);
    let limits = AttributeLimits { max_depth: 6, max_keys: 40 };
    match Attributes::new(&doc, &limits) {
        Ok(attrs) => {
            assert!(s.depth <= 6 && s.keys <= 40);
            let rules: Vec<Rule> = serde_json::from_value(json!([
                {"id": "a", "name": "a", "target": "plugin", "severity": "error",
                 "field": "*.*.*", "operator": "notEmpty"},
                {"id": "b", "name": "b", "target": "plugin", "severity": "error",
                 "field": "$keys(*)", "operator": "notIn", "value": ["x"]},
                {"id": "c", "name": "c", "target": "plugin", "severity": "warning",
                 "field": "$count(*.0)", "operator": "gt", "value": 1,
                 "conditions": [{"field": "a.b", "operator": "contains", "value": "z",
                                 "dependsOnRule": "a"}]}
            ]))
            .unwrap_or_default();
            if let Ok(set) = RuleSet::compile(rules, &CompileOptions::default()) {
                let _ = set.evaluate(Target::Plugin, &attrs, &Waivers::none());
            }
        }
        Err(Error::AttributeLimitExceeded(e)) => {
            assert!(s.depth > 6 || s.keys > 40, "{e}");
        }
        Err(Error::AttributesNotObject) => assert!(!doc.is_object()),
        Err(other) => panic!("unexpected error {other}"),
    }
});
