//! Workloads shared by the benchmarks, kept as data in `data/` so that every run
//! measures the same thing.

pub mod jsonlogic;
pub mod walk;

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

/// An audit event of about 500 bytes of canonical JSON, with a nested details object.
pub fn audit_event(i: u64) -> audit_chain::AuditEvent {
    use chrono::TimeZone;
    let at = chrono::Utc
        .with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or_default();
    audit_chain::AuditEvent {
        id: format!("0b7c6f2e-9f5d-4c1a-8e3b-{i:012}"),
        action: "compliance.rule.update".into(),
        actor_id: "user-5f1c9a".into(),
        actor_email: Some("ada.lovelace@example.com".into()),
        org_id: "org-acme".into(),
        affected_org_id: None,
        target_type: Some("rule".into()),
        target_id: Some("rule-semver-required".into()),
        details: serde_json::json!({
            "changes": {"severity": {"from": "warning", "to": "error"}},
            "rule": {"name": "Plugin versions are semver", "tags": ["supply-chain"]}
        }),
        outcome: Some("success".into()),
        occurred_at: at,
        service: Some("compliance".into()),
        idempotency_key: Some(format!("idem-{i}")),
    }
}

/// A JSON document of `data/`, or null when it does not parse.
pub fn json_data(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}
