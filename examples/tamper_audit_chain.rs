//! Seals a small audit chain, tampers with one stored row, and shows the verifier
//! pointing at it.
//!
//! Run: cargo run -p examples --example tamper_audit_chain

use audit_chain::{seal, verify, AuditEvent, ChainHead};
use chrono::{Duration, TimeZone, Utc};
use serde_json::json;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let start = Utc
        .with_ymd_and_hms(2026, 11, 21, 9, 0, 0)
        .single()
        .ok_or("bad date")?;
    let mut head = ChainHead::genesis("org-acme");
    let mut rows = Vec::new();
    for (i, action) in [
        "compliance.rule.create",
        "compliance.rule.update",
        "compliance.exemption.approve",
        "compliance.rule.delete",
    ]
    .into_iter()
    .enumerate()
    {
        let at = start + Duration::minutes(i as i64);
        let event = AuditEvent {
            id: format!("evt-{i}"),
            action: action.into(),
            actor_id: "user-ada".into(),
            actor_email: Some("ada@example.com".into()),
            org_id: "org-acme".into(),
            affected_org_id: None,
            target_type: Some("rule".into()),
            target_id: Some("rule-semver".into()),
            details: json!({"step": i, "awsAccountId": "123456789012"}),
            outcome: Some("success".into()),
            occurred_at: at,
            service: Some("compliance".into()),
            idempotency_key: Some(format!("key-{i}")),
        };
        let (row, next) = seal(&head, event, at)?;
        println!("sealed seq {} {} {}", row.seq, row.action, row.hash);
        rows.push(row);
        head = next;
    }
    println!("intact chain: {}", serde_json::to_string(&verify(&rows))?);

    // Someone with database access rewrites who approved the exemption.
    if let Some(row) = rows.get_mut(2) {
        row.actor_id = "user-mallory".into();
    }
    let verdict = verify(&rows);
    println!(
        "after tampering: ok={} brokenAt seq={:?} reason={:?}",
        verdict.ok,
        verdict.broken_at.as_ref().map(|r| r.seq),
        verdict.reason
    );
    Ok(())
}
