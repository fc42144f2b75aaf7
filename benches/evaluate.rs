//! compliance-core: evaluating and compiling the workloads of `data/`.
//!
//! - `evaluate/100_rules`, `evaluate/1000_rules`: the all-pass workload (`rules-100.json`,
//!   repeated under distinct ids) against `pipeline.json`.
//! - `mixed/{100,1000}/all_pass` and `mixed/{100,1000}/30pct_fail`: 100 and 1,000
//!   distinct rules (`rules-mixed-*.json`), first against `pipeline.json` (every rule
//!   passes), then against `pipeline-failing.json` (30% fail, over every operator,
//!   computed fields, wildcards, with hostile sizes among the failing values). The
//!   ratio of the two is what a failing upload costs over a passing one.
//! - `yardstick/{100,1000}/compliance_core`, `yardstick/{100,1000}/serde_json_walk` and
//!   `yardstick/{100,1000}/datalogic_rs`: the failing document judged as the server
//!   judges it (the attribute limits, then the rules), against the same rules checked
//!   by the plain walk of `benches::walk` and by datalogic-rs over their JSONLogic
//!   translation (`benches::jsonlogic`), each of which must find the same failing
//!   rules. The ratios are the evaluator's cost over a hand-written check and over a
//!   JSONLogic engine.

use benches::jsonlogic::JsonLogic;
use benches::walk::Walk;
use benches::{json_data, pipeline, rules_100, rules_times};
use compliance_core::{
    AttributeLimits, Attributes, CompileOptions, Evaluation, Rule, RuleSet, Target, Waivers,
};
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use datalogic_rs::bumpalo::Bump;
use serde_json::Value;

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
        bench_yardstick(c, count, &set, text);
    }
}

/// compliance-core (limits and rules) against the plain walk, on the failing document.
fn bench_yardstick(c: &mut Criterion, count: usize, set: &RuleSet, rules: &str) {
    let document = json_data(include_str!("data/pipeline-failing.json"));
    let limits = AttributeLimits::default();
    let Some(walk) = Walk::new(&json_data(rules)) else {
        return eprintln!("the walk does not read the mixed rules");
    };
    let judge = |document: &Value| {
        Attributes::new(document, &limits)
            .map(|attrs| set.evaluate(Target::Pipeline, &attrs, &Waivers::none()))
    };
    let Ok(judged) = judge(&document) else {
        return eprintln!("the failing document is over the limits");
    };
    let mut ours: Vec<&str> = judged.violations.iter().map(|v| v.rule_id()).collect();
    let walked = walk.evaluate(&document);
    let mut theirs: Vec<&str> = walked.iter().map(|v| v.rule_id).collect();
    ours.sort_unstable();
    theirs.sort_unstable();
    assert_eq!(ours, theirs, "the walk and compliance-core disagree");
    assert_eq!(ours.len(), count * 3 / 10, "30% of the rules fail");
    let text = include_str!("data/pipeline-failing.json");
    let (Some(logic), Some(parsed)) =
        (JsonLogic::new(&json_data(rules)), JsonLogic::document(text))
    else {
        return eprintln!("the JSONLogic translation does not read the mixed rules");
    };
    let mut arena = Bump::new();
    let mut logical = logic.failing(&parsed, &mut arena);
    logical.sort_unstable();
    assert_eq!(ours, logical, "datalogic-rs and compliance-core disagree");
    c.bench_function(&format!("yardstick/{count}/compliance_core"), |b| {
        b.iter(|| judge(black_box(&document)).map(|e| e.violations.len()))
    });
    c.bench_function(&format!("yardstick/{count}/serde_json_walk"), |b| {
        b.iter(|| walk.evaluate(black_box(&document)).len())
    });
    c.bench_function(&format!("yardstick/{count}/datalogic_rs"), |b| {
        b.iter(|| logic.failing(black_box(&parsed), &mut arena).len())
    });
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
