//! Hostile input: answers and records bounded by the request, every refusal in the
//! envelope.

use super::*;
use crate::api::Answer;
use adapters::code::ErrorCode;
use adapters::http::wire::{AuditEvent, Verdict};

/// An organization with `count` regex rules on field `s`, all failing on a long `s`.
async fn regex_heavy_org(app: &TestApp, count: usize) -> (String, String) {
    let org = app.org("heavy-owner", "heavy").await;
    let token = app.token("heavy-owner", "heavy-owner@example.com");
    for i in 0..count {
        app.rule(
            &token,
            &org,
            json!({"name": format!("s is short {i}"), "target": "plugin", "severity": "error",
                   "field": "s", "operator": "regex", "value": format!("^x{{{i}}}$")}),
        )
        .await;
    }
    (org, token)
}

async fn answers_and_records_are_bounded_by_the_request(app: &TestApp) {
    let (org, token) = regex_heavy_org(app, 100).await;
    // 60,000 characters (the test server's body limit is 64 KiB): unbounded, the
    // answer would carry 100 copies, 6 MB.
    let long = "é".repeat(30_000);
    for dry_run in [true, false] {
        let body = json!({"attributes": {"s": long}, "entityId": "plugin-1"});
        let path = if dry_run {
            "/api/compliance/validate/plugin/dry-run"
        } else {
            "/api/compliance/validate/plugin"
        };
        let answer = app
            .by(&token)
            .org(&org)
            .post(path)
            .json(body)
            .await
            .expect(StatusCode::OK);
        let size = answer.body().to_string().len();
        assert!(size < 150_000, "the answer is {size} bytes");
        let verdict: Verdict = answer.data();
        assert_eq!(verdict.violations.len(), 100);
        let violations: Vec<Value> = verdict.violations.iter().map(|v| json!(v)).collect();
        for v in violations {
            let actual = v["actual"].as_str().unwrap();
            assert_eq!(actual.chars().count(), compliance_core::MAX_ACTUAL_CHARS);
            assert_eq!(v["truncated"], json!([{"at": "", "bytes": 60_000}]), "{v}");
            assert!(v["message"].as_str().unwrap().len() < 400, "{v}");
        }
    }
    // The check log stored the bounded form, so reading it back is bounded too.
    let Answer(status, log) = app
        .by(&token)
        .org(&org)
        .get("/api/compliance/audit?limit=1")
        .await;
    assert_eq!(status, StatusCode::OK, "{log}");
    let size = log.to_string().len();
    assert!(size < 150_000, "the check log page is {size} bytes");
    assert!(log.to_string().contains("\"bytes\":60000"), "{log}");
}

async fn an_oversized_body_is_refused_in_the_envelope_on_every_route(app: &TestApp) {
    let org = app.org("big-owner", "big").await;
    let token = app.token("big-owner", "big-owner@example.com");
    let huge = json!({"attributes": {"s": "x".repeat(70_000)}, "name": "x".repeat(70_000)});
    for path in [
        "/api/compliance/validate/plugin",
        "/api/compliance/validate/pipeline/dry-run",
        "/api/compliance/templates/rules/some-id/clone",
        "/api/compliance/templates/policies/some-id/clone",
        "/api/compliance/rules",
        "/api/organization",
    ] {
        let Answer(status, body) = app.by(&token).org(&org).post(path).json(huge.clone()).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{path}: {body}");
        assert_eq!(code(status, &body), ErrorCode::PayloadTooLarge, "{path}");
    }
}

async fn integers_beyond_2_53_in_audit_details_are_kept_exactly(app: &TestApp) {
    let token = app.service_token("plugin");
    // Raw text: serde_json's own macro would already have made floats of these.
    let text = r#"{"action": "plugin.upload", "actorId": "u", "orgId": "org-big", "targetType": "plugin",
        "targetId": "p", "details": {"u64max_plus_one": 18446744073709551616,
        "below_i64": -9223372036854775813, "ten_22": 10000000000000000000000,
        "safe": 9007199254740991, "unsafe": 9007199254740993, "float": 0.5}}"#;
    let request = Request::post("/api/audit/events")
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .header("idempotency-key", "big-ints")
        .body(Body::from(text))
        .unwrap();
    let event: AuditEvent = Answer::from(app.send(request).await)
        .expect(StatusCode::CREATED)
        .data();
    let details = &event.details;
    assert_eq!(details["u64max_plus_one"], "18446744073709551616");
    assert_eq!(details["below_i64"], "-9223372036854775813");
    assert_eq!(details["ten_22"], "10000000000000000000000");
    assert_eq!(details["safe"], 9007199254740991u64);
    assert_eq!(details["unsafe"], "9007199254740993");
    assert_eq!(details["float"], 0.5);
    // Stored and read back the same, and the chain re-hashes.
    let rows = app.store.chain_batch("org-big", 0, 10).await.unwrap();
    let stored = serde_json::to_value(&rows[0]).unwrap();
    assert_eq!(&stored["details"], details);
    assert!(app.verify("org-big").await.ok);
}

async fn denials_are_folded_and_never_open_a_chain_for_an_unknown_organization(app: &TestApp) {
    let org = app.org("victim-owner", "victim").await;
    let mallory = app.token("mallory", "mallory@example.com");
    let heads = || async {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM audit_chain_heads")
            .fetch_one(adapters::storage::pool_for_tests(&app.store))
            .await
            .unwrap();
        n
    };
    app.relay().await;
    let chains_before = heads().await;
    // 200 denials against organizations that do not exist: no chain, no row.
    for _ in 0..200 {
        app.by(&mallory)
            .post(format!(
                "/api/organization/{}/members",
                uuid::Uuid::new_v4()
            ))
            .json(json!({"userId": "x"}))
            .await
            .expect(StatusCode::NOT_FOUND);
    }
    // 50 denials against one that exists: one event, carrying the count.
    for _ in 0..50 {
        app.by(&mallory)
            .post(format!("/api/organization/{org}/members"))
            .json(json!({"userId": "x"}))
            .await
            .expect(StatusCode::NOT_FOUND);
    }
    let denied: Vec<_> = app
        .audited("authz.denied")
        .await
        .into_iter()
        .filter(|e| e.actor_id == "mallory")
        .collect();
    // Per minute the burst touched (two when it straddles a minute): the first
    // denial at once, the others folded into one event; together they count every
    // denial.
    assert!(
        (2..=4).contains(&denied.len()),
        "{} events: {denied:?}",
        denied.len()
    );
    let counted: u64 = denied
        .iter()
        .map(|e| e.details["count"].as_u64().unwrap())
        .sum();
    assert_eq!(counted, 50, "{denied:?}");
    for event in &denied {
        assert_eq!(event.chain_key, org);
        assert!(event.details["firstAt"].is_string());
        assert!(event.details["lastAt"].is_string());
    }
    assert_eq!(heads().await, chains_before, "a denial opened a chain");
    let (_, metrics) = app
        .send(Request::get("/metrics").body(Body::empty()).unwrap())
        .await;
    let metrics = metrics.as_str().unwrap_or_default().to_owned();
    assert!(
        metrics.contains("authz_denied_unknown_organization_total 200"),
        "{metrics}"
    );
    assert!(metrics.contains("audit_outbox_depth 0"), "{metrics}");
}

on_both_backends!(
    denials_are_folded_and_never_open_a_chain_for_an_unknown_organization,
    integers_beyond_2_53_in_audit_details_are_kept_exactly,
    answers_and_records_are_bounded_by_the_request,
    an_oversized_body_is_refused_in_the_envelope_on_every_route,
);
