//! Secrets under each organization's own key: sealed values bound to their row and
//! organization, the rewrite of older values (interrupted and resumed), a platform
//! key's rotation (data keys rewrapped, no secret rewritten), customer keys in AWS
//! KMS (the `moto` server, refusing as AWS does) and in Vault's transit engine (a
//! loopback stand-in of its three endpoints): orphaned, waiting, recovered; and two
//! server processes following a key change within a second.

use crate::api::Answer;
use adapters::code::ErrorCode;
use adapters::http::wire::{KeyConfiguration, KeyStatus, Preference};
use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use adapters::keys::sealed::{self, Key};
use adapters::services::keys;
use adapters::services::ServiceError;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;

/// A stored secret opened, with the parts `keys::open` reads.
async fn open(
    state: &AppState,
    binding: adapters::keys::Binding<'_>,
    stored: &str,
) -> Result<String, ServiceError> {
    keys::open(
        &state.infra.store,
        &state.config,
        &state.outbound.keyring,
        binding,
        stored,
    )
    .await
}

/// One round of the customer keys' check.
async fn check_keys(
    state: &AppState,
    now: chrono::DateTime<Utc>,
) -> Result<keys::CheckRound, ServiceError> {
    keys::check_keys(
        &state.infra.store,
        &state.config,
        &state.outbound.keyring,
        now,
    )
    .await
}

/// One round of rewriting secrets under their organizations' keys.
async fn rewrite_old_secrets(
    state: &AppState,
    limit: usize,
) -> Result<keys::RewriteRound, ServiceError> {
    keys::rewrite_old_secrets(
        &state.infra.store,
        &state.config,
        &state.outbound.keyring,
        limit,
    )
    .await
}

use super::notifications::{
    block, blocking_org_of as blocking_org, prefer, verify, webhook_receiver, Seen,
};
use super::*;

/// The platform key of these tests, and a second one to rotate to.
const K1: [u8; 32] = [0x11; 32];
const K2: [u8; 32] = [0x22; 32];

fn key_text(bytes: [u8; 32]) -> String {
    BASE64.encode(bytes)
}

fn fingerprint(bytes: [u8; 32]) -> String {
    Key::from_slice(&bytes).unwrap().fingerprint()
}

/// A server beside `base` with the platform key `key` and webhooks to loopback.
async fn with_key(base: &TestApp, key: [u8; 32], more: &[(&str, &str)]) -> TestApp {
    let text = key_text(key);
    let mut vars = vec![
        ("SECRETS_ENCRYPTION_KEY", text.as_str()),
        ("WEBHOOK_ALLOW_PRIVATE", "true"),
    ];
    vars.extend_from_slice(more);
    base.beside(&vars).await
}

/// Runs the delivery worker's steps until nothing is due; how many were claimed.
async fn deliver(app: &TestApp) -> usize {
    let mut n = 0;
    while adapters::workers::delivery::step(&app.state).await.unwrap() {
        n += 1;
        assert!(n < 100, "deliveries never run out");
    }
    n
}

async fn stored_secret(app: &TestApp, org: &str) -> Option<String> {
    sqlx::query_scalar(&format!(
        "SELECT webhook_secret FROM notification_preferences WHERE org_id = '{org}'"
    ))
    .fetch_one(adapters::storage::pool_for_tests(&app.store))
    .await
    .unwrap()
}

async fn kek_refs(app: &TestApp, org: &str) -> Vec<String> {
    sqlx::query_scalar(&format!(
        "SELECT kek_ref FROM org_data_keys WHERE org_id = '{org}' ORDER BY version"
    ))
    .fetch_all(adapters::storage::pool_for_tests(&app.store))
    .await
    .unwrap()
}

/// Makes `org` an Enterprise organization (the super-admin, stepped up).
async fn enterprise(app: &TestApp, org: &str) {
    let root = app.super_token().await;
    app.by(&root)
        .step_up(app.step_up("root", 0))
        .patch(format!("/api/organization/{org}/tier"))
        .json(json!({"tier": "enterprise"}))
        .await
        .expect(StatusCode::OK);
}

/// `PUT /api/admin/organizations/{org}/kms` as the stepped-up super-admin.
async fn put_kms(app: &TestApp, org: &str, body: Value) -> (StatusCode, Value) {
    let root = app.super_token().await;
    let Answer(status, answer) = app
        .by(&root)
        .step_up(app.step_up("root", 0))
        .put(format!("/api/admin/organizations/{org}/kms"))
        .json(body)
        .await;
    assert!(
        !answer.to_string().contains("s.vault-token"),
        "a token was answered: {answer}"
    );
    (status, answer)
}

async fn kms_status(app: &TestApp, token: &str, org: &str) -> KeyStatus {
    app.by(token)
        .get(format!("/api/organization/{org}/kms"))
        .await
        .expect(StatusCode::OK)
        .data()
}

async fn admin_kms(app: &TestApp, org: &str) -> KeyConfiguration {
    let root = app.super_token().await;
    app.by(&root)
        .get(format!("/api/admin/organizations/{org}/kms"))
        .await
        .expect(StatusCode::OK)
        .data()
}

async fn webhook_attempts(app: &TestApp, token: &str, org: &str) -> Vec<Value> {
    super::notifications::attempts(app, token, org, "&channel=webhook").await
}

async fn secrets_are_sealed_under_each_organizations_own_key(base: &TestApp) {
    let side = with_key(base, K1, &[]).await;
    let app = &side;
    let seen = Arc::new(Seen::default());
    let hook = webhook_receiver(seen.clone()).await;
    let (acme, alice) = blocking_org(app, "alice", "acme").await;
    let (globex, bob) = blocking_org(app, "bob", "globex").await;
    for (org, token, secret) in [(&acme, &alice, "s3cret-a"), (&globex, &bob, "s3cret-g")] {
        let Answer(status, body) = prefer(
            app,
            token,
            org,
            json!({"webhookUrl": hook, "webhookSecret": secret}),
        )
        .await;
        assert!(!body.to_string().contains(secret));
        let saved: Preference = Answer(status, body).expect(StatusCode::OK).data();
        assert!(saved.has_webhook_secret);
    }
    let a = stored_secret(app, &acme).await.unwrap();
    let g = stored_secret(app, &globex).await.unwrap();
    assert!(a.starts_with("enc:v2:1:") && !a.contains("s3cret"), "{a}");
    let local = format!("local:{}", fingerprint(K1));
    assert_eq!(kek_refs(app, &acme).await, std::slice::from_ref(&local));
    assert_eq!(kek_refs(app, &globex).await, std::slice::from_ref(&local));
    assert_eq!(
        open(&app.state, keys::webhook_secret(&acme), &a)
            .await
            .unwrap(),
        "s3cret-a"
    );
    // Read as another organization's, it does not open (its key, its binding).
    assert!(open(&app.state, keys::webhook_secret(&globex), &a)
        .await
        .is_err());
    // Copied into globex's row, it is not used: the delivery fails, nothing is sent.
    app.sql(&format!(
        "UPDATE notification_preferences SET webhook_secret = '{a}' WHERE org_id = '{globex}'"
    ))
    .await;
    block(app, &bob, &globex).await;
    block(app, &alice, &acme).await;
    deliver(app).await;
    let requests = seen.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1, "only acme's delivery went out");
    verify(&requests[0].0, &requests[0].1, "s3cret-a");
    let failed = webhook_attempts(app, &bob, &globex).await;
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["status"], "failed");
    assert!(!failed[0].to_string().contains("s3cret"));
    app.sql(&format!(
        "UPDATE notification_preferences SET webhook_secret = '{g}' WHERE org_id = '{globex}'"
    ))
    .await;
    // The organization's admins see the status; the super-admin the key's reference.
    let status = kms_status(app, &alice, &acme).await;
    assert_eq!(
        (status.provider.as_str(), status.state.as_str()),
        ("local", "active")
    );
    let admin = admin_kms(app, &acme).await;
    assert_eq!(admin.key_ref.as_deref(), Some(local.as_str()));
    assert_eq!(admin.data_key_versions, 1);
    // Without a platform key nothing is sealed, as before, and the status says so.
    let bare = base.beside(&[]).await;
    assert_eq!(admin_kms(&bare, &acme).await.provider, "none");
    let (plain_org, carol) = blocking_org(&bare, "carol", "plain").await;
    let Answer(status, body) =
        prefer(&bare, &carol, &plain_org, json!({"webhookSecret": "p"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(stored_secret(&bare, &plain_org).await.as_deref(), Some("p"));
    assert_eq!(kms_status(&bare, &carol, &plain_org).await.provider, "none");
    bare.stop().await;
    side.stop().await;
}

async fn older_secrets_are_rewritten_by_a_pass_that_resumes(base: &TestApp) {
    let side = with_key(base, K1, &[]).await;
    let app = &side;
    let legacy_key = Key::from_slice(&K1).unwrap();
    let mut orgs = Vec::new();
    for i in 0..5 {
        let (org, token) = blocking_org(app, &format!("owner{i}"), &format!("org{i}")).await;
        let Answer(status, body) = prefer(app, &token, &org, json!({"notifyWarnings": true})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        // As an earlier release stored it: enc:v1 under the platform key, or plain.
        let secret = format!("old-secret-{i}");
        let stored = if i < 4 {
            sealed::seal_legacy(&legacy_key, &secret).unwrap()
        } else {
            secret.clone()
        };
        app.sql(&format!(
            "UPDATE notification_preferences SET webhook_secret = '{stored}' WHERE org_id = '{org}'"
        ))
        .await;
        orgs.push((org, secret, stored));
    }
    let opens = |app: &TestApp, orgs: Vec<(String, String, String)>| {
        let state = app.state.clone();
        let store = app.store.clone();
        async move {
            let mut current = 0;
            for (org, secret, _) in &orgs {
                let stored: String = sqlx::query_scalar(&format!(
                    "SELECT webhook_secret FROM notification_preferences WHERE org_id = '{org}'"
                ))
                .fetch_one(adapters::storage::pool_for_tests(&store))
                .await
                .unwrap();
                assert_eq!(
                    open(&state, keys::webhook_secret(org), &stored)
                        .await
                        .unwrap(),
                    *secret
                );
                current += usize::from(stored.starts_with("enc:v2:"));
            }
            current
        }
    };
    assert_eq!(
        opens(app, orgs.clone()).await,
        0,
        "older values read as before"
    );
    // Interrupted after two rewrites: the rest stay readable as they were.
    let first = rewrite_old_secrets(&app.state, 2).await.unwrap();
    assert_eq!(first.rewritten, 2, "{first:?}");
    assert_eq!(opens(app, orgs.clone()).await, 2);
    // Resumed (on another server: nothing is kept between runs).
    let other = with_key(base, K1, &[]).await;
    let second = rewrite_old_secrets(&other.state, 100).await.unwrap();
    assert_eq!(second.rewritten, 3, "{second:?}");
    assert_eq!(opens(app, orgs.clone()).await, 5);
    let again = rewrite_old_secrets(&app.state, 100).await.unwrap();
    assert_eq!(again, keys::RewriteRound::default(), "nothing twice");
    for (org, secret, _) in &orgs {
        let stored = stored_secret(app, org).await.unwrap();
        assert!(stored.starts_with("enc:v2:1:") && !stored.contains(secret.as_str()));
    }
    other.stop().await;
    side.stop().await;
}

async fn a_platform_key_rotation_rewraps_data_keys_and_rewrites_no_secret(base: &TestApp) {
    let old = with_key(base, K1, &[]).await;
    let (acme, alice) = blocking_org(&old, "alice", "acme").await;
    let Answer(status, body) =
        prefer(&old, &alice, &acme, json!({"webhookSecret": "rotate-me"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let sealed_before = stored_secret(&old, &acme).await.unwrap();
    old.stop().await;
    let previous = key_text(K1);
    let new = with_key(
        base,
        K2,
        &[("SECRETS_ENCRYPTION_KEY_PREVIOUS", previous.as_str())],
    )
    .await;
    // Before the pass: the data key still wrapped by the previous key opens.
    assert_eq!(
        open(&new.state, keys::webhook_secret(&acme), &sealed_before)
            .await
            .unwrap(),
        "rotate-me"
    );
    let round = rewrite_old_secrets(&new.state, 100).await.unwrap();
    assert_eq!((round.rewrapped, round.rewritten), (1, 0), "{round:?}");
    assert_eq!(
        kek_refs(&new, &acme).await,
        [format!("local:{}", fingerprint(K2))]
    );
    assert_eq!(
        stored_secret(&new, &acme).await.unwrap(),
        sealed_before,
        "no secret rewritten"
    );
    new.stop().await;
    // The new key alone opens it; the old one alone no longer does (503, fail closed).
    let only_new = with_key(base, K2, &[]).await;
    assert_eq!(
        open(&only_new.state, keys::webhook_secret(&acme), &sealed_before)
            .await
            .unwrap(),
        "rotate-me"
    );
    only_new.stop().await;
    let only_old = with_key(base, K1, &[]).await;
    let Answer(status, body) =
        prefer(&only_old, &alice, &acme, json!({"webhookSecret": "x"})).await;
    assert_eq!(code(status, &body), ErrorCode::KmsUnavailable, "{body}");
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        stored_secret(&only_old, &acme).await.unwrap(),
        sealed_before
    );
    only_old.stop().await;
}

// --- AWS KMS: the moto server, refusing as AWS does -------------------------------

/// A `moto` server on loopback, stopped when dropped.
struct Moto {
    child: Child,
    url: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn moto() -> Moto {
    let port = super::crash::free_port();
    // Killed and waited for when dropped, a failed start included.
    let moto = Moto {
        child: Command::new(std::env::var("MOTO_SERVER").unwrap_or_else(|_| "moto_server".to_owned()))
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto_server (PyPI moto[server]) must be installed: scripts/test installs it and sets MOTO_SERVER"),
        url: format!("http://127.0.0.1:{port}"),
    };
    for _ in 0..300 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return moto;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("moto_server did not start");
}

/// One KMS call to `url` (moto reads the service and region from the credential
/// scope; it checks no signature).
async fn kms(url: &str, action: &str, body: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{url}/"))
        .header(
            "authorization",
            "AWS4-HMAC-SHA256 Credential=testing/20261128/us-east-1/kms/aws4_request, SignedHeaders=host, Signature=00",
        )
        .header("x-amz-target", format!("TrentService.{action}"))
        .header("content-type", "application/x-amz-json-1.1")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A proxy in front of moto that refuses `Encrypt` and `Decrypt` under a disabled or
/// pending-deletion key as AWS documents (moto does not); it counts the calls.
async fn refusing_proxy(moto: &str, calls: Arc<Mutex<Vec<String>>>) -> String {
    let moto = moto.to_owned();
    let app = axum::Router::new().route(
        "/",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let moto = moto.clone();
                let calls = calls.clone();
                async move {
                    let target = headers
                        .get("x-amz-target")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    let action = target.trim_start_matches("TrentService.").to_owned();
                    calls.lock().unwrap().push(action.clone());
                    assert!(
                        headers
                            .get("authorization")
                            .and_then(|v| v.to_str().ok())
                            .is_some_and(|a| a.starts_with("AWS4-HMAC-SHA256 Credential=testing/")
                                && a.contains("/us-east-1/kms/aws4_request")),
                        "the request is signed for KMS in the key's region"
                    );
                    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    if action == "Encrypt" || action == "Decrypt" {
                        let key = request["KeyId"].as_str().unwrap_or_default();
                        let (_, described) = kms(&moto, "DescribeKey", json!({"KeyId": key})).await;
                        let refusal = match described["KeyMetadata"]["KeyState"].as_str() {
                            Some("Disabled") => Some("DisabledException"),
                            Some("PendingDeletion") => Some("KMSInvalidStateException"),
                            _ => None,
                        };
                        if let Some(kind) = refusal {
                            return (
                                StatusCode::BAD_REQUEST,
                                json!({"__type": kind, "message": "the key is not usable"})
                                    .to_string(),
                            );
                        }
                    }
                    let mut forward = reqwest::Client::new().post(format!("{moto}/"));
                    for name in [
                        "authorization",
                        "x-amz-target",
                        "content-type",
                        "x-amz-date",
                    ] {
                        if let Some(value) = headers.get(name).and_then(|v| v.to_str().ok()) {
                            forward = forward.header(name, value);
                        }
                    }
                    let answer = forward.body(body.to_vec()).send().await.unwrap();
                    let status = StatusCode::from_u16(answer.status().as_u16()).unwrap();
                    (status, answer.text().await.unwrap())
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    url
}

async fn a_customer_key_in_aws_kms_orphans_and_recovers(base: &TestApp) {
    let moto = moto().await;
    let calls = Arc::new(Mutex::new(Vec::new()));
    let proxy = refusing_proxy(&moto.url, calls.clone()).await;
    let (status, created) = kms(&moto.url, "CreateKey", json!({})).await;
    assert_eq!(status, 200, "{created}");
    let arn = created["KeyMetadata"]["Arn"].as_str().unwrap().to_owned();
    let key_id = created["KeyMetadata"]["KeyId"].as_str().unwrap().to_owned();
    let side = with_key(
        base,
        K1,
        &[
            ("AWS_KMS_ENDPOINT_URL", proxy.as_str()),
            ("AWS_ACCESS_KEY_ID", "testing"),
            ("AWS_SECRET_ACCESS_KEY", "testing"),
        ],
    )
    .await;
    let app = &side;
    let seen = Arc::new(Seen::default());
    let hook = webhook_receiver(seen.clone()).await;
    let (acme, alice) = blocking_org(app, "alice", "acme").await;
    let choice = json!({"provider": "aws-kms", "keyRef": arn});
    // An Enterprise feature.
    let (status, body) = put_kms(app, &acme, choice.clone()).await;
    assert_eq!(
        code(status, &body),
        ErrorCode::FeatureNotAvailable,
        "{body}"
    );
    assert_eq!(status, StatusCode::FORBIDDEN);
    enterprise(app, &acme).await;
    // Only a stepped-up super-admin.
    let root = app.super_token().await;
    let path = format!("/api/admin/organizations/{acme}/kms");
    app.by(&root)
        .put(&path)
        .json(choice.clone())
        .await
        .expect(StatusCode::FORBIDDEN);
    app.by(&alice)
        .step_up(app.step_up("alice", 0))
        .put(&path)
        .json(choice.clone())
        .await
        .expect(StatusCode::FORBIDDEN);
    // Hostile and wrong bodies change nothing.
    for (bad, field) in [
        (
            json!({"provider": "aws-kms", "keyRef": "not-an-arn"}),
            "keyRef",
        ),
        (
            json!({"provider": "aws-kms", "keyRef": arn, "token": "t"}),
            "address",
        ),
        (json!({"provider": "gcp-kms", "keyRef": arn}), "provider"),
        (
            json!({"provider": "aws-kms", "keyRef": arn, "extra": 1}),
            "extra",
        ),
    ] {
        let (status, body) = put_kms(app, &acme, bad.clone()).await;
        assert_eq!(
            code(status, &body),
            ErrorCode::ValidationError,
            "{bad} {body}"
        );
        assert!(body.to_string().contains(field), "{bad} {body}");
    }
    // A key that does not exist is proven not to work before anything is saved.
    let missing = arn.replace(&key_id, "00000000-0000-0000-0000-000000000000");
    let (status, body) = put_kms(
        app,
        &acme,
        json!({"provider": "aws-kms", "keyRef": missing}),
    )
    .await;
    assert_eq!(code(status, &body), ErrorCode::ValidationError, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("not_found"),
        "{body}"
    );
    assert_eq!(admin_kms(app, &acme).await.provider, "local");
    // The secret set before the key is moved under it with the data key.
    let Answer(status, body) = prefer(
        app,
        &alice,
        &acme,
        json!({"webhookUrl": hook, "webhookSecret": "kms-secret"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let sealed_before = stored_secret(app, &acme).await.unwrap();
    let chosen: KeyConfiguration = Answer::from(put_kms(app, &acme, choice.clone()).await)
        .expect(StatusCode::OK)
        .data();
    assert_eq!(
        (chosen.provider.as_str(), chosen.state.as_str()),
        ("aws-kms", "active")
    );
    assert_eq!(kek_refs(app, &acme).await, [format!("aws-kms:{arn}")]);
    assert_eq!(stored_secret(app, &acme).await.unwrap(), sealed_before);
    assert!(calls.lock().unwrap().iter().any(|c| c == "DescribeKey"));
    let upserts = app.audited("admin.org.kms-config.upsert").await;
    assert_eq!(upserts.len(), 1);
    assert_eq!(upserts[0].chain_key, acme);
    assert_eq!(upserts[0].details["provider"], "aws-kms");
    assert!(!upserts[0].details.to_string().contains("testing"));
    // Delivered, signed with the secret opened through KMS.
    block(app, &alice, &acme).await;
    deliver(app).await;
    assert_eq!(seen.requests.lock().unwrap().len(), 1);
    {
        let requests = seen.requests.lock().unwrap();
        verify(&requests[0].0, &requests[0].1, "kms-secret");
    }
    // What a cold open costs through KMS (a replica that kept nothing).
    app.state.outbound.keyring.changed();
    let cold = Instant::now();
    open(&app.state, keys::webhook_secret(&acme), &sealed_before)
        .await
        .unwrap();
    let cold = cold.elapsed();
    let warm = Instant::now();
    open(&app.state, keys::webhook_secret(&acme), &sealed_before)
        .await
        .unwrap();
    eprintln!(
        "open through AWS KMS (moto on loopback): {cold:?} with the data key unwrapped, {:?} kept",
        warm.elapsed()
    );
    // The customer disables the key: three failed checks orphan the organization, once.
    let (status, _) = kms(&moto.url, "DisableKey", json!({"KeyId": key_id})).await;
    assert_eq!(status, 200);
    for round in 1..=2 {
        let checked = check_keys(&app.state, Utc::now()).await.unwrap();
        assert_eq!(checked.orphaned, 0, "round {round}");
        assert_eq!(kms_status(app, &alice, &acme).await.state, "active");
    }
    let third = check_keys(&app.state, Utc::now()).await.unwrap();
    assert_eq!(third.orphaned, 1);
    let fourth = check_keys(&app.state, Utc::now()).await.unwrap();
    assert_eq!(fourth.orphaned, 0);
    let orphaned = app.audited("org.kms.orphaned").await;
    assert_eq!(orphaned.len(), 1, "once per transition");
    assert_eq!(orphaned[0].chain_key, acme);
    assert_eq!(orphaned[0].details["errorClass"], "disabled");
    let status = kms_status(app, &alice, &acme).await;
    assert_eq!(status.state, "orphaned");
    assert_eq!(status.last_error_class.as_deref(), Some("disabled"));
    assert!(status.orphaned_at.is_some());
    // What needs a secret fails closed; everything else keeps working.
    let Answer(status, body) = prefer(app, &alice, &acme, json!({"webhookSecret": "new"})).await;
    assert_eq!(code(status, &body), ErrorCode::KmsUnavailable, "{body}");
    assert_eq!(stored_secret(app, &acme).await.unwrap(), sealed_before);
    block(app, &alice, &acme).await;
    deliver(app).await;
    assert_eq!(
        seen.requests.lock().unwrap().len(),
        1,
        "nothing sent unsigned"
    );
    assert_eq!(
        webhook_attempts(app, &alice, &acme).await.len(),
        1,
        "the waiting delivery is no attempt"
    );
    // Moving back to the platform key needs the customer key: refused, nothing changed.
    app.by(&root)
        .step_up(app.step_up("root", 0))
        .delete(&path)
        .await
        .refused(ErrorCode::Conflict);
    assert_eq!(kek_refs(app, &acme).await, [format!("aws-kms:{arn}")]);
    assert_eq!(admin_kms(app, &acme).await.provider, "aws-kms");
    // The key works again: recovered by the checker, and the delivery goes out once.
    let (status, _) = kms(&moto.url, "EnableKey", json!({"KeyId": key_id})).await;
    assert_eq!(status, 200);
    let recovered = check_keys(&app.state, Utc::now()).await.unwrap();
    assert_eq!(recovered.recovered, 1);
    assert_eq!(app.audited("org.kms.recovered").await.len(), 1);
    assert_eq!(kms_status(app, &alice, &acme).await.state, "active");
    deliver(app).await;
    deliver(app).await;
    {
        let requests = seen.requests.lock().unwrap();
        assert_eq!(requests.len(), 2, "delivered once");
        verify(&requests[1].0, &requests[1].1, "kms-secret");
    }
    // Back under the platform key; the secret still opens.
    let step = || Some(app.step_up("root", 0));
    let back: KeyConfiguration = app
        .by(&root)
        .step_up_opt(step())
        .delete(&path)
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(back.provider, "local");
    assert_eq!(
        kek_refs(app, &acme).await,
        [format!("local:{}", fingerprint(K1))]
    );
    assert_eq!(
        open(&app.state, keys::webhook_secret(&acme), &sealed_before)
            .await
            .unwrap(),
        "kms-secret"
    );
    assert_eq!(app.audited("admin.org.kms-config.delete").await.len(), 1);
    app.by(&root)
        .step_up_opt(step())
        .delete(&path)
        .await
        .refused(ErrorCode::NotFound);
    side.stop().await;
}

// --- Vault transit: a loopback stand-in of its three endpoints ---------------------

/// Vault's transit engine, as far as the server uses it: named keys, a token, and
/// every call seen (operation, key, context).
#[derive(Default)]
pub struct Vault {
    keys: Mutex<HashMap<String, Key>>,
    token: Mutex<String>,
    pub calls: Mutex<Vec<(String, String, String)>>,
}

impl Vault {
    pub fn with_keys(token: &str, names: &[&str]) -> Arc<Vault> {
        let vault = Vault::default();
        *vault.token.lock().unwrap() = token.to_owned();
        for name in names {
            vault
                .keys
                .lock()
                .unwrap()
                .insert((*name).to_owned(), Key::generate().unwrap());
        }
        Arc::new(vault)
    }
}

pub async fn vault_stand_in(vault: Arc<Vault>) -> String {
    use axum::extract::{Path, State};
    type Answer = (StatusCode, axum::Json<Value>);
    fn refuse(status: StatusCode, why: &str) -> Answer {
        (status, axum::Json(json!({"errors": [why]})))
    }
    fn authorized(vault: &Vault, headers: &axum::http::HeaderMap) -> bool {
        headers.get("x-vault-token").and_then(|v| v.to_str().ok())
            == Some(vault.token.lock().unwrap().as_str())
    }
    async fn transit(
        State(vault): State<Arc<Vault>>,
        Path((op, name)): Path<(String, String)>,
        headers: axum::http::HeaderMap,
        body: axum::Json<Value>,
    ) -> Answer {
        if !authorized(&vault, &headers) {
            return refuse(StatusCode::FORBIDDEN, "permission denied");
        }
        let context = body["context"].as_str().unwrap_or_default().to_owned();
        vault
            .calls
            .lock()
            .unwrap()
            .push((op.clone(), name.clone(), context.clone()));
        let Some(key) = vault.keys.lock().unwrap().get(&name).cloned() else {
            return refuse(StatusCode::BAD_REQUEST, "encryption key not found");
        };
        let aad = BASE64.decode(&context).unwrap_or_default();
        match op.as_str() {
            "encrypt" => {
                let plain = BASE64
                    .decode(body["plaintext"].as_str().unwrap_or_default())
                    .unwrap();
                let sealed = key.encrypt(&aad, &plain).unwrap();
                let text = format!("vault:v1:{}", BASE64.encode(sealed));
                (
                    StatusCode::OK,
                    axum::Json(json!({"data": {"ciphertext": text}})),
                )
            }
            "decrypt" => {
                let text = body["ciphertext"].as_str().unwrap_or_default();
                let bytes = BASE64
                    .decode(text.trim_start_matches("vault:v1:"))
                    .unwrap_or_default();
                match key.decrypt(&aad, &bytes) {
                    Ok(plain) => (
                        StatusCode::OK,
                        axum::Json(json!({"data": {"plaintext": BASE64.encode(plain)}})),
                    ),
                    Err(_) => refuse(
                        StatusCode::BAD_REQUEST,
                        "cipher: message authentication failed",
                    ),
                }
            }
            _ => refuse(StatusCode::NOT_FOUND, "no handler"),
        }
    }
    async fn read_key(
        State(vault): State<Arc<Vault>>,
        Path(name): Path<String>,
        headers: axum::http::HeaderMap,
    ) -> Answer {
        if !authorized(&vault, &headers) {
            return refuse(StatusCode::FORBIDDEN, "permission denied");
        }
        vault
            .calls
            .lock()
            .unwrap()
            .push(("read".to_owned(), name.clone(), String::new()));
        if vault.keys.lock().unwrap().contains_key(&name) {
            (
                StatusCode::OK,
                axum::Json(
                    json!({"data": {"name": name, "type": "aes256-gcm96", "derived": true}}),
                ),
            )
        } else {
            refuse(StatusCode::NOT_FOUND, "")
        }
    }
    let app = axum::Router::new()
        .route("/v1/transit/keys/{name}", axum::routing::get(read_key))
        .route("/v1/transit/{op}/{name}", axum::routing::post(transit))
        .with_state(vault);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    url
}

async fn a_customer_key_in_vault_transit(base: &TestApp) {
    let vault = Vault::with_keys("s.vault-token", &["acme-key"]);
    let address = vault_stand_in(vault.clone()).await;
    let side = with_key(base, K1, &[]).await;
    let app = &side;
    let (acme, alice) = blocking_org(app, "alice", "acme").await;
    enterprise(app, &acme).await;
    let choice = |token: Option<&str>| json!({"provider": "vault-transit", "keyRef": "acme-key", "address": address, "token": token});
    let (status, body) = put_kms(app, &acme, choice(None)).await;
    assert_eq!(code(status, &body), ErrorCode::ValidationError, "{body}");
    assert!(body.to_string().contains("token"), "{body}");
    let (status, body) = put_kms(app, &acme, choice(Some("s.wrong"))).await;
    assert_eq!(code(status, &body), ErrorCode::ValidationError, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("access_denied"),
        "{body}"
    );
    let (status, body) = put_kms(
        app,
        &acme,
        json!({"provider": "vault-transit", "keyRef": "../sys", "address": address, "token": "t"}),
    )
    .await;
    assert_eq!(code(status, &body), ErrorCode::ValidationError, "{body}");
    let chosen: KeyConfiguration =
        Answer::from(put_kms(app, &acme, choice(Some("s.vault-token"))).await)
            .expect(StatusCode::OK)
            .data();
    assert!(chosen.has_token);
    assert_eq!(chosen.address.as_deref(), Some(address.as_str()));
    assert_eq!(chosen.key_ref.as_deref(), Some("acme-key"));
    let token: String = sqlx::query_scalar(&format!(
        "SELECT token FROM org_key_configs WHERE org_id = '{acme}'"
    ))
    .fetch_one(adapters::storage::pool_for_tests(&app.store))
    .await
    .unwrap();
    assert!(
        token.starts_with("enc:v2:0:") && !token.contains("vault-token"),
        "{token}"
    );
    let Answer(status, body) =
        prefer(app, &alice, &acme, json!({"webhookSecret": "v-secret"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let stored = stored_secret(app, &acme).await.unwrap();
    assert_eq!(
        open(&app.state, keys::webhook_secret(&acme), &stored)
            .await
            .unwrap(),
        "v-secret"
    );
    // A team's secrets are under its own data key, wrapped by its root's key.
    let team = app
        .by(&alice)
        .post("/api/organization")
        .json(json!({"name": "acme-web", "parentOrgId": acme}))
        .await
        .expect(StatusCode::CREATED)
        .id();
    let Answer(status, body) =
        prefer(app, &alice, &team, json!({"webhookSecret": "t-secret"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(kek_refs(app, &team).await, ["vault-transit:acme-key"]);
    let (status, body) = put_kms(app, &team, choice(Some("s.vault-token"))).await;
    assert_eq!(
        code(status, &body),
        ErrorCode::ValidationError,
        "a team has no key of its own: {body}"
    );
    assert_eq!(
        kms_status(app, &alice, &team).await.provider,
        "vault-transit"
    );
    vault
        .calls
        .lock()
        .unwrap()
        .retain(|(_, _, c)| c != &BASE64.encode(&team));
    // Every wrap and unwrap named the organization as its context.
    let context = BASE64.encode(&acme);
    let calls = vault.calls.lock().unwrap().clone();
    assert!(calls.iter().any(|(op, _, _)| op == "encrypt"));
    assert!(
        calls
            .iter()
            .filter(|(op, _, _)| op != "read")
            .all(|(_, name, c)| name == "acme-key" && c == &context),
        "{calls:?}"
    );
    // The token is revoked: three checks orphan the organization.
    *vault.token.lock().unwrap() = "s.rotated".to_owned();
    for _ in 0..3 {
        check_keys(&app.state, Utc::now()).await.unwrap();
    }
    let status = kms_status(app, &alice, &acme).await;
    assert_eq!(status.state, "orphaned");
    assert_eq!(status.last_error_class.as_deref(), Some("access_denied"));
    let Answer(status, body) = prefer(app, &alice, &acme, json!({"webhookSecret": "again"})).await;
    assert_eq!(code(status, &body), ErrorCode::KmsUnavailable, "{body}");
    side.stop().await;
}

/// The rewrite pass's rate over many organizations' `enc:v1` secrets (each gets its
/// data key on the way): printed, not asserted.
async fn the_rewrite_pass_over_two_thousand_organizations(base: &TestApp) {
    const ORGS: usize = 2_000;
    let side = with_key(base, K1, &[]).await;
    let legacy = sealed::seal_legacy(&Key::from_slice(&K1).unwrap(), "bulk-secret").unwrap();
    side.sql(&format!(
        "INSERT INTO organizations (id, name, tier, is_system, owner_id, created_at, updated_at)
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {ORGS})
         SELECT 'bulk-' || i, 'bulk-' || i, 'developer', 0, 'owner', '2026-11-28T00:00:00Z', '2026-11-28T00:00:00Z' FROM n"
    ))
    .await;
    side.sql(&format!(
        "INSERT INTO notification_preferences (org_id, email_enabled, webhook_secret, digest_mode, notify_warnings, updated_at)
         SELECT id, 0, '{legacy}', 'immediate', 0, '2026-11-28T00:00:00Z' FROM organizations WHERE id LIKE 'bulk-%'"
    ))
    .await;
    let started = Instant::now();
    let mut rewritten = 0;
    loop {
        let round = rewrite_old_secrets(&side.state, adapters::workers::keys::REWRITE_BATCH)
            .await
            .unwrap();
        rewritten += round.rewritten;
        if round.rewritten == 0 {
            break;
        }
    }
    let took = started.elapsed();
    assert_eq!(rewritten, ORGS);
    let left: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM notification_preferences WHERE webhook_secret NOT LIKE 'enc:v2:%'",
    )
    .fetch_one(adapters::storage::pool_for_tests(&side.store))
    .await
    .unwrap();
    assert_eq!(left, 0);
    eprintln!(
        "rewrite pass ({:?}): {ORGS} secrets (and as many new data keys) in {took:?}, {:.0}/s",
        side.store.dialect(),
        ORGS as f64 / took.as_secs_f64()
    );
    side.stop().await;
}

on_both_backends!(
    the_rewrite_pass_over_two_thousand_organizations,
    secrets_are_sealed_under_each_organizations_own_key,
    older_secrets_are_rewritten_by_a_pass_that_resumes,
    a_platform_key_rotation_rewraps_data_keys_and_rewrites_no_secret,
    a_customer_key_in_aws_kms_orphans_and_recovers,
    a_customer_key_in_vault_transit,
);

/// Two server processes on one database: a key configuration changed through one is
/// used by the other within a second (its unwrapped data keys are dropped).
#[tokio::test]
async fn a_key_configuration_changed_on_one_replica_is_used_by_the_other_at_once() {
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let vault = Vault::with_keys("s.vault-token", &["first", "second"]);
    let address = vault_stand_in(vault.clone()).await;
    let key = key_text(K1);
    let vars = [
        ("SECRETS_ENCRYPTION_KEY", key.as_str()),
        ("BOOTSTRAP_SUPERADMIN_EMAILS", ROOT_EMAIL),
    ];
    let client = reqwest::Client::new();
    let ports = super::crash::two_free_ports();
    let mut servers = Vec::new();
    for port in ports {
        servers.push(super::crash::start_with(&url, port, &vars));
        super::crash::wait_healthy(&client, &format!("http://127.0.0.1:{port}")).await;
    }
    let [a, b] = ports.map(|port| format!("http://127.0.0.1:{port}"));
    let keys = TokenKeys::hs256(SECRET);
    let sign = |sub: &str, email: Option<&str>, step_up: bool| {
        let mut claims = Claims::user(sub, email, Utc::now(), Duration::from_secs(3600));
        claims.step_up = step_up;
        keys.sign(&claims).unwrap()
    };
    let root = sign("root", Some(ROOT_EMAIL), false);
    super::crash::create_org(&client, &a, &root, "system").await;
    let alice = super::crash::user_token("alice");
    let acme = super::crash::create_org(&client, &a, &alice, "acme").await;
    let send =
        |base: &str, method: reqwest::Method, path: &str, token: &str, step: bool, body: Value| {
            let mut request = client
                .request(method, format!("{base}{path}"))
                .bearer_auth(token)
                .header("x-org-id", &acme)
                .json(&body);
            if step {
                request = request.header("x-step-up-token", sign("root", None, true));
            }
            async move {
                let response = request.send().await.unwrap();
                let status = response.status().as_u16();
                (status, response.json::<Value>().await.unwrap())
            }
        };
    let (status, body) = send(
        &a,
        reqwest::Method::PATCH,
        &format!("/api/organization/{acme}/tier"),
        &root,
        true,
        json!({"tier": "enterprise"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let kms_path = format!("/api/admin/organizations/{acme}/kms");
    let use_key = |name: &str| {
        let body = json!({"provider": "vault-transit", "keyRef": name, "address": address,
                          "token": "s.vault-token"});
        send(&a, reqwest::Method::PUT, &kms_path, &root, true, body)
    };
    let prefs = "/api/compliance/notification-preferences";
    let set_secret = |secret: &str| {
        let body = json!({ "webhookSecret": secret });
        send(&b, reqwest::Method::PUT, prefs, &alice, false, body)
    };
    let (status, body) = use_key("first").await;
    assert_eq!(status, 200, "{body}");
    // B seals a secret: it unwraps the data key through the first key and keeps it.
    let (status, body) = set_secret("one").await;
    assert_eq!(status, 200, "{body}");
    let decrypts = |key: &str| {
        vault
            .calls
            .lock()
            .unwrap()
            .iter()
            .filter(|(op, name, _)| op == "decrypt" && name == key)
            .count()
    };
    let before = decrypts("second");
    // A moves the organization to the second key.
    let (status, body) = use_key("second").await;
    assert_eq!(status, 200, "{body}");
    let changed = Instant::now();
    let mut used_after = None;
    while changed.elapsed() < Duration::from_secs(1) {
        let (status, body) = set_secret("two").await;
        assert_eq!(status, StatusCode::OK.as_u16(), "{body}");
        if decrypts("second") > before {
            used_after = Some(changed.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for server in &servers {
        super::crash::terminate(server);
    }
    for mut server in servers {
        let _ = server.wait();
    }
    drop_postgres(&admin_url, &name).await;
    let after = used_after.expect("replica B still used the key it kept after a second");
    eprintln!("replica B used the new key after {after:?}");
}
