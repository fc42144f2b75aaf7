//! The audit trail in the server (document 3, SEMANTICS.md 2).

use super::*;
use crate::api::{pagination, Answer};
use adapters::code::ErrorCode;
use adapters::emitter::{AuditClient, Delivery, OutgoingEvent};
use adapters::http::wire::{AuditEvent, ChainVerdict};

impl TestApp {
    pub fn service_token(&self, service: &str) -> String {
        let mut claims = Claims::user(
            service,
            None,
            Utc::now(),
            std::time::Duration::from_secs(3600),
        );
        claims.service = Some(service.to_owned());
        self.keys.sign(&claims).unwrap()
    }

    /// A token of the bootstrapped super-admin `root` (the system organization is
    /// created by the bootstrap identifier if it is not there yet).
    pub async fn super_token(&self) -> String {
        self.system().await;
        self.token("root", ROOT_EMAIL)
    }

    pub async fn post_event(
        &self,
        token: &str,
        key: Option<&str>,
        body: Value,
    ) -> (StatusCode, Value) {
        let mut request = Request::post("/api/audit/events")
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json");
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        self.send(request.body(Body::from(body.to_string())).unwrap())
            .await
    }

    pub async fn verify(&self, org: &str) -> ChainVerdict {
        self.by(&self.super_token().await)
            .get(format!("/api/audit/verify?orgId={org}"))
            .await
            .expect(StatusCode::OK)
            .data()
    }
}

/// An ingest request of `body` under `key`.
fn event_request(token: &str, key: &str, body: &Value) -> Request<Body> {
    Request::post("/api/audit/events")
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .header("idempotency-key", key)
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// The statuses of `bodies` sent at the same moment, each under `key`.
async fn delivered_at_once(
    app: &TestApp,
    token: &str,
    key: &str,
    bodies: &[Value],
) -> Vec<StatusCode> {
    let requests = bodies
        .iter()
        .map(|b| event_request(token, key, b))
        .collect();
    app.concurrently(requests)
        .await
        .into_iter()
        .map(|(status, _)| status)
        .collect()
}

fn event(org: &str, n: usize) -> Value {
    json!({"action": "plugin.upload", "actorId": "user-1", "orgId": org, "targetType": "plugin",
           "targetId": format!("plugin-{n}"), "details": {"n": n, "awsAccountId": "123456789012"}})
}

async fn thirty_two_concurrent_writers_never_fork_a_chain(app: &TestApp) {
    let token = app.service_token("plugin");
    let mut writers = Vec::new();
    for w in 0..32 {
        let router = app.router.clone();
        let token = token.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..8 {
                let request =
                    event_request(&token, &format!("w{w}-e{i}"), &event("org-busy", w * 8 + i));
                let response = router.clone().oneshot(request).await.unwrap();
                assert_eq!(response.status(), StatusCode::CREATED);
            }
        }));
    }
    for writer in writers {
        writer.await.unwrap();
    }
    let rows = app.store.chain_batch("org-busy", 0, 1000).await.unwrap();
    assert_eq!(rows.len(), 256);
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row.seq, i as u64 + 1, "every seq once");
        if i > 0 {
            assert_eq!(
                row.prev_hash,
                rows[i - 1].hash,
                "no two rows share a predecessor"
            );
        }
    }
    assert_eq!(rows[0].details["awsAccountId"], "[REDACTED]");
    let verdict = app.verify("org-busy").await;
    assert_eq!(
        (verdict.ok, verdict.count, verdict.last_seq),
        (true, 256, Some(256))
    );
    assert_eq!(verdict.head_hash.as_deref(), Some(rows[255].hash.as_str()));
}

async fn tampering_is_reported_at_the_row_and_pruning_a_prefix_is_not(app: &TestApp) {
    let token = app.service_token("plugin");
    for n in 0..10 {
        let (status, _) = app
            .post_event(&token, Some(&format!("k{n}")), event("org-t", n))
            .await;
        assert_eq!(status, StatusCode::CREATED);
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    assert!(app.verify("org-t").await.ok);
    // Retention: everything before the 5th row's createdAt goes, a prefix of the chain.
    let rows = app.store.chain_batch("org-t", 0, 100).await.unwrap();
    let pruned = app.store.prune_audit(rows[4].created_at).await.unwrap();
    assert_eq!(pruned, 4);
    let verdict = app.verify("org-t").await;
    assert_eq!(
        (verdict.ok, verdict.first_seq, verdict.count),
        (true, Some(5), 6)
    );
    // Someone with database access edits a stored row.
    sqlx::query(
        r#"UPDATE audit_events SET details = '{"n": 99}' WHERE chain_key = 'org-t' AND seq = 7"#,
    )
    .execute(adapters::storage::pool_for_tests(&app.store))
    .await
    .unwrap();
    let verdict = app.verify("org-t").await;
    assert!(!verdict.ok);
    assert_eq!(verdict.broken_at.map(|row| row.seq), Some(7));
    assert_eq!(verdict.reason.unwrap()["kind"], "hashMismatch");
    assert_eq!(verdict.count, 3);
}

async fn a_redelivery_returns_the_stored_row_and_appends_nothing(app: &TestApp) {
    let token = app.service_token("plugin");
    let (status, first) = app
        .post_event(&token, Some("once"), event("org-i", 1))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, again) = app
        .post_event(&token, Some("once"), event("org-i", 1))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (first, again): (AuditEvent, AuditEvent) = (
        Answer(StatusCode::CREATED, first).data(),
        Answer(StatusCode::OK, again).data(),
    );
    assert_eq!((again.seq, again.hash), (first.seq, first.hash));
    // Eight deliveries of one key at the same moment: one row.
    let statuses = delivered_at_once(app, &token, "race", &vec![event("org-i", 2); 8]).await;
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
        .all(|s| *s == StatusCode::CREATED || *s == StatusCode::OK));
    let rows = app.store.chain_batch("org-i", 0, 100).await.unwrap();
    assert_eq!(rows.len(), 2);
    // One key for two events, eight deliveries at once (sealed together or not):
    // one row; the same event again is answered with it, the other event is 409.
    let bodies: Vec<Value> = (0..8).map(|i| event("org-i", 3 + i % 2)).collect();
    let statuses = delivered_at_once(app, &token, "mixed", &bodies).await;
    let count = |status: StatusCode| statuses.iter().filter(|s| **s == status).count();
    assert_eq!(
        (
            count(StatusCode::CREATED),
            count(StatusCode::OK),
            count(StatusCode::CONFLICT)
        ),
        (1, 3, 4),
        "{statuses:?}"
    );
    let rows = app.store.chain_batch("org-i", 0, 100).await.unwrap();
    assert_eq!(rows.len(), 3);
    assert!(app.verify("org-i").await.ok);
}

async fn who_may_post_read_and_verify(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let globex = app.org("bob", "globex").await;
    let service = app.service_token("plugin");
    let alice = app.token("alice", "alice@example.com");
    // Ingest: services only, allow-listed actions, a key.
    let (status, body) = app.post_event(&alice, Some("k"), event(&acme, 1)).await;
    assert_eq!(code(status, &body), ErrorCode::Forbidden);
    let forged = json!({"action": "user.login", "actorId": "alice", "orgId": acme});
    let (status, body) = app.post_event(&service, Some("k1"), forged).await;
    assert_eq!(
        (status, code(status, &body)),
        (StatusCode::FORBIDDEN, ErrorCode::Forbidden)
    );
    let (status, body) = app
        .post_event(
            &service,
            Some("k2"),
            json!({"action": "made.up", "actorId": "a", "orgId": acme}),
        )
        .await;
    assert_eq!(code(status, &body), ErrorCode::ValidationError);
    let (status, body) = app.post_event(&service, None, event(&acme, 1)).await;
    assert_eq!(code(status, &body), ErrorCode::ValidationError);
    let (status, body) = app.post_event(&service, Some("k3"), json!({"action": "plugin.upload", "actorId": "a", "orgId": acme, "service": "pipeline"})).await;
    assert_eq!(
        code(status, &body),
        ErrorCode::ValidationError,
        "the token names the service"
    );
    for (n, org) in [(1, &acme), (2, &globex), (3, &acme)] {
        let (status, _) = app
            .post_event(&service, Some(&format!("ok{n}")), event(org, n))
            .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    // An admin event that operates on acme from the system organization is acme's too.
    let (status, _) = app.post_event(&service, Some("ok4"), json!({"action": "quota.reset", "actorId": "root", "orgId": "system-org", "affectedOrgId": acme})).await;
    assert_eq!(status, StatusCode::CREATED);

    // Read: audit:read in the x-org-id organization, forced to it.
    let Answer(status, body) = app
        .by(&alice)
        .org(&acme)
        .get(format!("/api/audit?action=plugin.upload&orgId={globex}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let targets: Vec<&str> = body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["targetId"].as_str().unwrap())
        .collect();
    assert_eq!(
        targets,
        ["plugin-3", "plugin-1"],
        "newest first, acme's only, whatever orgId says"
    );
    let Answer(_, body) = app
        .by(&alice)
        .org(&acme)
        .get("/api/audit?action=quota.reset")
        .await;
    assert_eq!(pagination(&body).total, 1);
    app.by(&alice)
        .post(format!("/api/organization/{acme}/members"))
        .json(json!({"userId": "carl"}))
        .await;
    let carl = app.token("carl", "carl@example.com");
    let Answer(status, body) = app.by(&carl).org(&acme).get("/api/audit").await;
    assert_eq!(
        code(status, &body),
        ErrorCode::Forbidden,
        "a member lacks audit:read"
    );
    app.by(&alice)
        .org(&globex)
        .get("/api/audit")
        .await
        .refused(ErrorCode::TenantForbidden);
    app.by(&alice)
        .org(&acme)
        .get("/api/audit?from=yesterday")
        .await
        .refused(ErrorCode::ValidationError);

    // Verify: super-admins only.
    app.by(&alice)
        .get(format!("/api/audit/verify?orgId={acme}"))
        .await
        .refused(ErrorCode::Forbidden);
    app.by(&app.super_token().await)
        .get("/api/audit/verify")
        .await
        .refused(ErrorCode::ValidationError);
    assert!(app.verify(&globex).await.ok);
}

async fn the_servers_own_actions_reach_the_chain(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    app.by(&alice)
        .post(format!("/api/organization/{acme}/members"))
        .json(json!({"userId": "bob"}))
        .await;
    let mut seen = Vec::new();
    for _ in 0..50 {
        let Answer(_, body) = app
            .by(&alice)
            .org(&acme)
            .get("/api/audit?sortOrder=asc")
            .await;
        seen = body["events"].as_array().cloned().unwrap_or_default();
        if seen.len() >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let actions: Vec<&str> = seen.iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["org.create", "org.member.add"]);
    assert_eq!(seen[0]["seq"], 1);
    assert!(app.verify(&acme).await.ok);
}

async fn the_emitter_spools_while_the_server_is_down_and_delivers_once_when_it_is_back(
    app: &TestApp,
) {
    // A port with nothing behind it.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let spool = std::env::temp_dir().join(format!("spool-{}", uuid::Uuid::new_v4()));
    let client = AuditClient::new(
        &format!("http://127.0.0.1:{port}"),
        &app.service_token("pipeline"),
        &spool,
        3,
    )
    .unwrap();
    let events: Vec<OutgoingEvent> = (0..4)
        .map(|n| {
            let mut e = OutgoingEvent::new("pipeline.create", "user-9", "org-e");
            e.target_id = Some(format!("pipeline-{n}"));
            e
        })
        .collect();
    for e in &events {
        assert_eq!(client.deliver_or_spool(e.clone()).await, Delivery::Retry);
    }
    assert_eq!(client.spooled(), 3, "the spool is bounded");
    let counters = client.counters();
    let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        (
            load(&counters.spool_enqueued),
            load(&counters.spool_dropped)
        ),
        (3, 1)
    );

    // The server comes back on that port.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    let router = app.router.clone();
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    assert_eq!(client.redeliver().await, 3);
    assert_eq!(client.spooled(), 0);
    assert_eq!(client.redeliver().await, 0);
    // A live attempt of an already delivered event collapses to the same row.
    assert_eq!(
        client.deliver_or_spool(events[0].clone()).await,
        Delivery::Delivered
    );
    let rows = app.store.chain_batch("org-e", 0, 100).await.unwrap();
    assert_eq!(rows.len(), 3, "each spooled event stored once");
    assert_eq!(load(&counters.spool_redelivered), 3);
    // A refused event is dropped and counted, not spooled.
    let mut forged = OutgoingEvent::new("user.login", "mallory", "org-e");
    forged.target_id = None;
    assert_eq!(client.deliver_or_spool(forged).await, Delivery::Refused);
    assert_eq!((client.spooled(), load(&counters.dropped)), (0, 1));
    server.abort();
    let _ = std::fs::remove_dir_all(spool);
}

/// Events of several chains arriving together are sealed together, each chain in
/// its own order; an event refused among them (400) disturbs none of the others.
async fn events_of_several_chains_sealed_together_stay_apart(app: &TestApp) {
    let token = app.service_token("plugin");
    let mut requests = Vec::new();
    for i in 0..48 {
        let mut body = event(&format!("org-many-{}", i % 3), i);
        if i == 47 {
            // Not a remote service's action name.
            body["action"] = json!("Not An Action");
        }
        requests.push(event_request(&token, &format!("many-{i}"), &body));
    }
    let answers = app.concurrently(requests).await;
    for (i, (status, body)) in answers.iter().enumerate() {
        let expected = if i == 47 {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::CREATED
        };
        assert_eq!(*status, expected, "{i}: {body}");
    }
    for chain in 0..3 {
        let org = format!("org-many-{chain}");
        let rows = app.store.chain_batch(&org, 0, 100).await.unwrap();
        assert_eq!(rows.len(), if chain == 2 { 15 } else { 16 });
        for (i, row) in rows.iter().enumerate() {
            assert_eq!(row.seq, i as u64 + 1);
            assert_eq!(row.chain_key, org);
        }
        assert!(app.verify(&org).await.ok);
    }
}

on_both_backends!(
    events_of_several_chains_sealed_together_stay_apart,
    thirty_two_concurrent_writers_never_fork_a_chain,
    tampering_is_reported_at_the_row_and_pruning_a_prefix_is_not,
    a_redelivery_returns_the_stored_row_and_appends_nothing,
    who_may_post_read_and_verify,
    the_servers_own_actions_reach_the_chain,
    the_emitter_spools_while_the_server_is_down_and_delivers_once_when_it_is_back,
);
