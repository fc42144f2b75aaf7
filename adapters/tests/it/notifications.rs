//! Notifications end to end: a blocked check delivered to the inbox, to an SMTP
//! receiver and to a webhook receiver that checks both signatures the way a user
//! would; a failing receiver retried and seeing one id; 410 turning the webhook off;
//! SSRF refusals; daily digests made once; secrets sealed at rest; the inbox API.

use crate::api::{pagination, Answer};
use adapters::code::ErrorCode;
use adapters::http::wire::{Message, Preference};
use adapters::services::announcements::Unread;
use std::sync::Mutex;

use adapters::workers::delivery;
use axum::http::HeaderMap;
use base64::Engine as _;
use chrono::Utc;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::fixtures;
use super::*;

/// What a webhook receiver saw: headers and raw body of each request.
#[derive(Debug, Default)]
pub struct Seen {
    pub requests: Mutex<Vec<(HeaderMap, Vec<u8>)>>,
    /// Statuses to answer, in order; 200 once they run out.
    pub answers: Mutex<Vec<u16>>,
}

/// A webhook receiver on loopback; answers what `seen.answers` says.
pub async fn webhook_receiver(seen: Arc<Seen>) -> String {
    let app = axum::Router::new()
        .route(
            "/hook",
            axum::routing::post(
                |axum::extract::State(seen): axum::extract::State<Arc<Seen>>,
                 headers: HeaderMap,
                 body: axum::body::Bytes| async move {
                    seen.requests.lock().unwrap().push((headers, body.to_vec()));
                    let mut answers = seen.answers.lock().unwrap();
                    let status = if answers.is_empty() {
                        200
                    } else {
                        answers.remove(0)
                    };
                    // A redirect names the receiver itself: followed, it would show.
                    (
                        StatusCode::from_u16(status).unwrap(),
                        [("location", "/hook")],
                    )
                },
            ),
        )
        .with_state(seen);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    url
}

/// The messages an SMTP receiver took: (envelope recipients, data).
pub type Mailbox = Arc<Mutex<Vec<(Vec<String>, String)>>>;

/// A minimal SMTP receiver on loopback (enough of RFC 5321 for a relay client).
pub async fn smtp_receiver(mailbox: Mailbox) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("smtp://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            let mailbox = mailbox.clone();
            tokio::spawn(async move {
                let (read, mut write) = socket.into_split();
                let mut lines = BufReader::new(read).lines();
                let _ = write.write_all(b"220 test ESMTP\r\n").await;
                let mut recipients = Vec::new();
                while let Ok(Some(line)) = lines.next_line().await {
                    let upper = line.to_ascii_uppercase();
                    let reply: &[u8] = if upper.starts_with("EHLO") || upper.starts_with("HELO") {
                        b"250 test\r\n"
                    } else if upper.starts_with("MAIL FROM") {
                        b"250 ok\r\n"
                    } else if upper.starts_with("RCPT TO") {
                        recipients.push(line[8..].trim().trim_matches(['<', '>']).to_owned());
                        b"250 ok\r\n"
                    } else if upper == "DATA" {
                        let _ = write.write_all(b"354 go on\r\n").await;
                        let mut data = String::new();
                        while let Ok(Some(line)) = lines.next_line().await {
                            if line == "." {
                                break;
                            }
                            data.push_str(&line);
                            data.push('\n');
                        }
                        mailbox
                            .lock()
                            .unwrap()
                            .push((std::mem::take(&mut recipients), data));
                        b"250 queued\r\n"
                    } else if upper == "QUIT" {
                        let _ = write.write_all(b"221 bye\r\n").await;
                        return;
                    } else {
                        b"250 ok\r\n"
                    };
                    let _ = write.write_all(reply).await;
                }
            });
        }
    });
    url
}

fn hex_hmac(key: &[u8], data: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
    mac.update(data);
    hex::encode(mac.finalize().into_bytes())
}

/// Checks a webhook request's signatures as a receiver would, with `secret`.
pub fn verify(headers: &HeaderMap, body: &[u8], secret: &str) {
    let header = |name: &str| headers.get(name).unwrap().to_str().unwrap().to_owned();
    assert_eq!(
        header("x-svc-signature"),
        format!("sha256={}", hex_hmac(secret.as_bytes(), body))
    );
    // Standard Webhooks: "v1,<base64 HMAC of id.timestamp.body>".
    let id = header("webhook-id");
    let timestamp = header("webhook-timestamp");
    let signed = [id.as_bytes(), b".", timestamp.as_bytes(), b".", body].concat();
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(&signed);
    let expected = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
    assert_eq!(header("webhook-signature"), format!("v1,{expected}"));
    let age = Utc::now().timestamp() - timestamp.parse::<i64>().unwrap();
    assert!((0..300).contains(&age));
}

fn state_of(app: &TestApp, extra: &[(&str, &str)]) -> AppState {
    AppState::new(
        test_config(extra),
        app.store.clone(),
        Arc::new(adapters::audit::AuditCounters::default()),
    )
}

/// Runs the delivery worker's steps until nothing is due; how many attempts.
async fn deliver(state: &AppState) -> usize {
    let mut n = 0;
    while delivery::step(state).await.unwrap() {
        n += 1;
    }
    n
}

/// An organization of alice's with one blocking rule on pipelines.
async fn blocking_org(app: &TestApp) -> (String, String) {
    blocking_org_of(app, "alice", "acme").await
}

/// An organization `name` of `owner`'s with one blocking rule on pipelines: its id
/// and the owner's token.
pub async fn blocking_org_of(app: &TestApp, owner: &str, name: &str) -> (String, String) {
    let org = app.org(owner, name).await;
    let token = app.token(owner, &format!("{owner}@example.com"));
    app.by(&token)
        .org(&org)
        .post("/api/compliance/rules")
        .json(
            json!({"name": "Private only", "target": "pipeline", "severity": "error",
                          "field": "accessModifier", "operator": "eq", "value": "private"}),
        )
        .await
        .expect(StatusCode::CREATED);
    (org, token)
}

/// A pipeline the blocking rule refuses (a notification of each channel).
pub async fn block(app: &TestApp, token: &str, org: &str) {
    app.by(token)
        .org(org)
        .post("/api/pipelines")
        .json(fixtures::pipeline_as("deploy", "public"))
        .await
        .refused(ErrorCode::ComplianceViolation);
}

/// Saves the organization's notification preferences.
pub async fn prefer(app: &TestApp, token: &str, org: &str, body: Value) -> Answer {
    app.by(token)
        .org(org)
        .put("/api/compliance/notification-preferences")
        .json(body)
        .await
}

/// The organization's notification log (`query` adds filters).
pub async fn attempts(app: &TestApp, token: &str, org: &str, query: &str) -> Vec<Value> {
    let Answer(status, body) = app
        .by(token)
        .org(org)
        .get(format!("/api/compliance/notifications?limit=100{query}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["attempts"].as_array().unwrap().clone()
}

async fn a_block_reaches_every_channel_once_with_both_signatures(base: &TestApp) {
    let seen = Arc::new(Seen::default());
    let hook = webhook_receiver(seen.clone()).await;
    let mailbox: Mailbox = Arc::default();
    let smtp = smtp_receiver(mailbox.clone()).await;
    let vars = [
        ("WEBHOOK_ALLOW_PRIVATE", "true"),
        ("SMTP_URL", smtp.as_str()),
    ];
    let side = base.beside(&vars).await;
    let app = &side;
    let (org, alice) = blocking_org(app).await;
    let Answer(status, body) = prefer(
        app,
        &alice,
        &org,
        json!({"emailEnabled": true, "webhookUrl": hook, "webhookSecret": "s3cret"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    block(app, &alice, &org).await;
    let state = state_of(app, &vars);
    assert_eq!(deliver(&state).await, 3, "inbox, e-mail, webhook");
    assert_eq!(deliver(&state).await, 0);

    let requests = seen.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    let (headers, raw) = &requests[0];
    verify(headers, raw, "s3cret");
    let sent: Value = serde_json::from_slice(raw).unwrap();
    assert_eq!(sent["type"], "check.block");
    assert_eq!(sent["orgId"], org.as_str());
    assert_eq!(
        headers["webhook-id"].to_str().unwrap(),
        sent["id"].as_str().unwrap()
    );
    assert_eq!(sent["data"]["violations"][0]["ruleName"], "Private only");
    assert_eq!(sent["data"]["target"], "pipeline");
    let id = sent["id"].as_str().unwrap().to_owned();

    let mail = mailbox.lock().unwrap().clone();
    assert_eq!(mail.len(), 1);
    assert_eq!(
        mail[0].0,
        ["alice@example.com"],
        "the owner, when targetUsers is unset"
    );
    assert!(
        mail[0].1.contains(&format!("<{id}@compliance>")),
        "{}",
        mail[0].1
    );
    assert!(mail[0].1.contains("blocked"), "{}", mail[0].1);

    let Answer(_, inbox) = app
        .by(&alice)
        .org(&org)
        .get("/api/messages?unread=true")
        .await;
    assert_eq!(pagination(&inbox).total, 1, "{inbox}");
    assert_eq!(inbox["messages"][0]["notificationId"], id.as_str());

    let log = attempts(app, &alice, &org, "").await;
    let mut channels: Vec<(&str, &str)> = log
        .iter()
        .map(|a| {
            (
                a["channel"].as_str().unwrap(),
                a["status"].as_str().unwrap(),
            )
        })
        .collect();
    channels.sort_unstable();
    assert_eq!(
        channels,
        [("email", "sent"), ("inbox", "sent"), ("webhook", "sent")]
    );
    assert!(log
        .iter()
        .all(|a| a["notificationId"] == id.as_str() && a["attempt"] == 1));
    let webhook = log.iter().find(|a| a["channel"] == "webhook").unwrap();
    assert_eq!(webhook["responseStatus"], 200);
    let text = state.infra.metrics.render();
    assert!(text.contains("notifications_sent_total 3"), "{text}");
    // Another tenant sees none of it.
    let bob_org = app.org("bob", "bobco").await;
    let bob = app.token("bob", "bob@example.com");
    assert!(attempts(app, &bob, &bob_org, "").await.is_empty());
    let Answer(_, inbox) = app.by(&bob).org(&bob_org).get("/api/messages").await;
    assert_eq!(pagination(&inbox).total, 0);
    side.stop().await;
}

async fn a_failing_receiver_is_retried_and_sees_one_id(base: &TestApp) {
    let seen = Arc::new(Seen::default());
    *seen.answers.lock().unwrap() = vec![307, 500, 503];
    let hook = webhook_receiver(seen.clone()).await;
    let vars = [
        ("WEBHOOK_ALLOW_PRIVATE", "true"),
        ("NOTIFY_RETRY_SECONDS", "0"),
    ];
    let side = base.beside(&vars).await;
    let app = &side;
    let (org, alice) = blocking_org(app).await;
    prefer(
        app,
        &alice,
        &org,
        json!({"webhookUrl": hook, "webhookSecret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}),
    )
    .await;
    block(app, &alice, &org).await;
    let state = state_of(app, &vars);
    assert_eq!(
        deliver(&state).await,
        5,
        "the inbox; the webhook four times"
    );
    let requests = seen.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 4, "a redirect is an answer: not followed");
    let ids: std::collections::BTreeSet<&str> = requests
        .iter()
        .map(|(h, _)| h["webhook-id"].to_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 1, "the same notification each time");
    let bodies: std::collections::BTreeSet<&Vec<u8>> = requests.iter().map(|(_, b)| b).collect();
    assert_eq!(bodies.len(), 1, "the same bytes each time");
    let log = attempts(app, &alice, &org, "&channel=webhook").await;
    let mut statuses: Vec<(u64, &str, Option<u64>)> = log
        .iter()
        .map(|a| {
            (
                a["attempt"].as_u64().unwrap(),
                a["status"].as_str().unwrap(),
                a["responseStatus"].as_u64(),
            )
        })
        .collect();
    statuses.sort_unstable();
    assert_eq!(
        statuses,
        [
            (1, "retrying", Some(307)),
            (2, "retrying", Some(500)),
            (3, "retrying", Some(503)),
            (4, "sent", Some(200))
        ]
    );
    let text = state.infra.metrics.render();
    assert!(text.contains("notifications_retried_total 3"), "{text}");
    // 410 Gone turns the webhook off until its URL is saved again.
    *seen.answers.lock().unwrap() = vec![410];
    block(app, &alice, &org).await;
    deliver(&state).await;
    let preference: Preference = app
        .by(&alice)
        .org(&org)
        .get("/api/compliance/notification-preferences")
        .await
        .data();
    assert!(preference.webhook_disabled_at.is_some(), "{preference:?}");
    let disabled = attempts(app, &alice, &org, "&status=disabled").await;
    assert_eq!(disabled.len(), 1);
    assert_eq!(disabled[0]["responseStatus"], 410);
    block(app, &alice, &org).await;
    deliver(&state).await;
    assert_eq!(
        seen.requests.lock().unwrap().len(),
        5,
        "off: not sent again"
    );
    prefer(app, &alice, &org, json!({"webhookUrl": hook})).await;
    block(app, &alice, &org).await;
    deliver(&state).await;
    assert_eq!(seen.requests.lock().unwrap().len(), 6, "saved again: on");
    side.stop().await;
}

async fn webhooks_never_reach_private_addresses(app: &TestApp) {
    let (org, alice) = blocking_org(app).await;
    for url in [
        "http://127.0.0.1:9/x",
        "http://localhost:9/x",
        "http://10.0.0.8/x",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]:9/x",
        "http://100.64.0.1/x",
        // The forms a hostile tester found accepted: IPv4-compatible loopback,
        // site-local, the 6to4 relay, and 6to4 of loopback.
        "http://[::127.0.0.1]/x",
        "http://[fec0::1]/x",
        "http://192.88.99.1/x",
        "http://[2002:7f00:1::]/x",
        "http://[64:ff9b::a9fe:a9fe]/x",
        "ftp://93.184.216.34/x",
        "not a url",
    ] {
        let Answer(status, body) = prefer(app, &alice, &org, json!({"webhookUrl": url})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{url}: {body}");
        assert_eq!(body["details"]["field"], "webhookUrl", "{url}: {body}");
    }
    let preference: Preference = app
        .by(&alice)
        .org(&org)
        .get("/api/compliance/notification-preferences")
        .await
        .data();
    assert!(preference.webhook_url.is_none(), "nothing saved");
    // Saved where private addresses were allowed, sent where they are not: refused at
    // delivery too, without a request.
    let seen = Arc::new(Seen::default());
    let hook = webhook_receiver(seen.clone()).await;
    let lenient = app.beside(&[("WEBHOOK_ALLOW_PRIVATE", "true")]).await;
    let Answer(status, _) = prefer(&lenient, &alice, &org, json!({"webhookUrl": hook})).await;
    assert_eq!(status, StatusCode::OK);
    block(app, &alice, &org).await;
    deliver(&state_of(app, &[])).await;
    assert!(seen.requests.lock().unwrap().is_empty());
    let failed = attempts(app, &alice, &org, "&channel=webhook").await;
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["status"], "failed");
    assert!(
        failed[0]["error"]
            .as_str()
            .unwrap()
            .contains("not a public address"),
        "{failed:?}"
    );
    // Without SMTP_URL an e-mail is logged as skipped.
    prefer(
        app,
        &alice,
        &org,
        json!({"emailEnabled": true, "webhookUrl": ""}),
    )
    .await;
    block(app, &alice, &org).await;
    deliver(&state_of(app, &[])).await;
    let email = attempts(app, &alice, &org, "&channel=email").await;
    assert_eq!(email.len(), 1);
    assert_eq!(email[0]["status"], "skipped");
    assert_eq!(email[0]["error"], "SMTP_URL is not set");
    lenient.stop().await;
}

async fn a_daily_digest_is_made_once_per_window(base: &TestApp) {
    let seen = Arc::new(Seen::default());
    let hook = webhook_receiver(seen.clone()).await;
    let key = base64::engine::general_purpose::STANDARD.encode([9u8; 32]);
    let vars = [
        ("WEBHOOK_ALLOW_PRIVATE", "true"),
        ("SECRETS_ENCRYPTION_KEY", key.as_str()),
    ];
    let side = base.beside(&vars).await;
    let app = &side;
    let (org, alice) = blocking_org(app).await;
    let Answer(status, body) = prefer(
        app,
        &alice,
        &org,
        json!({"webhookUrl": hook, "webhookSecret": "s3cret", "digestMode": "daily"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for _ in 0..3 {
        block(app, &alice, &org).await;
    }
    let state = state_of(app, &vars);
    assert_eq!(
        deliver(&state).await,
        3,
        "the inbox at once; the webhook held"
    );
    assert!(seen.requests.lock().unwrap().is_empty());
    assert_eq!(attempts(app, &alice, &org, "&status=held").await.len(), 3);
    let now = Utc::now();
    assert_eq!(
        adapters::services::delivery::send_digests(&state.infra.store, now)
            .await
            .unwrap(),
        0,
        "the day is not over"
    );
    let later = now + chrono::Duration::days(1) + chrono::Duration::minutes(5);
    assert_eq!(
        adapters::services::delivery::send_digests(&state.infra.store, later)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        adapters::services::delivery::send_digests(&state.infra.store, later)
            .await
            .unwrap(),
        0,
        "once per window"
    );
    assert_eq!(deliver(&state).await, 1);
    let requests = seen.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    let (headers, raw) = &requests[0];
    // Sealed at rest, and still signed with the secret.
    verify(headers, raw, "s3cret");
    let digest: Value = serde_json::from_slice(raw).unwrap();
    assert_eq!(digest["type"], "digest");
    assert_eq!(digest["data"]["count"], 3);
    assert_eq!(digest["data"]["items"].as_array().unwrap().len(), 3);
    assert_eq!(
        digest["data"]["window"],
        format!("daily:{}", now.format("%Y-%m-%d"))
    );
    assert_eq!(attempts(app, &alice, &org, "&status=held").await.len(), 3);
    let stored: String = sqlx::query_scalar(&format!(
        "SELECT webhook_secret FROM notification_preferences WHERE org_id = '{org}'"
    ))
    .fetch_one(adapters::storage::pool_for_tests(&app.store))
    .await
    .unwrap();
    assert!(
        stored.starts_with("enc:v2:1:") && !stored.contains("s3cret"),
        "{stored}"
    );
    side.stop().await;
}

async fn the_inbox_is_read_by_members_and_cleared_by_admins(app: &TestApp) {
    // A blocked pipeline's notification reaches the organization's inbox.
    let (org, alice) = blocking_org(app).await;
    app.by(&alice)
        .post(format!("/api/organization/{org}/members"))
        .json(json!({"userId": "bob", "role": "member"}))
        .await
        .expect(StatusCode::CREATED);
    block(app, &alice, &org).await;
    let state = state_of(app, &[]);
    assert_eq!(deliver(&state).await, 1);
    let bob = app.token("bob", "bob@example.com");
    let Answer(_, inbox) = app
        .by(&bob)
        .org(&org)
        .get("/api/messages?unread=true")
        .await;
    assert_eq!(pagination(&inbox).total, 1, "{inbox}");
    assert_eq!(inbox["messages"][0]["kind"], "notification");
    let id = inbox["messages"][0]["id"].as_str().unwrap().to_owned();
    let unread: Unread = app
        .by(&bob)
        .org(&org)
        .get("/api/messages/unread")
        .await
        .data();
    assert_eq!(unread.inbox, 1, "{unread:?}");
    let read: Message = app
        .by(&bob)
        .org(&org)
        .patch(format!("/api/messages/{id}/read"))
        .await
        .expect(StatusCode::OK)
        .data();
    assert!(read.read_at.is_some());
    let Answer(_, inbox) = app
        .by(&bob)
        .org(&org)
        .get("/api/messages?unread=true")
        .await;
    assert_eq!(pagination(&inbox).total, 0);
    app.by(&bob)
        .org(&org)
        .get("/api/messages?unread=maybe")
        .await
        .expect(StatusCode::BAD_REQUEST);
    app.by(&bob)
        .org(&org)
        .delete(format!("/api/messages/{id}"))
        .await
        .expect(StatusCode::FORBIDDEN);
    // Another tenant cannot touch it.
    let carol_org = app.org("carol", "carolco").await;
    let carol = app.token("carol", "carol@example.com");
    for (method, path) in [
        ("DELETE", format!("/api/messages/{id}")),
        ("PATCH", format!("/api/messages/{id}/read")),
    ] {
        let Answer(status, _) = app.by(&carol).org(&carol_org).method(method, &path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}");
    }
    let path = format!("/api/messages/{id}");
    app.by(&alice)
        .org(&org)
        .delete(&path)
        .await
        .expect(StatusCode::OK);
    app.by(&alice)
        .org(&org)
        .delete(&path)
        .await
        .expect(StatusCode::NOT_FOUND);
    let events = app.audited("message.delete").await;
    assert_eq!(events.len(), 1);
}

async fn history_past_retention_is_pruned_and_nothing_else(app: &TestApp) {
    let (org, alice) = blocking_org(app).await;
    // A notification delivered to the inbox, read; another one whose delivery waits.
    block(app, &alice, &org).await;
    let state = state_of(app, &[]);
    assert_eq!(deliver(&state).await, 1);
    let Answer(_, inbox) = app.by(&alice).org(&org).get("/api/messages").await;
    let read = inbox["messages"][0]["id"].as_str().unwrap().to_owned();
    app.by(&alice)
        .org(&org)
        .patch(format!("/api/messages/{read}/read"))
        .await
        .expect(StatusCode::OK);
    block(app, &alice, &org).await;
    // A finished scan with its (empty) results, and a running one (one running scan
    // per target: the first ends before the second starts).
    for first in [true, false] {
        let Answer(status, body) = app
            .by(&alice)
            .org(&org)
            .post("/api/compliance/scans")
            .json(json!({"target": "all"}))
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        if first {
            app.sql(
                "UPDATE scans SET status = 'completed', ended_at = '2000-01-01T00:00:00.000000Z'",
            )
            .await;
        }
    }
    // Everything ages past retention.
    for statement in [
        "UPDATE deliveries SET updated_at = '2000-01-01T00:00:00.000000Z', created_at = '2000-01-01T00:00:00.000000Z'",
        "UPDATE notifications SET created_at = '2000-01-01T00:00:00.000000Z'",
        "UPDATE notification_log SET at = '2000-01-01T00:00:00.000000Z'",
        "UPDATE messages SET created_at = '2000-01-01T00:00:00.000000Z'",
    ] {
        app.sql(statement).await;
    }
    let cutoff = Utc::now() - chrono::Duration::days(180);
    let pruned = app.store.prune_history(cutoff).await.unwrap();
    assert!(pruned >= 4, "{pruned}");
    let count = |table: &'static str| async move {
        sqlx::query_scalar::<_, i64>(&format!("SELECT COUNT(*) FROM {table}"))
            .fetch_one(adapters::storage::pool_for_tests(&app.store))
            .await
            .unwrap()
    };
    assert_eq!(count("scans").await, 1, "the running scan stays");
    assert_eq!(count("deliveries").await, 1, "the pending delivery stays");
    assert_eq!(count("notifications").await, 1, "with its notification");
    assert_eq!(count("notification_log").await, 0);
    assert_eq!(count("messages").await, 0, "the read message is gone");
    // What waited is still delivered.
    assert_eq!(deliver(&state).await, 1);
    let Answer(_, inbox) = app.by(&alice).org(&org).get("/api/messages").await;
    assert_eq!(pagination(&inbox).total, 1);
}

on_both_backends!(
    history_past_retention_is_pruned_and_nothing_else,
    a_block_reaches_every_channel_once_with_both_signatures,
    a_failing_receiver_is_retried_and_sees_one_id,
    webhooks_never_reach_private_addresses,
    a_daily_digest_is_made_once_per_window,
    the_inbox_is_read_by_members_and_cleared_by_admins,
);
