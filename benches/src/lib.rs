//! Workloads shared by the benchmarks, kept as data in `data/` so that every run
//! measures the same thing.

use compliance_core::Rule;
use serde_json::Value;

/// The 100-rule pipeline workload (`data/rules-100.json`, made by
/// `data/generate_rules.py`): every operator, 10 regexes, 10 computed fields,
/// 5 wildcard paths, 5 multi-condition rules; all pass against [`pipeline`].
pub fn rules_100() -> Vec<Rule> {
    serde_json::from_str(include_str!("../data/rules-100.json")).unwrap_or_default()
}

/// The workload repeated `copies` times under distinct ids.
pub fn rules_times(copies: usize) -> Vec<Rule> {
    let base = rules_100();
    (0..copies)
        .flat_map(|copy| {
            base.iter().cloned().map(move |mut rule| {
                rule.id = format!("{}-{copy}", rule.id);
                rule
            })
        })
        .collect()
}

/// The pipeline attribute document: 78 keys over stages, steps, plugins and env.
pub fn pipeline() -> Value {
    serde_json::from_str(include_str!("../data/pipeline.json")).unwrap_or(Value::Null)
}
