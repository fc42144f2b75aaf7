//! compliance-core: evaluating and compiling the 100- and 1,000-rule workloads.

use benches::{pipeline, rules_100, rules_times};
use compliance_core::{AttributeLimits, Attributes, CompileOptions, RuleSet, Target, Waivers};
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

fn compile(c: &mut Criterion) {
    let rules = rules_100();
    c.bench_function("compile/100_rules", |b| {
        b.iter(|| RuleSet::compile(black_box(rules.clone()), &CompileOptions::default()).is_ok())
    });
}

criterion_group!(benches, evaluate, compile);
criterion_main!(benches);
