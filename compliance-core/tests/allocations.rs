//! A document that passes every rule allocates nothing per rule: counted with dhat's
//! heap profiler in testing mode, over the benchmark workload (benches/data). The
//! one allocation per evaluation is the scratch table of memoized path prefixes.

// Test code: a panic is how a test fails.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use compliance_core::*;
use serde_json::Value;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

fn workload(copies: usize) -> (RuleSet, Value) {
    let rules: Vec<Rule> =
        serde_json::from_str(include_str!("../../benches/data/rules-100.json")).unwrap();
    let rules = (0..copies).flat_map(|copy| {
        rules.iter().cloned().map(move |mut r| {
            r.id = format!("{}-{copy}", r.id);
            r
        })
    });
    let set = RuleSet::compile(rules, &CompileOptions::default()).unwrap();
    let doc: Value =
        serde_json::from_str(include_str!("../../benches/data/pipeline.json")).unwrap();
    (set, doc)
}

fn blocks_allocated_by(set: &RuleSet, doc: &Value) -> u64 {
    let attrs = Attributes::new(doc, &AttributeLimits::default()).unwrap();
    // Warm up: the regex engine fills its per-thread cache on first use.
    let warm = set.evaluate(Target::Pipeline, &attrs, &Waivers::none());
    assert!(
        warm.violations.is_empty(),
        "the workload must pass: {:?}",
        warm.violations
    );
    let before = dhat::HeapStats::get().total_blocks;
    let result = set.evaluate(Target::Pipeline, &attrs, &Waivers::none());
    let after = dhat::HeapStats::get().total_blocks;
    assert_eq!(result.rules_evaluated, set.len());
    after - before
}

/// dhat counts the allocations of the whole process, so the checks run one after the
/// other in one test: with several tests, the harness's own thread allocates when
/// another test ends (printing its result, starting the next), and a count taken at
/// that moment includes it (CI once saw 120 blocks against 119 that way).
#[test]
fn allocations_are_bounded_by_the_rules_not_the_document() {
    let _profiler = dhat::Profiler::builder().testing().build();
    a_passing_document_allocates_nothing_per_rule();
    a_failing_document_allocates_per_violation_not_per_byte();
    a_reused_result_of_scalar_failures_allocates_nothing();
}

fn a_passing_document_allocates_nothing_per_rule() {
    let (hundred, doc) = workload(1);
    let (thousand, _) = workload(10);
    let for_hundred = blocks_allocated_by(&hundred, &doc);
    let for_thousand = blocks_allocated_by(&thousand, &doc);
    assert!(for_hundred <= 1, "{for_hundred} allocations for 100 rules");
    assert_eq!(
        for_thousand, for_hundred,
        "allocations grew with the number of rules"
    );
}

/// Rules that fail on `s` (a string), `list` (an array), `obj` (an object, also
/// through `$keys`) and a wildcard over `list`.
fn failing_set() -> RuleSet {
    let rules: Vec<Rule> = serde_json::from_value(serde_json::json!([
        {"id": "s-regex", "name": "s", "target": "plugin", "severity": "error",
         "field": "s", "operator": "regex", "value": "^x"},
        {"id": "s-eq", "name": "s eq", "target": "plugin", "severity": "error",
         "field": "s", "operator": "eq", "value": "x"},
        {"id": "list-count", "name": "list", "target": "plugin", "severity": "error",
         "field": "list", "operator": "countLt", "value": 5},
        {"id": "list-each", "name": "each", "target": "plugin", "severity": "warning",
         "field": "list.*", "operator": "eq", "value": "x"},
        {"id": "obj-eq", "name": "obj", "target": "plugin", "severity": "error",
         "field": "obj", "operator": "eq", "value": {}},
        {"id": "obj-keys", "name": "keys", "target": "plugin", "severity": "error",
         "field": "$keys(obj)", "operator": "contains", "value": "x"}
    ]))
    .unwrap();
    RuleSet::compile(rules, &CompileOptions::default()).unwrap()
}

/// `items` elements and keys, every string `chars` long.
fn failing_doc(items: usize, chars: usize) -> Value {
    let obj: serde_json::Map<String, Value> = (0..items)
        .map(|i| (format!("k{i:07}"), Value::from("v".repeat(chars))))
        .collect();
    serde_json::json!({
        "s": "s".repeat(chars * 100),
        "list": (0..items).map(|i| format!("{i:07}").repeat(chars / 7 + 1)).collect::<Vec<_>>(),
        "obj": obj,
    })
}

fn blocks_for_failing(set: &RuleSet, doc: &Value) -> (u64, usize, usize) {
    let limits = AttributeLimits {
        max_depth: 10,
        max_keys: 1_000_000,
    };
    let attrs = Attributes::new(doc, &limits).unwrap();
    let warm = set.evaluate(Target::Plugin, &attrs, &Waivers::none());
    let before = dhat::HeapStats::get().total_blocks;
    let result = set.evaluate(Target::Plugin, &attrs, &Waivers::none());
    let after = dhat::HeapStats::get().total_blocks;
    assert_eq!(result, warm);
    let kept = serde_json::to_string(&result).unwrap().len();
    (after - before, result.violations.len(), kept)
}

fn a_failing_document_allocates_per_violation_not_per_byte() {
    let set = failing_set();
    // Both documents are cut everywhere: 30 elements and keys against 3,000, strings
    // of 300 characters against 3,000 (and 30,000 against 300,000 for `s`).
    let (small, small_violations, small_bytes) = blocks_for_failing(&set, &failing_doc(30, 300));
    let (large, large_violations, large_bytes) =
        blocks_for_failing(&set, &failing_doc(3_000, 3_000));
    assert_eq!(small_violations, 6);
    assert_eq!(large_violations, 6);
    assert_eq!(
        small, large,
        "allocations grew with the size of the failing values"
    );
    // Per violation: its bounded text, written once (growing a few times at most),
    // and its list of cuts; per cut, its pointer. Not per value copied, and the
    // message is not written at all until it is read.
    let limits = AttributeLimits {
        max_depth: 10,
        max_keys: 1_000_000,
    };
    let doc = failing_doc(30, 300);
    let result = set.evaluate(
        Target::Plugin,
        &Attributes::new(&doc, &limits).unwrap(),
        &Waivers::none(),
    );
    let cuts: usize = result.violations.iter().map(|v| v.truncated().len()).sum();
    assert!(cuts > 0);
    assert!(
        small <= (small_violations * 8 + cuts * 2) as u64,
        "{small} allocations for {small_violations} violations and {cuts} cuts"
    );
    assert!(
        small <= (small_violations * (2 * MAX_ACTUAL_NODES + 4)) as u64,
        "{small} allocations for {small_violations} violations"
    );
    // The answer itself is bounded by the rules, not by the document.
    assert!(large_bytes < 40_000, "{large_bytes} bytes");
    assert!(
        large_bytes <= small_bytes + 6 * 64,
        "{large_bytes} vs {small_bytes}"
    );
}

fn a_reused_result_of_scalar_failures_allocates_nothing() {
    // Failing values that are numbers, booleans, counts and short strings are kept
    // inline: with the result's memory reused, failing costs no allocation at all.
    let rules: Vec<Rule> = serde_json::from_value(serde_json::json!([
        {"id": "v", "name": "version", "target": "plugin", "severity": "error",
         "field": "version", "operator": "neq", "value": "latest"},
        {"id": "n", "name": "replicas", "target": "plugin", "severity": "error",
         "field": "replicas", "operator": "lt", "value": 3},
        {"id": "b", "name": "private", "target": "plugin", "severity": "warning",
         "field": "public", "operator": "eq", "value": false},
        {"id": "c", "name": "few steps", "target": "plugin", "severity": "error",
         "field": "$count(steps)", "operator": "lt", "value": 2},
        {"id": "m", "name": "owner", "target": "plugin", "severity": "error",
         "field": "owner", "operator": "exists"}
    ]))
    .unwrap();
    let set = RuleSet::compile(rules, &CompileOptions::default()).unwrap();
    let doc = serde_json::json!({"version": "latest", "replicas": 7, "public": true,
        "steps": [1, 2, 3]});
    let attrs = Attributes::new(&doc, &AttributeLimits::default()).unwrap();
    let mut result = Evaluation::pass();
    set.evaluate_into(Target::Plugin, &attrs, &Waivers::none(), &mut result);
    assert_eq!(result.violations.len(), 5);
    let before = dhat::HeapStats::get().total_blocks;
    set.evaluate_into(Target::Plugin, &attrs, &Waivers::none(), &mut result);
    let after = dhat::HeapStats::get().total_blocks;
    assert_eq!(result.violations.len(), 5);
    // The same rules over a passing document: the evaluation's own scratch.
    let passing = serde_json::json!({"version": "1.0.0", "replicas": 1, "public": false,
        "steps": [1], "owner": "me"});
    let attrs = Attributes::new(&passing, &AttributeLimits::default()).unwrap();
    let mut clean = Evaluation::pass();
    set.evaluate_into(Target::Plugin, &attrs, &Waivers::none(), &mut clean);
    let before_pass = dhat::HeapStats::get().total_blocks;
    set.evaluate_into(Target::Plugin, &attrs, &Waivers::none(), &mut clean);
    let scratch = dhat::HeapStats::get().total_blocks - before_pass;
    assert!(clean.violations.is_empty());
    assert!(scratch <= 2, "{scratch}");
    assert_eq!(after - before, scratch, "allocations for inline failures");
    let actual = |id: &str| {
        let v = result
            .violations
            .iter()
            .find(|v| v.rule_id() == id)
            .unwrap();
        v.actual()
    };
    assert_eq!(actual("c"), Some(serde_json::json!(3)));
    assert_eq!(actual("m"), None);
    assert_eq!(actual("v"), Some(serde_json::json!("latest")));
}
