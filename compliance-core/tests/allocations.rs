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

#[test]
fn a_passing_document_allocates_nothing_per_rule() {
    let _profiler = dhat::Profiler::builder().testing().build();
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
