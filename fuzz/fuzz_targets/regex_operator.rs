//! The regex operator on an arbitrary pattern and subject: a pattern over the cap or
//! invalid is refused when the rule is compiled, nothing panics, and matching is
//! linear (the regex crate guarantees it; libFuzzer's -timeout catches a stall).
#![no_main]

use compliance_core::*;
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(|input: (&str, &str)| {
    let (pattern, subject) = input;
    let rule: Rule = match serde_json::from_value(json!({
        "id": "r", "name": "r", "target": "plugin", "severity": "error",
        "field": "s", "operator": "regex", "value": pattern,
    })) {
        Ok(rule) => rule,
        Err(_) => return,
    };
    let compiled = RuleSet::compile([rule], &CompileOptions::default());
    if pattern.chars().count() > DEFAULT_MAX_REGEX_LENGTH {
        assert!(compiled.is_err(), "a pattern over the cap was accepted");
    }
    let Ok(set) = compiled else { return };
    let doc = json!({ "s": subject, "list": [subject, subject] });
    let Ok(attrs) = Attributes::new(&doc, &AttributeLimits::default()) else { return };
    let result = set.evaluate(Target::Plugin, &attrs, &Waivers::none());
    assert!(result.violations.len() <= 1);
    assert_eq!(result.blocked, !result.violations.is_empty());
});
