//! Redaction and canonicalization of arbitrary details JSON: nothing panics,
//! redaction is idempotent, canonical bytes are valid JSON that means the same
//! value, and a sealed row verifies.
#![no_main]

use audit_chain::*;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(details) = serde_json::from_str::<Value>(text) else { return };

    let mut once = details.clone();
    redact_details(&mut once);
    let mut twice = once.clone();
    redact_details(&mut twice);
    assert_eq!(once, twice, "redaction is not idempotent");

    let canonical = canonical_json(&once);
    let reparsed: Value = serde_json::from_slice(&canonical).expect("canonical bytes are JSON");
    assert_eq!(canonical_json(&reparsed), canonical, "canonical form is not stable");

    let event = AuditEvent {
        id: "e".into(),
        action: "plugin.upload".into(),
        actor_id: "u".into(),
        actor_email: None,
        org_id: "o".into(),
        affected_org_id: None,
        target_type: None,
        target_id: Some(text.chars().take(64).collect()),
        details,
        outcome: None,
        occurred_at: chrono::DateTime::UNIX_EPOCH,
        service: None,
        idempotency_key: None,
    };
    if let Ok((row, _)) = seal(&ChainHead::genesis("o"), event, chrono::DateTime::UNIX_EPOCH) {
        assert!(verify([&row]).ok);
    }
});
