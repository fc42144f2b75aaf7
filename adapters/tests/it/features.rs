//! What a tier includes, enforced (document 2's tier table, document 3's bundles):
//! a route declares the feature it needs; the account's tier, bundles and grants
//! decide, read at each request, so a downgrade takes it away at once.

use super::billing::{set_tier, team_of};
use super::plugins::{plugin_zip, upload};
use super::*;
use crate::api::{pagination, Answer};
use adapters::code::ErrorCode;
use adapters::http::wire::{ChainVerdict, Plugin};

/// A server whose tiers include only what document 2's table gives them.
async fn gated(app: &TestApp) -> TestApp {
    app.beside(&[
        ("FEATURES_FOR_ALL_TIERS", ""),
        ("BILLING_BUNDLES_ENABLED", "true"),
    ])
    .await
}

fn refused(status: StatusCode, body: &Value, feature: &str, tier: &str) {
    assert_eq!(code(status, body), ErrorCode::FeatureNotAvailable, "{body}");
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body["details"],
        json!({"feature": feature, "tier": tier}),
        "{body}"
    );
}

async fn each_gate_follows_the_tier_its_bundles_and_a_downgrade(app: &TestApp) {
    let gated = gated(app).await;
    let acme = gated.org("alice", "acme").await;
    let alice = gated.token("alice", "alice@example.com");
    let plugin = upload(&gated, &alice, &acme, &plugin_zip("lint", "1.0.0"), None)
        .await
        .expect(StatusCode::CREATED)
        .id();
    let deactivate = json!({"plugins": [{"id": plugin, "isActive": false}]});
    let bulk = || {
        gated
            .by(&alice)
            .org(&acme)
            .put("/api/plugins/bulk/update")
            .json(deactivate.clone())
    };
    let plugin_path = format!("/api/plugins/{plugin}");
    let active = || async {
        gated
            .by(&alice)
            .org(&acme)
            .get(&plugin_path)
            .await
            .data::<Plugin>()
            .is_active
    };
    let audit = format!("/api/audit?orgId={acme}");
    let checkpoints = format!("/api/audit/checkpoints?orgId={acme}");

    // Developer: no bulk operations, no audit log; nothing changes.
    let Answer(status, body) = bulk().await;
    refused(status, &body, "bulk_operations", "developer");
    assert!(active().await, "refused, nothing changed");
    for path in [&audit, &checkpoints] {
        let Answer(status, body) = gated.by(&alice).org(&acme).get(path).await;
        refused(status, &body, "audit_log", "developer");
    }
    // A team of the account is judged by the account's tier.
    let team = team_of(&gated, &alice, &acme, "ops").await;
    let Answer(status, body) = gated
        .by(&alice)
        .org(&team)
        .get(format!("/api/audit?orgId={team}"))
        .await;
    refused(status, &body, "audit_log", "developer");

    // Pro: bulk operations; the audit log only with its bundle.
    set_tier(&gated, &acme, "pro").await;
    let Answer(status, body) = bulk().await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let Answer(status, body) = gated.by(&alice).org(&acme).get(&audit).await;
    refused(status, &body, "audit_log", "pro");
    let sub_id = gated
        .by(&alice)
        .org(&acme)
        .get("/api/subscriptions/current")
        .await
        .id();
    gated
        .by(&alice)
        .org(&acme)
        .post(format!("/api/subscriptions/{sub_id}/addons"))
        .json(json!({"bundleId": "AUDIT_LOG"}))
        .await
        .expect(StatusCode::OK);
    for path in [&audit, &checkpoints] {
        let Answer(status, body) = gated.by(&alice).org(&acme).get(path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
    }
    gated
        .by(&alice)
        .org(&acme)
        .delete(format!("/api/subscriptions/{sub_id}/addons/AUDIT_LOG"))
        .await
        .expect(StatusCode::OK);
    let Answer(status, body) = gated.by(&alice).org(&acme).get(&audit).await;
    refused(status, &body, "audit_log", "pro");

    // Team: the audit log without a bundle.
    set_tier(&gated, &acme, "team").await;
    gated
        .by(&alice)
        .org(&acme)
        .get(&audit)
        .await
        .expect(StatusCode::OK);

    // Downgraded: both taken away at once, on every server of the database; the
    // data they made stays.
    let other = app.beside(&[("FEATURES_FOR_ALL_TIERS", "")]).await;
    other
        .by(&alice)
        .org(&acme)
        .get(&audit)
        .await
        .expect(StatusCode::OK);
    set_tier(&gated, &acme, "developer").await;
    for server in [&gated, &other] {
        let Answer(status, body) = server.by(&alice).org(&acme).get(&audit).await;
        refused(status, &body, "audit_log", "developer");
    }
    other.stop().await;
    let Answer(status, body) = bulk().await;
    refused(status, &body, "bulk_operations", "developer");
    assert!(!active().await, "what the bulk update did stays");

    // A super-admin is never gated; the chain kept being written and verifies.
    let root = gated.super_token().await;
    gated.relay().await;
    let Answer(status, body) = gated.by(&root).org(&acme).get(&audit).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(pagination(&body).total > 0, "{body}");
    let verdict: ChainVerdict = gated
        .by(&root)
        .get(format!("/api/audit/verify?orgId={acme}"))
        .await
        .expect(StatusCode::OK)
        .data();
    assert!(verdict.ok, "{verdict:?}");
    gated.stop().await;
}

async fn the_system_organization_and_the_operator_variable_open_features(app: &TestApp) {
    let gated = gated(app).await;
    // A member of the system organization (not a super-admin) has every feature there.
    let (system, root) = gated.system().await;
    gated
        .by(&root)
        .post(format!("/api/organization/{system}/members"))
        .json(json!({"userId": "sam", "role": "admin"}))
        .await
        .expect(StatusCode::CREATED);
    let sam = gated.token("sam", "sam@example.com");
    gated
        .by(&sam)
        .org(&system)
        .get(format!("/api/audit?orgId={system}"))
        .await
        .expect(StatusCode::OK);
    gated.stop().await;

    // FEATURES_FOR_ALL_TIERS opens a feature to every tier; an unknown name stops the
    // start with the variable named.
    let open = app.beside(&[("FEATURES_FOR_ALL_TIERS", "audit_log")]).await;
    let acme = open.org("alice", "acme").await;
    let alice = open.token("alice", "alice@example.com");
    open.by(&alice)
        .org(&acme)
        .get(format!("/api/audit?orgId={acme}"))
        .await
        .expect(StatusCode::OK);
    open.stop().await;
    let errors = adapters::config::Config::from_vars(vec![
        ("JWT_SECRET".to_owned(), SECRET.to_owned()),
        (
            "FEATURES_FOR_ALL_TIERS".to_owned(),
            "audit_log,gold".to_owned(),
        ),
    ])
    .unwrap_err();
    assert!(
        errors
            .iter()
            .any(|e| e.variable == "FEATURES_FOR_ALL_TIERS"),
        "{errors:?}"
    );
}

/// Each gated operation says so in `/openapi.json`.
async fn the_openapi_document_lists_each_operations_feature(app: &TestApp) {
    let (status, doc) = app
        .send(Request::get("/openapi.json").body(Body::empty()).unwrap())
        .await;
    assert_eq!(status, StatusCode::OK);
    for (path, method, feature) in [
        ("/api/plugins/bulk/update", "put", "bulk_operations"),
        (
            "/api/organization/{id}/members/bulk-add",
            "post",
            "bulk_operations",
        ),
        ("/api/audit", "get", "audit_log"),
        ("/api/audit/checkpoints", "get", "audit_log"),
    ] {
        assert_eq!(doc["paths"][path][method]["x-feature"], feature, "{path}");
    }
    // The compliance service's own bulk routes (document 1) are every tier's.
    assert!(doc["paths"]["/api/compliance/subscriptions/bulk"]["post"]["x-feature"].is_null());
    assert!(doc["paths"]["/api/audit/verify"]["get"]["x-feature"].is_null());
}

on_both_backends!(
    each_gate_follows_the_tier_its_bundles_and_a_downgrade,
    the_system_organization_and_the_operator_variable_open_features,
    the_openapi_document_lists_each_operations_feature,
);
