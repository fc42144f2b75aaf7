//! compliance-core: evaluating and compiling the workloads of `data/`.
//!
//! - `evaluate/100_rules`, `evaluate/1000_rules`: the all-pass workload (`rules-100.json`,
//!   repeated under distinct ids) against `pipeline.json`.
//! - `mixed/{100,1000}/all_pass` and `mixed/{100,1000}/30pct_fail`: 100 and 1,000
//!   distinct rules (`rules-mixed-*.json`), first against `pipeline.json` (every rule
//!   passes), then against `pipeline-failing.json` (30% fail, over every operator,
//!   computed fields, wildcards, with hostile sizes among the failing values). The
//!   ratio of the two is what a failing upload costs over a passing one.

use benches::{json_data, pipeline, rules_100, rules_times};
use compliance_core::{
    AttributeLimits, Attributes, CompileOptions, Evaluation, Rule, RuleSet, Target, Waivers,
};
use criterion::{black_box, criterion_group, criterion_main, Criterion};

fn evaluate(c: &mut Criterion) {
    let doc = pipeline();
    let limits = AttributeLimits::default();
    let attrs = match Attributes::new(&doc, &limits) {
        Ok(attrs) => attrs,
        Err(e) => return eprintln!("the workload document is invalid: {e}"),
    };
    for copies in [1usize, 10] {
        let Ok(set) = RuleSet::compile(rules_times(copies), &CompileOptions::default()) else {
            return eprintln!("the workload rules do not compile");
        };
        assert!(set
            .evaluate(Target::Pipeline, &attrs, &Waivers::none())
            .violations
            .is_empty());
        c.bench_function(&format!("evaluate/{}_rules", copies * 100), |b| {
            b.iter(|| set.evaluate(Target::Pipeline, black_box(&attrs), &Waivers::none()))
        });
    }
    c.bench_function("attributes/check_limits", |b| {
        b.iter(|| Attributes::new(black_box(&doc), &limits).is_ok())
    });
}

fn mixed(c: &mut Criterion) {
    let passing = pipeline();
    let failing = json_data(include_str!("data/pipeline-failing.json"));
    let limits = AttributeLimits::default();
    let (Ok(passing), Ok(failing)) = (
        Attributes::new(&passing, &limits),
        Attributes::new(&failing, &limits),
    ) else {
        return eprintln!("the mixed workload documents are invalid");
    };
    let workloads: [(usize, &str); 2] = [
        (100, include_str!("data/rules-mixed-100.json")),
        (1000, include_str!("data/rules-mixed-1000.json")),
    ];
    for (count, text) in workloads {
        let rules: Vec<Rule> = serde_json::from_str(text).unwrap_or_default();
        let Ok(set) = RuleSet::compile(rules, &CompileOptions::default()) else {
            return eprintln!("the mixed workload rules do not compile");
        };
        let pass = set.evaluate(Target::Pipeline, &passing, &Waivers::none());
        let fail = set.evaluate(Target::Pipeline, &failing, &Waivers::none());
        assert!(pass.violations.is_empty(), "{:?}", pass.violations.first());
        let _ = fail;
        c.bench_function(&format!("mixed/{count}/all_pass"), |b| {
            b.iter(|| set.evaluate(Target::Pipeline, black_box(&passing), &Waivers::none()))
        });
        c.bench_function(&format!("mixed/{count}/30pct_fail"), |b| {
            b.iter(|| set.evaluate(Target::Pipeline, black_box(&failing), &Waivers::none()))
        });
        bench_reuse(c, count, &set, &failing);
    }
}

/// The same failing evaluation, for an embedder that keeps one result and reuses its
/// memory (`evaluate_into`), and for one that needs the verdict only.
fn bench_reuse(c: &mut Criterion, count: usize, set: &RuleSet, failing: &Attributes<'_>) {
    let mut result = Evaluation::pass();
    c.bench_function(&format!("mixed/{count}/30pct_fail_into"), |b| {
        b.iter(|| {
            set.evaluate_into(
                Target::Pipeline,
                black_box(failing),
                &Waivers::none(),
                &mut result,
            );
            result.violations.len()
        })
    });
    c.bench_function(&format!("mixed/{count}/30pct_fail_verdict"), |b| {
        b.iter(|| set.verdict(Target::Pipeline, black_box(failing), &Waivers::none()))
    });
}

fn compile(c: &mut Criterion) {
    let rules = rules_100();
    c.bench_function("compile/100_rules", |b| {
        b.iter(|| RuleSet::compile(black_box(rules.clone()), &CompileOptions::default()).is_ok())
    });
}

criterion_group!(benches, evaluate, mixed, compile);
criterion_main!(benches);
