//! Redaction before hashing (SEMANTICS.md 2).

use super::*;

#[test]
fn arns_of_several_partitions_lose_their_account_segment() {
    let cases = [
        (
            "arn:aws:iam::123456789012:role/deploy",
            "arn:aws:iam::[REDACTED]:role/deploy",
        ),
        (
            "arn:aws-cn:s3:cn-north-1:123456789012:bucket",
            "arn:aws-cn:s3:cn-north-1:[REDACTED]:bucket",
        ),
        (
            "arn:aws-us-gov:lambda:us-gov-west-1:123456789012:function:f",
            "arn:aws-us-gov:lambda:us-gov-west-1:[REDACTED]:function:f",
        ),
        (
            "see arn:aws:codestar-connections:us-east-1:000000000001:connection/x and more",
            "see arn:aws:codestar-connections:us-east-1:[REDACTED]:connection/x and more",
        ),
        (
            "arn:aws:iam::aws:policy/ReadOnly",
            "arn:aws:iam::[REDACTED]:policy/ReadOnly",
        ),
        ("arn:aws:s3:::my-bucket/key", "arn:aws:s3:::my-bucket/key"),
    ];
    for (input, expected) in cases {
        assert_eq!(redact_text(input), expected, "{input}");
    }
}

#[test]
fn twelve_digit_tokens_are_redacted_wherever_they_stand() {
    let cases = [
        ("123456789012", "[REDACTED]"),
        ("acct-123456789012-prod", "acct-[REDACTED]-prod"),
        ("x123456789012y", "x[REDACTED]y"),
        ("1234-5678-9012", "[REDACTED]"),
        (
            "two 111111111111 and 222222222222",
            "two [REDACTED] and [REDACTED]",
        ),
        ("1234567890123", "1234567890123"),
        ("12345678901", "12345678901"),
        ("2026-11-21T10:37:19Z", "2026-11-21T10:37:19Z"),
        ("12345-5678-9012", "12345-5678-9012"),
    ];
    for (input, expected) in cases {
        assert_eq!(redact_text(input), expected, "{input}");
    }
}

#[test]
fn details_are_redacted_by_key_value_and_number_but_org_ids_never() {
    let e = AuditEvent {
        org_id: "123456789012".into(),
        affected_org_id: Some("210987654321".into()),
        target_id: Some("role in 123456789012".into()),
        details: json!({
            "AccountId": {"nested": "anything"},
            "payerACCOUNT": 5,
            "nested": [{"id": 123456789012u64, "small": 42, "text": "acct 123456789012"}],
            "123456789012": "keyed by account",
            "plain": "keep me"
        }),
        ..event("e", "ignored", json!({}))
    };
    let (row, _) = seal(&ChainHead::genesis("210987654321"), e, t(0)).unwrap();
    assert_eq!(row.org_id, "123456789012");
    assert_eq!(row.affected_org_id.as_deref(), Some("210987654321"));
    assert_eq!(row.chain_key, "210987654321");
    assert_eq!(row.target_id.as_deref(), Some("role in [REDACTED]"));
    assert_eq!(
        row.details,
        json!({
            "AccountId": "[REDACTED]",
            "payerACCOUNT": "[REDACTED]",
            "nested": [{"id": "[REDACTED]", "small": 42, "text": "acct [REDACTED]"}],
            "[REDACTED]": "keyed by account",
            "plain": "keep me"
        })
    );
    assert_eq!(row.redaction_version, REDACTION_VERSION);
}

#[test]
fn redaction_is_idempotent() {
    let mut once = json!({"a": "arn:aws:iam::123456789012:role/x", "111111111111": 1, "222222222222": 2, "acc": {"account": 1}});
    redact_details(&mut once);
    let mut twice = once.clone();
    redact_details(&mut twice);
    assert_eq!(once, twice);
    assert_eq!(
        once.as_object().unwrap().len(),
        4,
        "colliding redacted keys keep both values"
    );
}
