//! Signed checkpoints: the C2SP signed-note bytes, and a chain checked against them.

use audit_chain::*;
use chrono::{TimeZone, Utc};

/// The example of golang.org/x/mod/sumdb/note (an independent implementation): the
/// same key must give the same key id, verifier key and signature, byte for byte.
#[test]
fn signed_note_bytes_match_the_reference_implementation() {
    let skey = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";
    let vkey = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
    let text = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n";
    let expected = format!("{text}\n\u{2014} PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n");
    let signer = NoteSigner::from_private_key(skey).unwrap();
    assert_eq!(signer.verifier_key(), vkey);
    assert_eq!(signer.private_key(), skey);
    assert_eq!(signer.sign(text).unwrap(), expected);
    let verifier = NoteVerifier::from_verifier_key(vkey).unwrap();
    assert_eq!(verifier.open(&expected).unwrap(), text);
    // One changed byte of the text, or of the signature: refused.
    let tampered = expected.replacen("problem,", "problem;", 1);
    assert!(verifier.open(&tampered).is_err());
    let tampered = expected.replacen("x08go", "x08gp", 1);
    assert!(verifier.open(&tampered).is_err());
    // Keys whose id does not match are refused.
    assert!(NoteVerifier::from_verifier_key(
        "PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
    )
    .is_err());
    assert!(NoteSigner::from_private_key(
        "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFzAAAA"
    )
    .is_err());
}

fn chain(n: u64) -> Vec<SealedEvent> {
    let at = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let mut head = ChainHead::genesis("org-1");
    let mut rows = Vec::new();
    for i in 1..=n {
        let event = AuditEvent {
            id: format!("e{i}"),
            action: "plugin.upload".into(),
            actor_id: "u".into(),
            actor_email: None,
            org_id: "org-1".into(),
            affected_org_id: None,
            target_type: None,
            target_id: None,
            details: serde_json::json!({"i": i}),
            outcome: None,
            occurred_at: at,
            service: None,
            idempotency_key: None,
        };
        let (row, next) = seal(&head, event, at).unwrap();
        rows.push(row);
        head = next;
    }
    rows
}

fn note(signer: &NoteSigner, row: &SealedEvent) -> String {
    Checkpoint {
        deployment: "test".into(),
        chain_key: row.chain_key.clone(),
        seq: row.seq,
        hash: row.hash.clone(),
        time: Utc.with_ymd_and_hms(2026, 1, 1, 0, 5, 0).unwrap(),
    }
    .sign(signer)
    .unwrap()
}

fn check(rows: &[SealedEvent], notes: &[String], verifier: &NoteVerifier) -> CheckpointVerdict {
    let mut check = CheckpointCheck::new("org-1", notes.iter().map(String::as_str), verifier);
    for row in rows {
        check.push(row);
    }
    check.finish()
}

#[test]
fn truncation_rewrites_and_foreign_signatures_are_found_pruning_is_not() {
    let signer = NoteSigner::from_seed("test-audit", [9; 32]).unwrap();
    let verifier = signer.verifier();
    let rows = chain(20);
    let notes = vec![note(&signer, &rows[9]), note(&signer, &rows[19])];
    let intact = check(&rows, &notes, &verifier);
    assert!(intact.ok, "{intact:?}");
    assert_eq!((intact.checked, intact.latest_seq), (2, Some(20)));

    // The newest three rows deleted.
    let verdict = check(&rows[..17], &notes, &verifier);
    assert_eq!(
        verdict.problem,
        Some(CheckpointProblem::Truncated {
            seq: 20,
            last_seq: 17
        })
    );

    // A middle row rewritten and every later hash recomputed: the chain still links,
    // but the row at the checkpoint no longer carries the signed hash.
    let mut rewritten = rows[..4].to_vec();
    let mut head = ChainHead::after(&rows[3]);
    for row in &rows[4..] {
        let mut event = AuditEvent {
            id: row.id.clone(),
            action: row.action.clone(),
            actor_id: row.actor_id.clone(),
            actor_email: None,
            org_id: row.org_id.clone(),
            affected_org_id: None,
            target_type: None,
            target_id: None,
            details: row.details.clone(),
            outcome: None,
            occurred_at: row.occurred_at,
            service: None,
            idempotency_key: None,
        };
        if row.seq == 5 {
            event.details = serde_json::json!({"i": "rewritten"});
        }
        let (sealed, next) = seal(&head, event, row.created_at).unwrap();
        rewritten.push(sealed);
        head = next;
    }
    assert!(verify(rewritten.iter()).ok, "the rewrite relinks the chain");
    let verdict = check(&rewritten, &notes, &verifier);
    assert!(
        matches!(
            verdict.problem,
            Some(CheckpointProblem::Rewritten { seq: 10, .. })
        ),
        "{verdict:?}"
    );

    // A checkpoint signed by another key is refused.
    let other = NoteSigner::from_seed("test-audit", [10; 32]).unwrap();
    let foreign = vec![note(&other, &rows[19])];
    let verdict = check(&rows, &foreign, &verifier);
    assert_eq!(
        verdict.problem,
        Some(CheckpointProblem::BadSignature { seq: Some(20) })
    );

    // A pruned prefix (rows 1..=12 gone) with a checkpoint inside it: still ok.
    let verdict = check(&rows[12..], &notes, &verifier);
    assert!(verdict.ok, "{verdict:?}");
    assert_eq!(verdict.pruned, 1);
}

#[test]
fn a_checkpoint_is_due_when_the_chain_advanced_and_time_or_events_passed() {
    let at = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let later = at + chrono::Duration::seconds(300);
    assert!(checkpoint_due(1, None, at, 300, 1000));
    assert!(!checkpoint_due(0, None, at, 300, 1000));
    assert!(
        !checkpoint_due(5, Some((5, at)), later, 300, 1000),
        "did not advance"
    );
    assert!(
        checkpoint_due(6, Some((5, at)), later, 300, 1000),
        "interval passed"
    );
    assert!(!checkpoint_due(6, Some((5, at)), at, 300, 1000));
    assert!(
        checkpoint_due(1005, Some((5, at)), at, 300, 1000),
        "events passed"
    );
}
