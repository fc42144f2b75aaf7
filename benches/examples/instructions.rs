//! The mixed workloads of `evaluate.rs`, a fixed number of times each, for counting
//! instructions with callgrind, which repeats to the instruction whatever else the
//! machine is doing (criterion's times on a shared machine move by 10% or more):
//!
//! ```sh
//! scripts/bench-instructions
//! ```
//!
//! Each workload runs inside its own `#[inline(never)]` function (named `workload_*`),
//! so that `--toggle-collect` counts it alone, the result's drop included.

use std::hint::black_box;

use compliance_core::{
    AttributeLimits, Attributes, CompileOptions, Evaluation, Rule, RuleSet, Target, Waivers,
};

const RUNS: usize = 1000;

#[inline(never)]
fn workload_all_pass(set: &RuleSet, doc: &Attributes<'_>) -> usize {
    // Not the same body as the failing one, so that the two are not merged into one.
    (0..RUNS)
        .map(|_| {
            set.evaluate(Target::Pipeline, black_box(doc), &Waivers::none())
                .rules_evaluated
        })
        .sum()
}

#[inline(never)]
fn workload_30pct_fail(set: &RuleSet, doc: &Attributes<'_>) -> usize {
    (0..RUNS)
        .map(|_| {
            set.evaluate(Target::Pipeline, black_box(doc), &Waivers::none())
                .violations
                .len()
        })
        .sum()
}

#[inline(never)]
fn workload_30pct_fail_into(set: &RuleSet, doc: &Attributes<'_>) -> usize {
    let mut result = Evaluation::pass();
    (0..RUNS)
        .map(|_| {
            set.evaluate_into(
                Target::Pipeline,
                black_box(doc),
                &Waivers::none(),
                &mut result,
            );
            result.violations.len()
        })
        .sum()
}

#[inline(never)]
fn workload_30pct_fail_verdict(set: &RuleSet, doc: &Attributes<'_>) -> usize {
    (0..RUNS)
        .map(|_| {
            set.verdict(Target::Pipeline, black_box(doc), &Waivers::none())
                .violations
        })
        .sum()
}

fn main() {
    let passing = benches::pipeline();
    let failing = benches::json_data(include_str!("../data/pipeline-failing.json"));
    let limits = AttributeLimits::default();
    let (Ok(passing), Ok(failing)) = (
        Attributes::new(&passing, &limits),
        Attributes::new(&failing, &limits),
    ) else {
        return eprintln!("the mixed workload documents are invalid");
    };
    let count = std::env::args().nth(1).unwrap_or_default();
    let text = match count.as_str() {
        "100" => include_str!("../data/rules-mixed-100.json"),
        "1000" => include_str!("../data/rules-mixed-1000.json"),
        _ => return eprintln!("usage: instructions 100|1000"),
    };
    {
        let rules: Vec<Rule> = serde_json::from_str(text).unwrap_or_default();
        let Ok(set) = RuleSet::compile(rules, &CompileOptions::default()) else {
            return eprintln!("the mixed workload rules do not compile");
        };
        // Warm the regex caches outside the counted functions.
        let _ = set.evaluate(Target::Pipeline, &failing, &Waivers::none());
        let _ = set.evaluate(Target::Pipeline, &passing, &Waivers::none());
        println!(
            "{count}: {} {} {} {}",
            workload_all_pass(&set, &passing),
            workload_30pct_fail(&set, &failing),
            workload_30pct_fail_into(&set, &failing),
            workload_30pct_fail_verdict(&set, &failing)
        );
    }
}
