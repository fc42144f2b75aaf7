//! Integrity: nothing unreadable passes, no tenant is answered with another's row,
//! nothing acknowledged is lost.

use super::*;
use crate::api::Answer;
use adapters::code::ErrorCode;
use adapters::http::wire::AuditEvent;

/// A published rule, subscribed and activated by a fresh organization.
async fn subscriber(app: &TestApp) -> (String, String, String) {
    let (system, root) = app.system().await;
    let published = json!({"name": "no latest", "target": "plugin", "severity": "error",
        "field": "version", "operator": "neq", "value": "latest", "scope": "published"});
    let rule_id = app.rule(&root, &system, published).await;
    let org = app.org("sub-owner", "subscriber").await;
    let token = app.token("sub-owner", "sub-owner@example.com");
    app.by(&token)
        .org(&org)
        .post("/api/compliance/subscriptions")
        .json(json!({"ruleId": rule_id}))
        .await
        .expect(StatusCode::CREATED);
    app.by(&token)
        .org(&org)
        .patch(format!("/api/compliance/subscriptions/{rule_id}"))
        .json(json!({"isActive": true}))
        .await
        .expect(StatusCode::OK);
    (org, token, rule_id)
}

async fn an_unreadable_published_rule_fails_validation_closed(app: &TestApp) {
    let (org, token, rule_id) = subscriber(app).await;
    app.sql(&format!(
        "UPDATE rule_versions SET body = '{{not json' WHERE rule_id = '{rule_id}'"
    ))
    .await;
    for dry_run in [true, false] {
        // A document the rule would block, and one it would pass: neither passes.
        for version in ["latest", "1.0.0"] {
            let Answer(status, body) = app
                .validate(&token, &org, json!({"version": version}), None, dry_run)
                .await;
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
            assert_eq!(code(status, &body), ErrorCode::ComplianceUnavailable);
        }
    }
    let Answer(status, body) = app
        .by(&token)
        .org(&org)
        .get("/api/compliance/subscriptions/enforced")
        .await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    assert_eq!(code(status, &body), ErrorCode::InternalError);
}

async fn rows_that_do_not_decode_are_errors_never_defaults(app: &TestApp) {
    let org = app.org("decoder", "decoded").await;
    let token = app.token("decoder", "decoder@example.com");
    let get = || app.by(&token).org(&org).get("/api/organization");
    let Answer(status, body) = get().await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // A timestamp that is not one: not 1970, an error.
    app.sql(&format!(
        "UPDATE organizations SET created_at = 'yesterday' WHERE id = '{org}'"
    ))
    .await;
    let Answer(status, body) = get().await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    assert!(!body.to_string().contains("1970"), "{body}");
    app.sql(&format!(
        "UPDATE organizations SET created_at = '2026-01-01T00:00:00.000000Z' WHERE id = '{org}'"
    ))
    .await;
    // An unknown tier: not developer, an error.
    app.sql(&format!(
        "UPDATE organizations SET tier = 'platinum' WHERE id = '{org}'"
    ))
    .await;
    let Answer(status, body) = get().await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    app.sql(&format!(
        "UPDATE organizations SET tier = 'developer' WHERE id = '{org}'"
    ))
    .await;
    let Answer(status, _) = get().await;
    assert_eq!(status, StatusCode::OK);
    // An unknown permission in a Role the caller holds: not dropped, an error.
    app.sql(&format!(
        "UPDATE roles SET permissions = '[\"org:read\", \"org:teleport\"]' WHERE org_id = '{org}'"
    ))
    .await;
    app.by(&token)
        .get(format!("/api/organization/{org}/roles"))
        .await
        .expect(StatusCode::INTERNAL_SERVER_ERROR);
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
    let first: AuditEvent = Answer(status, first).expect(StatusCode::CREATED).data();
    // A redelivery: the stored row, nothing appended.
    let (status, again) = app
        .post_event(&plugin, Some("K"), event("org-a", "p1"))
        .await;
    let again: AuditEvent = Answer(status, again).expect(StatusCode::OK).data();
    assert_eq!(again.hash, first.hash);
    // The same service, the same key, another organization: 409 naming the key, and
    // never organization A's row.
    let (status, reused) = app
        .post_event(&plugin, Some("K"), event("org-b", "p1"))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{reused}");
    assert_eq!(code(status, &reused), ErrorCode::Conflict);
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
    let theirs: AuditEvent = Answer(status, theirs).expect(StatusCode::CREATED).data();
    assert_eq!(theirs.chain_key, "org-b");
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
    an_unreadable_published_rule_fails_validation_closed,
    rows_that_do_not_decode_are_errors_never_defaults,
    idempotency_keys_belong_to_their_service_and_their_event,
);

/// PostgreSQL only: connections killed under load (what a restart does) answer 503,
/// never 500, and the server recovers by itself.
#[tokio::test]
async fn killed_connections_answer_503_and_the_server_recovers() {
    let Some(app) = TestApp::postgres().await else {
        return;
    };
    let org = app.org("killer", "killed").await;
    let token = app.token("killer", "killer@example.com");
    let database: String = sqlx::query_scalar("SELECT current_database()::text")
        .fetch_one(adapters::storage::pool_for_tests(&app.store))
        .await
        .unwrap();
    let admin_url = std::env::var("TEST_DATABASE_URL").unwrap();
    let admin = adapters::storage::Store::connect(&admin_url).await.unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let killer = {
        let stop = stop.clone();
        let admin = admin.clone();
        tokio::spawn(async move {
            let mut killed = 0i64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let n: i64 = sqlx::query_scalar(
                    "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity
                     WHERE datname = $1 AND pid <> pg_backend_pid()",
                )
                .bind(&database)
                .fetch_one(adapters::storage::pool_for_tests(&admin))
                .await
                .unwrap_or(0);
                killed += n;
                tokio::time::sleep(std::time::Duration::from_millis(30)).await;
            }
            killed
        })
    };
    let mut clients = Vec::new();
    for i in 0..8 {
        let router = app.router.clone();
        let token = token.clone();
        let org = org.clone();
        clients.push(tokio::spawn(async move {
            let mut statuses = Vec::new();
            for n in 0..40 {
                let request = if n % 2 == 0 {
                    Request::get("/api/organization")
                        .header("authorization", format!("Bearer {token}"))
                        .header("x-org-id", &org)
                        .body(Body::empty())
                        .unwrap()
                } else {
                    Request::post("/api/compliance/rules")
                        .header("authorization", format!("Bearer {token}"))
                        .header("x-org-id", &org)
                        .header("content-type", "application/json")
                        .body(Body::from(
                            json!({"name": format!("r{i}-{n}"), "target": "plugin", "severity": "error",
                                   "field": "a", "operator": "exists"})
                            .to_string(),
                        ))
                        .unwrap()
                };
                let response = router.clone().oneshot(request).await.unwrap();
                statuses.push(response.status());
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            statuses
        }));
    }
    let mut statuses = Vec::new();
    for client in clients {
        statuses.extend(client.await.unwrap());
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let killed = killer.await.unwrap();
    assert!(killed > 0, "no connection was killed");
    let failures: Vec<_> = statuses
        .iter()
        .filter(|s| !(s.is_success() || **s == StatusCode::SERVICE_UNAVAILABLE))
        .collect();
    assert!(
        failures.is_empty(),
        "answers other than 2xx and 503: {failures:?}"
    );
    // Recovered by itself.
    app.by(&token)
        .org(&org)
        .get("/api/organization")
        .await
        .expect(StatusCode::OK);
    admin.close().await;
    app.finish().await;
}
