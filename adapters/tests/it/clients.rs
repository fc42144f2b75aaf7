//! The clients other services embed, against the real server on loopback.

use std::time::Duration;

use adapters::client::{ComplianceClient, Entity};

use super::*;

/// Serves the test app's router on a loopback port.
async fn serve(app: &TestApp) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = app.router.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}")
}

async fn the_compliance_client_fails_closed(app: &TestApp) {
    let org = app.org("svc-owner", "served").await;
    let owner = app.token("svc-owner", "svc-owner@example.com");
    app.rule(
        &owner,
        &org,
        json!({"name": "pinned", "target": "plugin", "severity": "error",
               "field": "version", "operator": "neq", "value": "latest"}),
    )
    .await;
    app.rule(
        &owner,
        &org,
        json!({"name": "described", "target": "plugin", "severity": "warning",
               "field": "description", "operator": "exists"}),
    )
    .await;
    let base = serve(app).await;
    let client = ComplianceClient::new(&base, &app.service_token("plugin"));
    // A pass, with its warning.
    let passed = client
        .validate(
            &org,
            Entity::Plugin,
            &json!({"version": "1.0.0"}),
            Some("p-1"),
        )
        .await
        .unwrap();
    assert_eq!(passed.warnings.len(), 1, "{passed:?}");
    // A block: 403 COMPLIANCE_VIOLATION with the violations.
    let refusal = client
        .validate(&org, Entity::Plugin, &json!({"version": "latest"}), None)
        .await
        .unwrap_err();
    assert_eq!(
        (refusal.status, refusal.code.as_str()),
        (403, "COMPLIANCE_VIOLATION")
    );
    let envelope = refusal.envelope();
    let names: Vec<&str> = envelope["details"]["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["ruleName"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"pinned"), "{envelope}");
    assert_eq!(envelope["success"], false);
    // A document over the limits: the service's own refusal, passed on.
    let deep =
        json!({"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"i": {"j": {"k": 1}}}}}}}}}}});
    let refusal = client
        .validate(&org, Entity::Plugin, &deep, None)
        .await
        .unwrap_err();
    assert_eq!(
        (refusal.status, refusal.code.as_str()),
        (422, "ATTRIBUTE_LIMIT_EXCEEDED")
    );
    // A token the service refuses: the check was not made, fail closed.
    let stranger = ComplianceClient::new(&base, "not-a-token");
    let refusal = stranger
        .validate(&org, Entity::Plugin, &json!({"version": "1.0.0"}), None)
        .await
        .unwrap_err();
    assert_eq!(
        (refusal.status, refusal.code.as_str()),
        (503, "COMPLIANCE_UNAVAILABLE")
    );
}

on_both_backends!(the_compliance_client_fails_closed);

#[tokio::test]
async fn an_unreachable_or_slow_compliance_service_is_unavailable() {
    // Nothing listens.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client = ComplianceClient::new(&format!("http://127.0.0.1:{port}"), "t");
    let refusal = client
        .validate("o", Entity::Pipeline, &json!({}), None)
        .await
        .unwrap_err();
    assert_eq!(
        (refusal.status, refusal.code.as_str()),
        (503, "COMPLIANCE_UNAVAILABLE")
    );
    // Accepts, never answers: the budget ends it.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let client = ComplianceClient::new(&format!("http://{addr}"), "t")
        .with_budget(Duration::from_millis(300));
    let started = std::time::Instant::now();
    let refusal = client
        .validate("o", Entity::Plugin, &json!({}), None)
        .await
        .unwrap_err();
    assert_eq!(refusal.status, 503);
    assert!(started.elapsed() < Duration::from_secs(3));
}
