//! The third wave tried by a hostile tester (issue 51): each test reproduces what was
//! found first, then checks the fix, on both backends.

use super::billing::{set_tier, subscription};
use super::*;
use crate::api::Answer;
use adapters::code::ErrorCode;
use adapters::http::wire::{Member, PersonalToken, TierChanged};
use entitlements::{AppliedBundle, BundleId, Tier};

const PASSWORD: &str = "correct horse battery";

/// Registers `email` and signs in: (its user id, an access token).
async fn account(app: &TestApp, email: &str) -> (String, String) {
    let id = app.register(email, PASSWORD).await.user_id;
    (id, sign_in(app, email).await)
}

/// A fresh access token for `email`.
async fn sign_in(app: &TestApp, email: &str) -> String {
    app.login(email, PASSWORD).await.access_token
}

fn get(path: &str) -> Request<Body> {
    Request::get(path).body(Body::empty()).unwrap()
}

/// The chained events of `action` once the relay has drained the outbox, without
/// flushing the minute's denial folds (what a person sees right after a refusal).
async fn chained_now(app: &TestApp, action: &str) -> Vec<SealedEvent> {
    for _ in 0..1000 {
        if app.store.outbox_depth().await.unwrap().rows == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let filter = adapters::storage::AuditFilter {
        action: Some(action.to_owned()),
        ..Default::default()
    };
    app.store
        .audit_events(&filter, 10_000, 0, true)
        .await
        .unwrap()
        .0
}

/// `/metrics` shows reporting's gauges on both backends (on PostgreSQL `SUM(bigint)`
/// is numeric and did not decode, so the section was silently dropped), and a
/// section that cannot be read is counted and visible, never an absent family alone.
async fn metrics_show_every_section_or_count_its_failure(app: &TestApp) {
    app.sql(
        "INSERT INTO report_unattributed (resource, reason, executions, first_seen, last_seen) \
         VALUES ('arn:aws:codepipeline:eu-west-1:1:a', 'unregistered', 3, '2026-11-01T00:00:00Z', '2026-11-01T00:00:00Z'), \
                ('arn:aws:codepipeline:eu-west-1:1:b', 'unregistered', 4, '2026-11-01T00:00:00Z', '2026-11-01T00:00:00Z')",
    )
    .await;
    let (status, text) = app.send(get("/metrics")).await;
    assert_eq!(status, StatusCode::OK);
    let text = text.as_str().unwrap().to_owned();
    assert!(text.contains("report_unattributed_resources 2\n"), "{text}");
    assert!(
        text.contains("report_unattributed_executions 7\n"),
        "{text}"
    );
    assert!(
        text.contains("metrics_section_errors_total{section=\"reports\"} 0\n"),
        "{text}"
    );
    // The section's table is gone: the failure is counted, the rest still served.
    app.sql("DROP TABLE report_unattributed").await;
    let (status, text) = app.send(get("/metrics")).await;
    assert_eq!(status, StatusCode::OK);
    let text = text.as_str().unwrap().to_owned();
    assert!(
        text.contains("metrics_section_errors_total{section=\"reports\"} 1\n"),
        "{text}"
    );
    assert!(!text.contains("report_unattributed_resources"), "{text}");
    assert!(text.contains("audit_outbox_depth"), "{text}");
    assert!(
        text.contains("metrics_section_errors_total{section=\"outbox\"} 0\n"),
        "{text}"
    );
}

/// Every refused state change is audited as authz.denied with outcome failure, at
/// once (the first refusal of a minute; the others fold into one more event): a
/// super-admin-only route of an organization in its chain, the platform's routes
/// (registry, super-admin, billing) in the system organization's, a personal token
/// used beyond its scope in the organization it tried. Reads are not audited.
async fn every_refused_state_change_is_audited(app: &TestApp) {
    let (system, _) = app.system().await;
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let refused = [
        (
            "PUT",
            format!("/api/organization/{acme}"),
            Some(json!({"name": "renamed"})),
        ),
        (
            "POST",
            "/api/images/copy".to_owned(),
            Some(json!({"source": "acme/a:1", "target": "system/a:1"})),
        ),
        (
            "DELETE",
            "/api/images/acme/app/manifests/1".to_owned(),
            None,
        ),
        ("PUT", "/api/admin/super-admins/alice".to_owned(), None),
        ("DELETE", "/api/plugins/queue/dlq".to_owned(), None),
        (
            "PUT",
            format!("/api/organization/{acme}/seat-limit"),
            Some(json!({"seats": 3, "version": 1})),
        ),
    ];
    for (method, path, body) in &refused {
        let Answer(status, answer) = app
            .by(&alice)
            .method(method, path)
            .json_opt(body.clone())
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {answer}");
    }
    // A read refused is not audited.
    app.by(&alice)
        .get("/api/quotas/all")
        .await
        .expect(StatusCode::FORBIDDEN);

    let denied = chained_now(app, "authz.denied").await;
    let of_alice: Vec<_> = denied.iter().filter(|e| e.actor_id == "alice").collect();
    // One per organization and minute at once: acme's, and the system's first.
    let in_acme: Vec<_> = of_alice.iter().filter(|e| e.chain_key == acme).collect();
    assert_eq!(in_acme.len(), 1, "{of_alice:?}");
    assert_eq!(
        in_acme[0].target_id.as_deref(),
        Some("PUT /api/organization/{id}")
    );
    assert_eq!(in_acme[0].outcome.as_deref(), Some("failure"));
    assert_eq!(in_acme[0].details["count"], 1);
    let in_system: Vec<_> = of_alice.iter().filter(|e| e.chain_key == system).collect();
    assert_eq!(in_system.len(), 1, "{of_alice:?}");
    assert_eq!(
        in_system[0].target_id.as_deref(),
        Some("POST /api/images/copy")
    );

    // The minute's other refusals fold into one event that counts them.
    let all = app.audited("authz.denied").await;
    let counted: u64 = all
        .iter()
        .filter(|e| e.actor_id == "alice" && e.chain_key == system)
        .map(|e| e.details["count"].as_u64().unwrap())
        .sum();
    assert_eq!(counted, 5, "{all:?}");
    assert!(
        all.iter()
            .filter(|e| e.actor_id == "alice" && e.chain_key == system)
            .count()
            <= 4
    );

    // A personal access token bound to an organization, used for a permission it
    // does not carry: audited in that organization.
    let (gus_id, gus) = account(app, "gus@example.com").await;
    let gus_org = app
        .by(&gus)
        .post("/api/organization")
        .json(json!({"name": "gus-org"}))
        .await
        .expect(StatusCode::CREATED)
        .id();
    let expires = (Utc::now() + chrono::Duration::days(1)).to_rfc3339();
    let created: PersonalToken = app
        .by(&gus).post("/api/me/tokens").json(json!({"name": "ci", "expiresAt": expires, "orgId": gus_org, "permissions": ["compliance:read"]}))
        .await
        .expect(StatusCode::CREATED)
        .data();
    let pat = created.token.expect("the secret is answered once");
    app
        .by(&pat).org(&gus_org).post("/api/compliance/rules").json(json!({"name": "r", "target": "plugin", "severity": "error", "field": "version", "operator": "neq", "value": "latest"}))
        .await.expect(StatusCode::FORBIDDEN);
    let scoped: Vec<_> = app
        .audited("authz.denied")
        .await
        .into_iter()
        .filter(|e| e.actor_id == gus_id && e.details["reason"] == "token_scope")
        .collect();
    assert_eq!(scoped.len(), 1, "{scoped:?}");
    assert_eq!(scoped[0].chain_key, gus_org);
}

/// A tier change keeps nothing the new tier cannot buy: a Pro organization with the
/// AUDIT_LOG bundle moved to Developer loses the bundle (and so the audit log) in the
/// same transaction, audited billing.addon.remove, and the answer lists it; bundles
/// the new tier may buy stay.
async fn a_tier_change_keeps_nothing_the_new_tier_cannot_buy(app: &TestApp) {
    let billing = app
        .beside(&[
            ("BILLING_BUNDLES_ENABLED", "true"),
            ("FEATURES_FOR_ALL_TIERS", ""),
        ])
        .await;
    let acme = billing.org("alice", "acme").await;
    let alice = billing.token("alice", "alice@example.com");
    set_tier(&billing, &acme, "pro").await;
    let id = subscription(&billing, &alice, &acme).await.id;
    for bundle in [
        json!({"bundleId": "AUDIT_LOG", "quantity": 1}),
        json!({"bundleId": "SEAT_PACK", "quantity": 2}),
    ] {
        billing
            .by(&alice)
            .org(&acme)
            .post(format!("/api/subscriptions/{id}/addons"))
            .json(bundle)
            .await
            .expect(StatusCode::OK);
    }
    let Answer(status, _) = billing.by(&alice).org(&acme).get("/api/audit").await;
    assert_eq!(status, StatusCode::OK, "the bundle opens the audit log");

    let root = billing.super_token().await;
    let step = billing.step_up("root", 0);
    let changed: TierChanged = billing
        .by(&root)
        .step_up(step)
        .patch(format!("/api/organization/{acme}/tier"))
        .json(json!({"tier": "developer"}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(changed.organization.tier, Tier::Developer);
    assert_eq!(
        changed.removed_bundles,
        [AppliedBundle {
            bundle: BundleId::AuditLog,
            quantity: 1
        }]
    );
    let addons = subscription(&billing, &alice, &acme).await.addons;
    let held: Vec<BundleId> = addons.iter().map(|a| a.bundle).collect();
    assert_eq!(held, [BundleId::SeatPack], "{addons:?}");
    billing
        .by(&alice)
        .org(&acme)
        .get("/api/audit")
        .await
        .refused(ErrorCode::FeatureNotAvailable);
    let removed = billing.audited("billing.addon.remove").await;
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert_eq!(removed[0].details["bundleId"], "AUDIT_LOG");
    assert_eq!(removed[0].details["reason"], "tier_change");
    assert_eq!(removed[0].chain_key, acme);

    // The quota override's tier path keeps the same rule.
    set_tier(&billing, &acme, "pro").await;
    billing
        .by(&alice)
        .org(&acme)
        .post(format!("/api/subscriptions/{id}/addons"))
        .json(json!({"bundleId": "AUDIT_LOG", "quantity": 1}))
        .await
        .expect(StatusCode::OK);
    set_tier(&billing, &acme, "developer").await;
    assert_eq!(billing.audited("billing.addon.remove").await.len(), 2);
    billing.stop().await;
}

/// Follows the verification link mailed last to `email`.
async fn verify_address(app: &TestApp, email: &str) {
    let body: String = sqlx::query_scalar(&format!(
        "SELECT body FROM account_mail WHERE recipient = '{email}' AND kind = 'verify-email' ORDER BY created_at DESC LIMIT 1"
    ))
    .fetch_one(adapters::storage::pool_for_tests(&app.store))
    .await
    .unwrap();
    let start = body.find("token=").unwrap() + "token=".len();
    let token: String = body[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .collect();
    app.public()
        .post("/api/auth/verify-email")
        .json(json!({"token": token}))
        .await
        .expect(StatusCode::OK);
}

/// Sends an invitation of `email` into `org`; its id.
async fn invite(app: &TestApp, token: &str, org: &str, email: &str) -> String {
    app.by(token)
        .org(org)
        .post("/api/invitation/send")
        .json(json!({"email": email}))
        .await
        .expect(StatusCode::CREATED)
        .id()
}

/// After an account changes its e-mail, its older access tokens are not taken to
/// hold the old address (an invitation sent to it is not theirs), nor the new one
/// until it is verified; then the same token holds the new one.
async fn an_email_change_takes_effect_on_every_token(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    account(app, "old@example.com").await;
    verify_address(app, "old@example.com").await;
    // Signed in once verified: the token claims old@example.com.
    let old_token = sign_in(app, "old@example.com").await;
    let Answer(status, me) = app.by(&old_token).get("/api/me").await;
    assert_eq!(status, StatusCode::OK, "{me}");
    app.by(&old_token)
        .put("/api/me")
        .json(json!({"email": "new@example.com"}))
        .await
        .expect(StatusCode::OK);
    // The old address's invitation is not the token's any more.
    let to_old = invite(app, &alice, &acme, "old@example.com").await;
    app.by(&old_token)
        .post(format!("/api/invitation/{to_old}/accept"))
        .await
        .refused(ErrorCode::NotFound);
    // Nor is the new address's, until it is verified.
    let to_new = invite(app, &alice, &acme, "new@example.com").await;
    app.by(&old_token)
        .post(format!("/api/invitation/{to_new}/accept"))
        .await
        .refused(ErrorCode::NotFound);
    verify_address(app, "new@example.com").await;
    let joined: Member = app
        .by(&old_token)
        .post(format!("/api/invitation/{to_new}/accept"))
        .await
        .expect(StatusCode::CREATED)
        .data();
    assert_eq!(joined.email.as_deref(), Some("new@example.com"));
}

/// The sign-in throttle's one statement (`Transaction::charge_signin_attempt`) decides as
/// `tenancy::ThrottlePolicy::charge` does, over a grid of runs: their count, how long
/// ago they began and how long ago their latest failure was.
async fn the_throttle_statement_decides_as_the_policy(app: &TestApp) {
    use chrono::SecondsFormat;
    use tenancy::{Charge, Failures, ThrottlePolicy};
    let policy = ThrottlePolicy::default();
    let now = Utc::now();
    let stamp = |at: chrono::DateTime<Utc>| at.to_rfc3339_opts(SecondsFormat::Micros, true);
    let mut cases = 0;
    for count in [
        None,
        Some(1u32),
        Some(3),
        Some(4),
        Some(9),
        Some(10),
        Some(11),
    ] {
        for first_ago in [1i64, 14, 16, 40] {
            for last_ago in [0i64, 5, 14, 16, 40] {
                if last_ago > first_ago {
                    continue;
                }
                let key = format!("grid:{cases}");
                let before = count.map(|count| Failures {
                    count,
                    first_at: now - chrono::Duration::minutes(first_ago),
                    last_at: now - chrono::Duration::minutes(last_ago),
                });
                if let Some(f) = before {
                    app.sql(&format!(
                        "INSERT INTO signin_failures (key, failures, first_at, last_at) VALUES ('{key}', {}, '{}', '{}')",
                        f.count,
                        stamp(f.first_at),
                        stamp(f.last_at)
                    ))
                    .await;
                }
                let mut tx = app.store.transaction().await.unwrap();
                let charged = tx
                    .charge_signin_attempt(
                        &[key.as_str()],
                        (
                            policy.forgotten_since(now),
                            policy.lock_after,
                            now - policy.lockout,
                        ),
                        now,
                    )
                    .await
                    .unwrap();
                tx.commit().await.unwrap();
                match (policy.charge(before.as_ref(), now), charged) {
                    (Charge::Locked(_), None) => {}
                    (Charge::Taken(expected, _), Some(found)) => {
                        assert_eq!(found.len(), 1);
                        assert_eq!(found[0].count, expected.count, "{before:?}");
                        assert_eq!(
                            stamp(found[0].first_at),
                            stamp(expected.first_at),
                            "{before:?}"
                        );
                    }
                    (expected, found) => panic!("{before:?}: policy {expected:?}, SQL {found:?}"),
                }
                cases += 1;
            }
        }
    }
    assert!(cases > 50);
}

/// 24 wrong passwords sent at once, each from its own address, against one account:
/// at most the policy's ten are judged (401 and audited), the others are refused
/// (429) unjudged; the same for 24 parallel wrong `currentPassword` guesses.
async fn parallel_guesses_are_judged_at_most_the_documented_number(app: &TestApp) {
    let proxied = app.beside(&[("TRUST_PROXY_HEADERS", "true")]).await;
    let (_, token) = account(&proxied, "vic@example.com").await;
    let requests = (0..24)
        .map(|i| {
            let mut request = app.public().post("/api/auth/login").json(json!({"identifier": "vic@example.com", "password": format!("wrong guess {i}")})).request();
            request
                .headers_mut()
                .insert("x-forwarded-for", format!("198.51.100.{i}").parse().unwrap());
            request
        })
        .collect();
    let answers = proxied.concurrently(requests).await;
    let judged = answers
        .iter()
        .filter(|(status, _)| *status == StatusCode::UNAUTHORIZED)
        .count();
    let refused = answers
        .iter()
        .filter(|(status, body)| {
            *status == StatusCode::TOO_MANY_REQUESTS
                && code(*status, body) == ErrorCode::TooManyAttempts
        })
        .count();
    assert_eq!(judged + refused, 24, "{answers:?}");
    assert!(judged <= 10, "{judged} guesses were judged");
    assert_eq!(judged, 10, "the ten allowed are all judged");
    assert_eq!(proxied.audited("user.login.failed").await.len(), judged);

    // The same account's password change: 24 parallel wrong current passwords.
    let (_, token_b) = account(&proxied, "wes@example.com").await;
    let _ = token;
    let requests = (0..24)
        .map(|i| {
            app.by(&token_b).put("/api/me/password").json(json!({"currentPassword": format!("wrong guess {i}"), "newPassword": "another horse battery"})).request()
        })
        .collect();
    let answers = proxied.concurrently(requests).await;
    let judged = answers
        .iter()
        .filter(|(status, _)| *status == StatusCode::UNAUTHORIZED)
        .count();
    let refused = answers
        .iter()
        .filter(|(status, _)| *status == StatusCode::TOO_MANY_REQUESTS)
        .count();
    assert_eq!(judged + refused, 24, "{answers:?}");
    assert_eq!(judged, 10, "{answers:?}");
    proxied.stop().await;
}

/// Registration costs an argon2 hash: bounded per client address (ten in the
/// policy's window, then 429), while another address still registers.
async fn registration_is_bounded_per_client_address(app: &TestApp) {
    let proxied = app.beside(&[("TRUST_PROXY_HEADERS", "true")]).await;
    let register = |i: usize, address: &'static str| {
        let mut request = app
            .public()
            .post("/api/auth/register")
            .json(json!({"email": format!("r{i}@example.com"), "password": PASSWORD}))
            .request();
        request
            .headers_mut()
            .insert("x-forwarded-for", address.parse().unwrap());
        request
    };
    let mut created = 0;
    let mut refused = 0;
    for i in 0..25 {
        let (status, body) = proxied.send(register(i, "203.0.113.7")).await;
        match status {
            StatusCode::CREATED => created += 1,
            StatusCode::TOO_MANY_REQUESTS => {
                assert_eq!(code(status, &body), ErrorCode::TooManyAttempts);
                refused += 1;
            }
            other => panic!("{other}: {body}"),
        }
    }
    assert_eq!((created, refused), (10, 15));
    let (status, body) = proxied.send(register(99, "203.0.113.8")).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    proxied.stop().await;
}

on_both_backends!(
    the_throttle_statement_decides_as_the_policy,
    parallel_guesses_are_judged_at_most_the_documented_number,
    registration_is_bounded_per_client_address,
    an_email_change_takes_effect_on_every_token,
    metrics_show_every_section_or_count_its_failure,
    every_refused_state_change_is_audited,
    a_tier_change_keeps_nothing_the_new_tier_cannot_buy,
);
