//! Notification settings in the console, and the API's test of the webhook: saved
//! through the page and read back through the API; a test reaches the receiver
//! signed, and shows its status and answer.

use adapters::http::wire::Preference;
use adapters::services::preferences::WebhookTest;
use std::sync::Arc;

use super::console::{console_session, form_token, owner, page_of, post_form, register, HOST};
use super::notifications::{webhook_receiver, Seen};
use super::*;

async fn the_webhook_test_reaches_the_receiver_signed_and_says_what_it_answered(app: &TestApp) {
    let app = &app
        .beside(&[
            ("WEBHOOK_ALLOW_PRIVATE", "true"),
            ("QUOTA_TIER_DEVELOPER_SEATS", "-1"),
        ])
        .await;
    let (alice, acme) = owner(app, "alice@example.com", "acme").await;
    let test = || async {
        app.by(&alice)
            .org(&acme)
            .post("/api/compliance/notification-preferences/test")
            .await
            .expect(StatusCode::OK)
            .data::<WebhookTest>()
    };
    // Nothing saved: skipped.
    assert_eq!(test().await.status, "skipped");
    let seen = Arc::new(Seen::default());
    let url = webhook_receiver(seen.clone()).await;
    let (cookie, _) = console_session(app, "alice@example.com", HOST, &[]).await;
    let (status, page) = page_of(app, &cookie, "/console/settings").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let token = form_token(&page);
    let (status, page) = post_form(
        app,
        &cookie,
        "/console/settings",
        &[
            ("csrf", &token),
            ("org", &acme),
            ("action", "save"),
            ("emailEnabled", "on"),
            ("targetUsers", "ops@example.com\nlead@example.com"),
            ("digestMode", "daily"),
            ("webhookUrl", &url),
            ("webhookSecret", "whsec-test-secret"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("the notification settings were saved"));
    let saved: Preference = app
        .by(&alice)
        .org(&acme)
        .get("/api/compliance/notification-preferences")
        .await
        .data();
    assert_eq!(saved.webhook_url.as_deref(), Some(url.as_str()));
    assert!(saved.has_webhook_secret && !saved.notify_warnings);
    assert_eq!(saved.digest_mode, "daily");
    assert_eq!(
        saved.target_users,
        Some(vec![
            "ops@example.com".to_owned(),
            "lead@example.com".to_owned()
        ])
    );
    assert!(page.contains("one is saved: leave blank to keep it"));

    // The test through the page: the receiver's status shown, the request signed.
    let (status, page) = post_form(
        app,
        &cookie,
        "/console/settings",
        &[("csrf", &token), ("org", &acme), ("action", "test")],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(
        page.contains("the test was sent: the receiver answered 200"),
        "{page}"
    );
    assert!(page.contains("id=\"test-status\">200"));
    let (headers, body) = seen.requests.lock().unwrap().last().cloned().unwrap();
    let sent: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(sent["type"], "test");
    assert_eq!(sent["orgId"], json!(acme));
    let id = headers["webhook-id"].to_str().unwrap();
    let timestamp: i64 = headers["webhook-timestamp"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        headers["webhook-signature"].to_str().unwrap(),
        adapters::notify::standard_signature("whsec-test-secret", id, timestamp, &body)
    );
    // A blank secret kept the saved one; a failing receiver is reported as such.
    seen.answers.lock().unwrap().push(503);
    let tested = test().await;
    assert_eq!(
        (tested.status.as_str(), tested.http_status),
        ("failed", Some(503))
    );
    // A test turns nothing off: a 410 is reported, the webhook stays on.
    seen.answers.lock().unwrap().push(410);
    assert_eq!(test().await.http_status, Some(410));
    let saved: Preference = app
        .by(&alice)
        .org(&acme)
        .get("/api/compliance/notification-preferences")
        .await
        .data();
    assert!(saved.webhook_disabled_at.is_none(), "{saved:?}");

    // A member may not test (nor save): the API's refusal, nothing sent.
    let carol = register(app, "carol@example.com").await;
    app.by(&alice)
        .post(format!("/api/organization/{acme}/members"))
        .json(json!({"userId": carol, "role": "member"}))
        .await;
    let before = seen.requests.lock().unwrap().len();
    let (carol_cookie, _) = console_session(app, "carol@example.com", HOST, &[]).await;
    let (_, page) = page_of(app, &carol_cookie, &format!("/console/settings?org={acme}")).await;
    let carol_token = form_token(&page);
    let (status, page) = post_form(
        app,
        &carol_cookie,
        "/console/settings",
        &[("csrf", &carol_token), ("org", &acme), ("action", "test")],
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{page}");
    assert!(
        page.contains("only the organization&#39;s admins or owner")
            || page.contains("only the organization"),
        "{page}"
    );
    assert_eq!(seen.requests.lock().unwrap().len(), before);
}

on_both_backends!(the_webhook_test_reaches_the_receiver_signed_and_says_what_it_answered);
