//! Hostile input: answers and records bounded by the request, every refusal in the
//! envelope.

use super::*;

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
        let (status, answer) = app.call("POST", path, &token, Some(&org), Some(body)).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        let size = answer.to_string().len();
        assert!(size < 150_000, "the answer is {size} bytes");
        let violations = answer["data"]["violations"].as_array().unwrap();
        assert_eq!(violations.len(), 100);
        for v in violations {
            let actual = v["actual"].as_str().unwrap();
            assert_eq!(actual.chars().count(), compliance_core::MAX_ACTUAL_CHARS);
            assert_eq!(v["truncated"], json!([{"at": "", "bytes": 60_000}]), "{v}");
            assert!(v["message"].as_str().unwrap().len() < 400, "{v}");
        }
    }
    // The check log stored the bounded form, so reading it back is bounded too.
    let (status, log) = app
        .call(
            "GET",
            "/api/compliance/audit?limit=1",
            &token,
            Some(&org),
            None,
        )
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
        let (status, body) = app
            .call("POST", path, &token, Some(&org), Some(huge.clone()))
            .await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{path}: {body}");
        assert_eq!(code(status, &body), "PAYLOAD_TOO_LARGE", "{path}");
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
    let (status, body) = app.send(request).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let details = &body["data"]["details"];
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
    assert_eq!(app.verify("org-big").await["ok"], true);
}

async fn idempotency_keys_belong_to_their_service_and_their_event(app: &TestApp) {
    let plugin = app.service_token("plugin");
    let pipeline = app.service_token("pipeline");
    let event = |org: &str, target: &str| {
        json!({"action": "plugin.upload", "actorId": "u", "orgId": org, "targetType": "plugin",
               "targetId": target, "details": {"size": 1}})
    };
    let (status, first) = app
        .post_event(&plugin, Some("K"), event("org-a", "p1"))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    // A redelivery: the stored row, nothing appended.
    let (status, again) = app
        .post_event(&plugin, Some("K"), event("org-a", "p1"))
        .await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["data"]["hash"], first["data"]["hash"]);
    // The same service, the same key, another organization: 409 naming the key, and
    // never organization A's row.
    let (status, reused) = app
        .post_event(&plugin, Some("K"), event("org-b", "p1"))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{reused}");
    assert_eq!(code(status, &reused), "CONFLICT");
    assert!(
        reused["message"].as_str().unwrap().contains("`K`"),
        "{reused}"
    );
    assert!(!reused.to_string().contains("org-a"), "{reused}");
    // ... another target or other details: 409 too.
    let (status, _) = app
        .post_event(&plugin, Some("K"), event("org-a", "p2"))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let mut other_details = event("org-a", "p1");
    other_details["details"] = json!({"size": 2});
    let (status, _) = app.post_event(&plugin, Some("K"), other_details).await;
    assert_eq!(status, StatusCode::CONFLICT);
    // Another service's K is another event: stored in B's chain.
    let (status, theirs) = app
        .post_event(&pipeline, Some("K"), event("org-b", "p1"))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{theirs}");
    assert_eq!(theirs["data"]["chainKey"], "org-b");
    assert_eq!(
        app.store.chain_batch("org-a", 0, 10).await.unwrap().len(),
        1
    );
    assert_eq!(
        app.store.chain_batch("org-b", 0, 10).await.unwrap().len(),
        1
    );
    // Racing reuses of one key for two chains: one is stored, the other refused.
    let mut racers = Vec::new();
    for org in ["org-c", "org-d", "org-c", "org-d"] {
        let router = app.router.clone();
        let token = plugin.clone();
        let body = event(org, "race");
        racers.push(tokio::spawn(async move {
            let request = Request::post("/api/audit/events")
                .header("authorization", format!("Bearer {token}"))
                .header("content-type", "application/json")
                .header("idempotency-key", "race-key")
                .body(Body::from(body.to_string()))
                .unwrap();
            router.oneshot(request).await.unwrap().status()
        }));
    }
    let mut statuses = Vec::new();
    for racer in racers {
        statuses.push(racer.await.unwrap());
    }
    let stored = app.store.chain_batch("org-c", 0, 10).await.unwrap().len()
        + app.store.chain_batch("org-d", 0, 10).await.unwrap().len();
    assert_eq!(stored, 1, "{statuses:?}");
    assert_eq!(
        statuses
            .iter()
            .filter(|s| **s == StatusCode::CREATED)
            .count(),
        1,
        "{statuses:?}"
    );
    assert!(statuses
        .iter()
        .all(|s| [StatusCode::CREATED, StatusCode::OK, StatusCode::CONFLICT].contains(s)));
}

on_both_backends!(
    idempotency_keys_belong_to_their_service_and_their_event,
    integers_beyond_2_53_in_audit_details_are_kept_exactly,
    answers_and_records_are_bounded_by_the_request,
    an_oversized_body_is_refused_in_the_envelope_on_every_route,
);
