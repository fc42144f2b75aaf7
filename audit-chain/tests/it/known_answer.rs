//! A fixed chain whose hashes are written here: any change to the canonical form,
//! the hashed fields or redaction version 1 is caught. The expected values were
//! computed independently (Python: sorted keys, compact separators, hashlib).

use super::*;

fn fixed_chain() -> Vec<SealedEvent> {
    let mut head = ChainHead::genesis("acme");
    let events = [
        event("e1", "acme", json!({"rule": "semver", "from": 1, "to": 2})),
        AuditEvent {
            action: "authz.denied".into(),
            outcome: Some("failure".into()),
            details: json!({"awsAccountId": "123456789012", "arn": "arn:aws:iam::210987654321:role/ci", "note": "é"}),
            ..event("e2", "acme", json!({}))
        },
        AuditEvent {
            org_id: "system".into(),
            affected_org_id: Some("acme".into()),
            actor_email: None,
            details: json!({"ratio": 0.5, "big": 9007199254740993u64}),
            ..event("e3", "system", json!({}))
        },
    ];
    events
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            let (row, next) = seal(
                &head,
                e,
                t(10 + i as i64) + chrono::Duration::nanoseconds(123_456_789),
            )
            .unwrap();
            head = next;
            row
        })
        .collect()
}

#[test]
fn the_canonical_form_of_a_row() {
    let rows = fixed_chain();
    assert_eq!(
        rows[0].canonical_json(),
        concat!(
            r#"{"action":"compliance.rule.update","actorEmail":"ada@example.com","actorId":"user-1","#,
            r#""affectedOrgId":null,"chainKey":"acme","createdAt":"2026-01-01T00:00:10.123456Z","#,
            r#""details":{"from":1,"rule":"semver","to":2},"id":"e1","idempotencyKey":"key-e1","#,
            r#""occurredAt":"2026-01-01T00:00:00.000000Z","orgId":"acme","outcome":"success","#,
            r#""redactionVersion":1,"seq":1,"service":"compliance","targetId":"rule-e1","targetType":"rule"}"#
        )
    );
    assert_eq!(
        rows[1].details,
        json!({"arn": "arn:aws:iam::[REDACTED]:role/ci", "awsAccountId": "[REDACTED]", "note": "é"})
    );
    assert_eq!(
        rows[2].details,
        json!({"big": "9007199254740993", "ratio": 0.5})
    );
    assert_eq!(rows[2].chain_key, "acme");
}

#[test]
fn known_hashes() {
    let rows = fixed_chain();
    let hashes: Vec<&str> = rows.iter().map(|r| r.hash.as_str()).collect();
    assert_eq!(hashes, EXPECTED);
    assert_eq!(rows[0].prev_hash, GENESIS_HASH);
    assert_eq!(rows[1].prev_hash, rows[0].hash);
    assert_eq!(rows[2].prev_hash, rows[1].hash);
}

const EXPECTED: [&str; 3] = [
    "9d942d2e4f1bd97bcb7ef032c8265368e4b1af5cd34234f76bd4ee4884980959",
    "09982047fa5c5e1798808699676e134416d4cc956e8174a35ffe513f50ca7c15",
    "6d7940797635d9e7a22cafc0f6196ce5d1eeef954a9061dab9a4c8af5d11ddad",
];
