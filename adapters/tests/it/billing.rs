//! Quotas and billing (document 2 "Quota service", document 3 "Add-on bundles",
//! SEMANTICS 3): the documents' numbers through the API, preview equal to purchase,
//! refusals with their statuses and codes, seats enforced on member add, exact
//! pooled increments under concurrency, idempotent increments, at-risk, resets,
//! API calls counted, tenant isolation.

use super::*;
use crate::api::{pagination, Answer};
use adapters::code::ErrorCode;
use adapters::http::wire::{Bundles, Entitlement, Member, Portal, Subscription};
use adapters::services::quotas::{OrgQuotas, QuotaStatus};
use entitlements::{BundleId, Dimension, Feature, Limit, LimitBreakdown, Tier};
use http_body_util::BodyExt;
use tenancy::MembershipRole;
use tower::ServiceExt;

pub async fn team_of(app: &TestApp, token: &str, root: &str, name: &str) -> String {
    app.by(token)
        .org(root)
        .post("/api/organization")
        .json(json!({"name": name, "parentOrgId": root}))
        .await
        .expect(StatusCode::CREATED)
        .id()
}

/// The breakdown of one limit of an entitlement.
fn breakdown(entitlement: &Entitlement, dimension: Dimension) -> &LimitBreakdown {
    match entitlement.limits.iter().find(|l| l.dimension == dimension) {
        Some(limit) => limit,
        None => panic!("no {dimension:?} limit: {entitlement:?}"),
    }
}

/// A limit of the subscription's entitlement, in the wire's numbers (-1 unlimited).
fn limit_of(subscription: &Subscription, dimension: Dimension) -> i64 {
    breakdown(&subscription.entitlement, dimension)
        .total
        .to_wire()
}

pub async fn subscription(app: &TestApp, token: &str, org: &str) -> Subscription {
    app.by(token)
        .org(org)
        .get("/api/subscriptions/current")
        .await
        .expect(StatusCode::OK)
        .data()
}

pub async fn set_tier(app: &TestApp, org: &str, tier: &str) {
    let root = app.super_token().await;
    let quotas: OrgQuotas = app
        .by(&root)
        .put(format!("/api/quotas/{org}"))
        .json(json!({"tier": tier}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(quotas.tier.name(), tier);
}

async fn the_documents_numbers_through_the_api(app: &TestApp) {
    let billing = app
        .beside(&[
            ("BILLING_BUNDLES_ENABLED", "true"),
            ("QUOTA_TIER_DEVELOPER_SEATS", "-1"),
            ("QUOTA_TIER_TEAM_PIPELINES", "300"),
        ])
        .await;
    let acme = billing.org("alice", "acme").await;
    let alice = billing.token("alice", "alice@example.com");
    set_tier(&billing, &acme, "pro").await;
    assert_eq!(billing.audited("billing.tier.override").await.len(), 1);

    // The bundles offered to Pro, with prices in cents and dollars.
    let offered: Bundles = billing
        .by(&alice)
        .org(&acme)
        .get("/api/bundles")
        .await
        .expect(StatusCode::OK)
        .data();
    assert!(offered.enabled);
    let offers = offered.bundles;
    assert_eq!(offers.len(), 8, "Pro may buy every bundle: {offers:?}");
    let offer = |id: BundleId| offers.iter().find(|o| o.id == id).unwrap();
    let seat = offer(BundleId::SeatPack);
    assert_eq!(
        (seat.monthly_cents, seat.annual_cents, seat.monthly_usd),
        (2500, 25000, 25.0)
    );
    assert!(seat.stackable);
    assert!(!offer(BundleId::Sso).stackable);

    // Pro + 2 seat packs = 11 seats; the preview is what the purchase commits.
    let sub = subscription(&billing, &alice, &acme).await;
    let id = sub.id.clone();
    assert_eq!(limit_of(&sub, Dimension::Seats), 1);
    let two_packs = json!({"bundleId": "SEAT_PACK", "quantity": 2});
    let preview: Subscription = billing
        .by(&alice)
        .org(&acme)
        .post(format!("/api/subscriptions/{id}/addons/preview"))
        .json(two_packs.clone())
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(limit_of(&preview, Dimension::Seats), 11);
    let seats = breakdown(&preview.entitlement, Dimension::Seats);
    assert_eq!(seats.base, Limit::Finite(1));
    assert_eq!(seats.contributions.first().map(|c| c.amount), Some(10));
    assert_eq!(
        limit_of(
            &subscription(&billing, &alice, &acme).await,
            Dimension::Seats
        ),
        1,
        "a preview commits nothing"
    );
    let bought: Subscription = billing
        .by(&alice)
        .org(&acme)
        .post(format!("/api/subscriptions/{id}/addons"))
        .json(two_packs)
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(bought.entitlement, preview.entitlement);
    assert_eq!(
        subscription(&billing, &alice, &acme).await.entitlement,
        preview.entitlement
    );
    let added = billing.audited("billing.addon.add").await;
    assert_eq!(added.len(), 1);
    assert_eq!(added[0].details["bundleId"], "SEAT_PACK");
    assert_eq!(added[0].details["quantity"], 2);

    // The seats are enforced: the owner and ten members fit, the twelfth does not.
    for i in 0..10 {
        let Answer(status, body) = billing
            .by(&alice)
            .post(format!("/api/organization/{acme}/members"))
            .json(json!({"userId": format!("member-{i}"), "role": "member"}))
            .await;
        assert_eq!(status, StatusCode::CREATED, "member {i}: {body}");
    }
    let Answer(status, body) = billing
        .by(&alice)
        .post(format!("/api/organization/{acme}/members"))
        .json(json!({"userId": "one-too-many", "role": "member"}))
        .await;
    assert_eq!(code(status, &body), ErrorCode::QuotaExceeded);
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(body["details"]["limit"], 11, "{body}");
    assert_eq!(body["details"]["dimension"], "seats", "{body}");
    let Answer(_, members) = billing
        .by(&alice)
        .get(format!("/api/organization/{acme}/members?limit=100"))
        .await;
    assert_eq!(
        pagination(&members).total,
        11,
        "the refused member is not stored: {members}"
    );

    // A tier base of -1 stays -1 whatever is bought.
    assert_eq!(limit_of(&bought, Dimension::ApiCalls), -1);
    let packed: Subscription = billing
        .by(&alice)
        .org(&acme)
        .post(format!("/api/subscriptions/{id}/addons"))
        .json(json!({"bundleId": "API_PACK", "quantity": 3}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(limit_of(&packed, Dimension::ApiCalls), -1);

    // SSO is not stackable; the audit log is Pro's only.
    let Answer(status, body) = billing
        .by(&alice)
        .org(&acme)
        .post(format!("/api/subscriptions/{id}/addons/preview"))
        .json(json!({"bundleId": "SSO", "quantity": 2}))
        .await;
    assert_eq!(code(status, &body), ErrorCode::BundleNotStackable);
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let bob = billing.token("bob", "bob@example.com");
    let globex = billing.org("bob", "globex").await;
    let globex_sub = subscription(&billing, &bob, &globex).await;
    let globex_id = globex_sub.id;
    let Answer(status, body) = billing
        .by(&bob)
        .org(&globex)
        .post(format!("/api/subscriptions/{globex_id}/addons"))
        .json(json!({"bundleId": "AUDIT_LOG"}))
        .await;
    assert_eq!(code(status, &body), ErrorCode::BundleNotEligible);
    assert_eq!(status, StatusCode::FORBIDDEN);
    let offered: Bundles = billing
        .by(&bob)
        .org(&globex)
        .get("/api/bundles")
        .await
        .data();
    assert!(
        !offered
            .bundles
            .iter()
            .any(|o| o.id == BundleId::AuditLog || o.id == BundleId::Sso),
        "Developer is not offered AUDIT_LOG or SSO: {offered:?}"
    );
    // Another account's subscription is not found, whatever the body.
    billing
        .by(&bob)
        .org(&globex)
        .post(format!("/api/subscriptions/{id}/addons"))
        .json(json!({"bundleId": "SEAT_PACK"}))
        .await
        .refused(ErrorCode::NotFound);
    billing
        .by(&bob)
        .get(format!("/api/quotas/{acme}"))
        .await
        .expect(StatusCode::NOT_FOUND);
    // A member without billing:manage cannot buy.
    let member = billing.token("member-0", "m0@example.com");
    billing
        .by(&member)
        .org(&acme)
        .post(format!("/api/subscriptions/{id}/addons"))
        .json(json!({"bundleId": "SEAT_PACK", "quantity": 9}))
        .await
        .expect(StatusCode::FORBIDDEN);

    // Removing an add-on synchronizes too; removing it again is 404.
    let removed: Subscription = billing
        .by(&alice)
        .org(&acme)
        .delete(format!("/api/subscriptions/{id}/addons/SEAT_PACK"))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(limit_of(&removed, Dimension::Seats), 1);
    billing
        .by(&alice)
        .org(&acme)
        .delete(format!("/api/subscriptions/{id}/addons/SEAT_PACK"))
        .await
        .refused(ErrorCode::NotFound);
    assert_eq!(billing.audited("billing.addon.remove").await.len(), 1);

    // The environment override reaches the pool: Team's pipelines are 300 here, and
    // a tier change (PATCH, with step-up) derives the limits again.
    let root = billing.super_token().await;
    billing
        .by(&root)
        .step_up(billing.step_up("root", 10))
        .patch(format!("/api/organization/{acme}/tier"))
        .json(json!({"tier": "team"}))
        .await
        .expect(StatusCode::OK);
    let quotas: OrgQuotas = billing
        .by(&alice)
        .org(&acme)
        .get("/api/quotas")
        .await
        .data();
    assert_eq!(quotas.tier, Tier::Team);
    assert_eq!(
        (
            quotas.quotas["pipelines"].limit,
            quotas.quotas["plugins"].limit
        ),
        (300, 100)
    );
    assert!(!billing.audited("admin.org.tier.update").await.is_empty());
    billing.stop().await;
}

async fn refusals_of_billing(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let id = subscription(app, &alice, &acme).await.id;
    // Bundles are hidden and refused unless the operator enables them.
    let offered: Bundles = app
        .by(&alice)
        .org(&acme)
        .get("/api/bundles")
        .await
        .expect(StatusCode::OK)
        .data();
    assert!(!offered.enabled && offered.bundles.is_empty());
    let buy = json!({"bundleId": "SEAT_PACK"});
    let path = format!("/api/subscriptions/{id}/addons");
    app.by(&alice)
        .org(&acme)
        .post(&path)
        .json(buy.clone())
        .await
        .refused(ErrorCode::BundlesDisabled);
    // Marketplace billing refuses self-service; the billing service sets seats.
    let market = app
        .beside(&[
            ("BILLING_BUNDLES_ENABLED", "true"),
            ("BILLING_PROVIDER", "marketplace"),
            (
                "BILLING_PORTAL_URL",
                "https://billing.example/portal?org={orgId}",
            ),
        ])
        .await;
    let Answer(status, body) = market
        .by(&alice)
        .org(&acme)
        .post(&path)
        .json(buy.clone())
        .await;
    assert_eq!(code(status, &body), ErrorCode::MarketplaceManaged);
    assert_eq!(status, StatusCode::FORBIDDEN);
    let direct = app.beside(&[("BILLING_BUNDLES_ENABLED", "true")]).await;
    for bad in [
        json!({"bundleId": "GOLD_PACK"}),
        json!({"bundleId": "SEAT_PACK", "quantity": 0}),
        json!({"bundleId": "SEAT_PACK", "quantity": -3}),
        json!({"bundleId": "SEAT_PACK", "quantity": 10001}),
        json!({"bundleId": "SEAT_PACK", "quantity": "two"}),
        json!({"quantity": 1}),
    ] {
        let Answer(status, body) = direct
            .by(&alice)
            .org(&acme)
            .post(&path)
            .json(bad.clone())
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert_eq!(code(status, &body), ErrorCode::ValidationError, "{bad}");
    }
    assert!(
        subscription(&direct, &alice, &acme).await.addons.is_empty(),
        "nothing refused was stored"
    );
    direct.stop().await;
    let seat_path = format!("/api/organization/{acme}/seat-limit");
    let synchronized: Subscription = market
        .by(&market.service_token("billing"))
        .put(&seat_path)
        .json(json!({"seats": 30, "features": ["sso"], "version": 2}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(limit_of(&synchronized, Dimension::Seats), 30);
    assert!(synchronized
        .entitlement
        .purchased_features
        .contains(&Feature::Sso));
    let Answer(status, body) = market
        .by(&market.service_token("billing"))
        .put(&seat_path)
        .json(json!({"seats": 5, "version": 1}))
        .await;
    assert_eq!(
        code(status, &body),
        ErrorCode::Conflict,
        "an older version is ignored"
    );
    for token in [market.service_token("pipeline"), alice.clone()] {
        market
            .by(&token)
            .put(&seat_path)
            .json(json!({"seats": 99}))
            .await
            .expect(StatusCode::FORBIDDEN);
    }
    let events = market.audited("admin.org.seatLimit.update").await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].affected_org_id.as_deref(), Some(acme.as_str()));
    // The portal: configured here, a clear 404 where it is not.
    let portal: Portal = market
        .by(&alice)
        .org(&acme)
        .post("/api/portal")
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(
        portal.url,
        format!("https://billing.example/portal?org={acme}")
    );
    let Answer(status, body) = app.by(&alice).org(&acme).post("/api/portal").await;
    assert_eq!(code(status, &body), ErrorCode::BillingPortalNotConfigured);
    assert_eq!(status, StatusCode::NOT_FOUND);
    market.stop().await;
}

async fn increment(
    app: &TestApp,
    token: &str,
    org: &str,
    body: Value,
    key: Option<&str>,
) -> (StatusCode, Value) {
    let mut request = Request::builder()
        .method("POST")
        .uri(format!("/api/quotas/{org}/increment"))
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json");
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    app.send(request.body(Body::from(body.to_string())).unwrap())
        .await
}

pub async fn override_limits(app: &TestApp, org: &str, limits: Value) -> OrgQuotas {
    let root = app.super_token().await;
    app.by(&root)
        .put(format!("/api/quotas/{org}"))
        .json(json!({"limits": limits}))
        .await
        .expect(StatusCode::OK)
        .data()
}

async fn pooled_increments_count_exactly(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let team = team_of(app, &alice, &acme, "platform").await;
    let record = override_limits(app, &acme, json!({"aiCalls": 100})).await;
    assert_eq!(record.quotas["aiCalls"].limit, 100);
    let service = app.service_token("generator");
    // 32 concurrent increments of 5 against 100 left, from the root and its team.
    let mut tasks = Vec::new();
    for i in 0..32 {
        let org = if i % 2 == 0 {
            acme.clone()
        } else {
            team.clone()
        };
        let request = Request::builder()
            .method("POST")
            .uri(format!("/api/quotas/{org}/increment"))
            .header("authorization", format!("Bearer {service}"))
            .header("content-type", "application/json")
            .body(Body::from(
                json!({"type": "aiCalls", "amount": 5}).to_string(),
            ))
            .unwrap();
        let router = app.router.clone();
        tasks.push(tokio::spawn(async move {
            let response = router.oneshot(request).await.unwrap();
            let status = response.status();
            let bytes = response.into_body().collect().await.unwrap().to_bytes();
            (
                org,
                status,
                serde_json::from_slice::<Value>(&bytes).unwrap(),
            )
        }));
    }
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }
    let mut counted = 0;
    let mut on_team = 0;
    for (org, status, body) in &results {
        match *status {
            StatusCode::OK => {
                counted += 5;
                if *org == team {
                    on_team += 5;
                }
            }
            StatusCode::TOO_MANY_REQUESTS => {
                assert_eq!(code(*status, body), ErrorCode::QuotaExceeded);
                assert_eq!(body["details"]["limit"], 100, "{body}");
                assert_eq!(body["details"]["requested"], 5, "{body}");
            }
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert_eq!(counted, 100, "exactly the 100 left were counted");
    let root_view: QuotaStatus = app
        .by(&alice)
        .get(format!("/api/quotas/{acme}/aiCalls"))
        .await
        .data();
    assert_eq!(
        (root_view.used, root_view.remaining, root_view.percent),
        (100, 0, Some(100.0))
    );
    assert!(root_view.reset_at.is_some());
    let team_view: QuotaStatus = app
        .by(&alice)
        .get(format!("/api/quotas/{team}/aiCalls"))
        .await
        .data();
    assert_eq!(team_view.used, 100, "the team sees its account's pool");
    assert_eq!(team_view.own_used, on_team);

    // Hostile increments: out of range, the inventory's types, a user's token.
    for (bad, why) in [
        (json!({"type": "aiCalls", "amount": 1001}), "over 1000"),
        (json!({"type": "aiCalls", "amount": 0}), "zero"),
        (json!({"type": "aiCalls", "amount": -5}), "negative"),
        (json!({"type": "pipelines", "amount": 1}), "inventory type"),
        (json!({"type": "gold", "amount": 1}), "unknown type"),
        (json!({"type": "aiCalls"}), "no amount"),
    ] {
        let (status, body) = increment(app, &service, &acme, bad, None).await;
        assert_eq!(
            code(status, &body),
            ErrorCode::ValidationError,
            "{why}: {body}"
        );
    }
    let (status, _) = increment(
        app,
        &alice,
        &acme,
        json!({"type": "aiCalls", "amount": 1}),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "users cannot increment");
    let (status, _) = increment(
        app,
        &service,
        "no-such-org",
        json!({"type": "aiCalls", "amount": 1}),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // An Idempotency-Key counts a retry once; reused for another increment, 409.
    override_limits(app, &acme, json!({"aiCalls": 200})).await;
    for _ in 0..3 {
        let (status, body) = increment(
            app,
            &service,
            &team,
            json!({"type": "aiCalls", "amount": 3}),
            Some("gen-42"),
        )
        .await;
        let counted: QuotaStatus = Answer::from((status, body)).expect(StatusCode::OK).data();
        assert_eq!(counted.used, 103);
    }
    let (status, body) = increment(
        app,
        &service,
        &team,
        json!({"type": "aiCalls", "amount": 4}),
        Some("gen-42"),
    )
    .await;
    assert_eq!(code(status, &body), ErrorCode::Conflict);
    // Keys are remembered for a week: the retention worker forgets older ones.
    assert_eq!(
        app.store
            .prune_increment_keys(Utc::now() - adapters::services::quotas::INCREMENT_KEY_RETENTION)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        app.store
            .prune_increment_keys(Utc::now() + chrono::Duration::seconds(1))
            .await
            .unwrap(),
        1
    );

    // At risk: 103 of 200 is 51.5 %.
    let root = app.super_token().await;
    let Answer(status, body) = app.by(&root).get("/api/quotas/at-risk?threshold=50").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let ids: Vec<&str> = body["quotas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["orgId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [acme.as_str()], "{body}");
    let Answer(_, body) = app.by(&root).get("/api/quotas/at-risk?threshold=60").await;
    assert_eq!(pagination(&body).total, 0, "{body}");
    // A zero limit counts as full: at risk up to 100 %, never above.
    override_limits(app, &acme, json!({"storage": 0})).await;
    for (threshold, total) in [(100, 1), (101, 0)] {
        let Answer(_, body) = app
            .by(&root)
            .get(format!("/api/quotas/at-risk?threshold={threshold}"))
            .await;
        assert_eq!(pagination(&body).total, total, "{threshold}: {body}");
    }
    override_limits(app, &acme, json!({"storage": null})).await;
    for bad in ["abc", "-1", "NaN"] {
        let Answer(status, body) = app
            .by(&root)
            .get(format!("/api/quotas/at-risk?threshold={bad}"))
            .await;
        assert_eq!(code(status, &body), ErrorCode::ValidationError, "{bad}");
    }
    app.by(&alice)
        .get("/api/quotas/at-risk")
        .await
        .expect(StatusCode::FORBIDDEN);
    let Answer(status, body) = app.by(&root).get("/api/quotas/all?limit=100").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(pagination(&body).total >= 3, "{body}");

    // A team's reset gives its share back to the pool.
    let reset: OrgQuotas = app
        .by(&root)
        .post(format!("/api/quotas/{team}/reset"))
        .json(json!({"type": "aiCalls"}))
        .await
        .expect(StatusCode::OK)
        .data();
    let ai_calls = &reset.quotas["aiCalls"];
    assert_eq!((ai_calls.own_used, ai_calls.used), (0, 103 - (on_team + 3)));
    // A reset puts the monthly usage back to zero (audited); only an admin may.
    app.by(&alice)
        .post(format!("/api/quotas/{acme}/reset"))
        .await
        .expect(StatusCode::FORBIDDEN);
    let reset: OrgQuotas = app
        .by(&root)
        .post(format!("/api/quotas/{acme}/reset"))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(reset.quotas["aiCalls"].used, 0);
    assert_eq!(app.audited("quota.reset").await.len(), 2);
    app.by(&root)
        .post(format!("/api/quotas/{acme}/reset"))
        .json(json!({"type": "pipelines"}))
        .await
        .refused(ErrorCode::ValidationError);

    // A stored period that has passed counts as zero: the new month starts afresh.
    increment(
        app,
        &service,
        &acme,
        json!({"type": "aiCalls", "amount": 7}),
        None,
    )
    .await;
    app.sql("UPDATE quota_pool SET period_start = '2000-01-01' WHERE dimension = 'aiCalls'")
        .await;
    let view: QuotaStatus = app
        .by(&alice)
        .get(format!("/api/quotas/{acme}/aiCalls"))
        .await
        .data();
    assert_eq!(view.used, 0);
    let (status, body) = increment(
        app,
        &service,
        &acme,
        json!({"type": "aiCalls", "amount": 200}),
        None,
    )
    .await;
    let counted: QuotaStatus = Answer::from((status, body)).expect(StatusCode::OK).data();
    assert_eq!(counted.used, 200, "a new month has the whole limit");
}

async fn api_calls_are_counted_and_capped(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let used = |quotas: &OrgQuotas| quotas.quotas["apiCalls"].used;
    let first: OrgQuotas = app.by(&alice).org(&acme).get("/api/quotas").await.data();
    app.by(&alice)
        .org(&acme)
        .get("/api/pipelines")
        .await
        .expect(StatusCode::OK);
    let second: OrgQuotas = app.by(&alice).org(&acme).get("/api/quotas").await.data();
    assert_eq!(
        used(&second),
        used(&first) + 1,
        "each request counts (reading the quotas does not)"
    );
    assert_eq!(first.quotas["apiCalls"].limit, -1);
    // Capped just above what is used: two more requests, then 429 and nothing counted
    // (the super-admin's override is not the organization's request).
    let now = used(&second);
    override_limits(app, &acme, json!({"apiCalls": now + 2})).await;
    for _ in 0..2 {
        app.by(&alice)
            .org(&acme)
            .get("/api/pipelines")
            .await
            .expect(StatusCode::OK);
    }
    let Answer(status, body) = app.by(&alice).org(&acme).get("/api/pipelines").await;
    assert_eq!(code(status, &body), ErrorCode::QuotaExceeded);
    assert_eq!(body["details"]["dimension"], "apiCalls");
    // A super-admin's requests are not the organization's: the limit can be lifted.
    let record = override_limits(app, &acme, json!({"apiCalls": null})).await;
    assert_eq!(record.quotas["apiCalls"].limit, -1);
    app.by(&alice)
        .org(&acme)
        .get("/api/pipelines")
        .await
        .expect(StatusCode::OK);
    // Another tenant is not affected.
    let globex = app.org("bob", "globex").await;
    let bob = app.token("bob", "bob@example.com");
    app.by(&bob)
        .org(&globex)
        .get("/api/pipelines")
        .await
        .expect(StatusCode::OK);
    // Limits on a team or unknown types are refused.
    let root = app.super_token().await;
    let team = team_of(app, &bob, &globex, "ops").await;
    for (org, body) in [
        (team.as_str(), json!({"limits": {"plugins": 3}})),
        (globex.as_str(), json!({"limits": {"gold": 3}})),
        (globex.as_str(), json!({"limits": {"plugins": -2}})),
        (globex.as_str(), json!({"limits": {"plugins": "many"}})),
        (globex.as_str(), json!({"tier": "platinum"})),
        (globex.as_str(), json!({})),
    ] {
        let Answer(status, reply) = app
            .by(&root)
            .put(format!("/api/quotas/{org}"))
            .json(body.clone())
            .await;
        assert_eq!(
            code(status, &reply),
            ErrorCode::ValidationError,
            "{body}: {reply}"
        );
    }
    // A pipelines override is enforced at create; null gives the tier's back.
    override_limits(app, &globex, json!({"pipelines": 1})).await;
    let pipeline = |name: &str| {
        json!({"project": "web", "organization": "globex", "pipelineName": name,
               "accessModifier": "private", "props": {}})
    };
    app.by(&bob)
        .org(&globex)
        .post("/api/pipelines")
        .json(pipeline("a"))
        .await
        .expect(StatusCode::CREATED);
    let Answer(status, body) = app
        .by(&bob)
        .org(&team)
        .post("/api/pipelines")
        .json(pipeline("b"))
        .await;
    assert_eq!(
        code(status, &body),
        ErrorCode::QuotaExceeded,
        "the team draws from the pool"
    );
    let record = override_limits(app, &globex, json!({"pipelines": null})).await;
    let pipelines = &record.quotas["pipelines"];
    assert_eq!((pipelines.limit, pipelines.used), (5, 1), "{record:?}");
    assert_eq!(app.audited("admin.org.quota.override").await.len(), 4);
}

/// The worker's two jobs: limits derived again from a changed configuration (a
/// restart with another `QUOTA_TIER_*`), and a new month started for the monthly
/// types.
async fn the_worker_follows_configuration_and_months(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let before: OrgQuotas = app.by(&alice).org(&acme).get("/api/quotas").await.data();
    assert_eq!(before.quotas["pipelines"].limit, 5);
    let changed = AppState::new(
        test_config(&[("QUOTA_TIER_DEVELOPER_PIPELINES", "7")]),
        app.store.clone(),
        Arc::new(adapters::audit::AuditCounters::default()),
    );
    let roots = adapters::workers::quotas::derive_all(
        &changed.infra.store,
        &changed.config,
        &changed.replica.allowances,
        None,
    )
    .await
    .unwrap();
    assert!(roots >= 1);
    let after: OrgQuotas = app.by(&alice).org(&acme).get("/api/quotas").await.data();
    assert_eq!(after.quotas["pipelines"].limit, 7, "{after:?}");
    // Last month's usage goes back to zero; this month's stays.
    let service = app.service_token("generator");
    let (status, _) = increment(
        app,
        &service,
        &acme,
        json!({"type": "aiCalls", "amount": 9}),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    // A counted request: this month's apiCalls rows exist (reading the quotas is
    // not counted).
    app.by(&alice)
        .org(&acme)
        .get("/api/pipelines")
        .await
        .expect(StatusCode::OK);
    assert_eq!(
        adapters::workers::quotas::start_month(&changed.infra.store)
            .await
            .unwrap(),
        0
    );
    app.sql("UPDATE quota_pool SET period_start = '2000-01-01' WHERE dimension = 'aiCalls'")
        .await;
    app.sql("UPDATE quota_usage SET period_start = '2000-01-01' WHERE dimension = 'aiCalls'")
        .await;
    assert_eq!(
        adapters::workers::quotas::start_month(&changed.infra.store)
            .await
            .unwrap(),
        2
    );
    assert_eq!(app.store.pool_usage(&acme, "aiCalls").await.unwrap(), 0);
    assert_eq!(app.store.usage(&acme, "aiCalls").await.unwrap(), 0);
    // Another tenant's x-org-id is refused; its quotas by path are not found.
    let globex = app.org("bob", "globex").await;
    app.by(&alice)
        .org(&globex)
        .get("/api/quotas")
        .await
        .refused(ErrorCode::TenantForbidden);
    app.by(&alice)
        .get(format!("/api/quotas/{globex}/plugins"))
        .await
        .expect(StatusCode::NOT_FOUND);
    let Answer(status, body) = app
        .by(&alice)
        .get(format!("/api/quotas/{acme}/seats"))
        .await;
    assert_eq!(
        code(status, &body),
        ErrorCode::ValidationError,
        "seats are not a quota type"
    );
}

/// An invitation is accepted by its invitee only, within the account's seats.
async fn invitations_are_accepted_within_the_seats(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    set_tier(app, &acme, "pro").await;
    let id = app
        .by(&alice)
        .org(&acme)
        .post("/api/invitation/send")
        .json(json!({"email": "Carol@Example.com", "role": "admin"}))
        .await
        .expect(StatusCode::CREATED)
        .id();
    let accept = format!("/api/invitation/{id}/accept");
    let carol = app.token("carol", "carol@example.com");
    // Pro has one seat, the owner's.
    let Answer(status, body) = app.by(&carol).post(&accept).await;
    assert_eq!(code(status, &body), ErrorCode::QuotaExceeded, "{body}");
    assert_eq!(body["details"]["dimension"], "seats");
    // Someone else cannot take it; an unknown id is the same 404.
    let dave = app.token("dave", "dave@example.com");
    app.by(&dave)
        .post(&accept)
        .await
        .refused(ErrorCode::NotFound);
    app.by(&carol)
        .post("/api/invitation/nope/accept")
        .await
        .expect(StatusCode::NOT_FOUND);
    // A seat more, and carol joins with the invited role, once.
    let root = app.super_token().await;
    app.by(&root)
        .put(format!("/api/organization/{acme}/seat-limit"))
        .json(json!({"seats": 2}))
        .await
        .expect(StatusCode::OK);
    let joined: Member = app
        .by(&carol)
        .post(&accept)
        .await
        .expect(StatusCode::CREATED)
        .data();
    assert_eq!(
        (joined.user_id.as_str(), joined.role),
        ("carol", MembershipRole::Admin)
    );
    app.by(&carol)
        .post(&accept)
        .await
        .refused(ErrorCode::Conflict);
    let events = app.audited("invitation.accept").await;
    assert_eq!(events.len(), 1);
    // The new admin acts in the organization; a third member has no seat.
    app.by(&carol)
        .post(format!("/api/organization/{acme}/members"))
        .json(json!({"userId": "erin"}))
        .await
        .refused(ErrorCode::QuotaExceeded);
    // A deactivated member frees a seat; activating beyond the seats is refused.
    app.by(&alice)
        .patch(format!("/api/organization/{acme}/members/carol/deactivate"))
        .await
        .expect(StatusCode::OK);
    app.by(&alice)
        .post(format!("/api/organization/{acme}/members"))
        .json(json!({"userId": "erin"}))
        .await
        .expect(StatusCode::CREATED);
    app.by(&alice)
        .patch(format!("/api/organization/{acme}/members/carol/activate"))
        .await
        .refused(ErrorCode::QuotaExceeded);
}

/// The pool's stored usage of apiCalls for `root`.
async fn stored_api_calls(app: &TestApp, root: &str) -> i64 {
    use sqlx::Row;
    sqlx::query(&format!(
        "SELECT used FROM quota_pool WHERE root_id = '{root}' AND dimension = 'apiCalls'"
    ))
    .fetch_one(adapters::storage::pool_for_tests(&app.store))
    .await
    .unwrap()
    .try_get::<i64, _>(0)
    .unwrap()
}

/// Reads do not write: the first request reserves a block of apiCalls, the next
/// ones spend it in memory (the stored count does not move while the reported one
/// counts each request), and the rest goes back once the organization is idle.
async fn api_calls_are_spent_from_a_reserved_block(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let used = |quotas: &OrgQuotas| quotas.quotas["apiCalls"].used as i64;
    app.by(&alice)
        .org(&acme)
        .get("/api/organization")
        .await
        .expect(StatusCode::OK);
    let reserved = stored_api_calls(app, &acme).await;
    let before: OrgQuotas = app.by(&alice).org(&acme).get("/api/quotas").await.data();
    assert!(
        reserved >= used(&before) + 60,
        "a block is reserved: stored {reserved}, used {}",
        used(&before)
    );
    for _ in 0..10 {
        app.by(&alice)
            .org(&acme)
            .get("/api/organization")
            .await
            .expect(StatusCode::OK);
    }
    assert_eq!(
        stored_api_calls(app, &acme).await,
        reserved,
        "ten reads wrote nothing"
    );
    let after: OrgQuotas = app.by(&alice).org(&acme).get("/api/quotas").await.data();
    assert_eq!(used(&after), used(&before) + 10, "each read is counted");
    assert_eq!(
        after.quotas["apiCalls"].own_used as i64,
        used(&after),
        "the root's own share is the account's"
    );
    // Idle for a second: what was not spent goes back, and the stored count is the
    // reported one.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while stored_api_calls(app, &acme).await != used(&after) {
        assert!(
            std::time::Instant::now() < deadline,
            "the unspent units were not given back"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // A limit below the block: the block is what is left, then 429 with the pool's
    // figures and the one unit asked for; nothing more is stored.
    override_limits(app, &acme, json!({"apiCalls": used(&after) + 3})).await;
    for _ in 0..3 {
        app.by(&alice)
            .org(&acme)
            .get("/api/organization")
            .await
            .expect(StatusCode::OK);
    }
    let Answer(status, body) = app.by(&alice).org(&acme).get("/api/organization").await;
    assert_eq!(code(status, &body), ErrorCode::QuotaExceeded);
    assert_eq!(body["details"]["requested"], 1, "{body}");
    assert_eq!(body["details"]["used"], used(&after) + 3, "{body}");
    assert_eq!(stored_api_calls(app, &acme).await, used(&after) + 3);
    // A reset forgets the block (the reset counted it) and starts from zero.
    let root = app.super_token().await;
    override_limits(app, &acme, json!({"apiCalls": null})).await;
    app.by(&alice)
        .org(&acme)
        .get("/api/organization")
        .await
        .expect(StatusCode::OK);
    let reset: OrgQuotas = app
        .by(&root)
        .post(format!("/api/quotas/{acme}/reset"))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(reset.quotas["apiCalls"].used, 0, "{reset:?}");
    app.by(&alice)
        .org(&acme)
        .get("/api/organization")
        .await
        .expect(StatusCode::OK);
    let quotas: OrgQuotas = app.by(&alice).org(&acme).get("/api/quotas").await.data();
    assert_eq!(used(&quotas), 1, "{quotas:?}");
}

on_both_backends!(
    api_calls_are_spent_from_a_reserved_block,
    invitations_are_accepted_within_the_seats,
    the_worker_follows_configuration_and_months,
    the_documents_numbers_through_the_api,
    refusals_of_billing,
    pooled_increments_count_exactly,
    api_calls_are_counted_and_capped,
);
