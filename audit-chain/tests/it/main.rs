//! audit-chain's behaviour, read against document 3 and SEMANTICS.md section 2.

// Test code: a panic is how a test fails.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod catalog;
mod chain;
mod checkpoints;
mod known_answer;
mod properties;
mod redaction;
mod registry_and_builds;

use audit_chain::*;
use chrono::{DateTime, TimeZone, Utc};
use serde_json::{json, Value};

pub fn t(seconds: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap() + chrono::Duration::seconds(seconds)
}

pub fn event(id: &str, org: &str, details: Value) -> AuditEvent {
    AuditEvent {
        id: id.into(),
        action: "compliance.rule.update".into(),
        actor_id: "user-1".into(),
        actor_email: Some("ada@example.com".into()),
        org_id: org.into(),
        affected_org_id: None,
        target_type: Some("rule".into()),
        target_id: Some(format!("rule-{id}")),
        details,
        outcome: Some("success".into()),
        occurred_at: t(0),
        service: Some("compliance".into()),
        idempotency_key: Some(format!("key-{id}")),
    }
}

/// A sealed chain of `n` events for `org`.
pub fn chain_of(n: usize, org: &str) -> Vec<SealedEvent> {
    let mut head = ChainHead::genesis(org);
    (0..n)
        .map(|i| {
            let (row, next) = seal(
                &head,
                event(&format!("e{i}"), org, json!({"i": i})),
                t(i as i64),
            )
            .unwrap();
            head = next;
            row
        })
        .collect()
}
