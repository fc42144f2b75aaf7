//! Authority (document 2): ownership, super-admin from the platform only, tokens.

use crate::api::Answer;
use adapters::code::ErrorCode;
use adapters::http::wire::{Member, Organization, SuperAdmins};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex as StdMutex;
use tenancy::MembershipRole;

use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};

use super::*;

async fn ownership_moves_full_control_and_only_the_owner_moves_it(app: &TestApp) {
    let org = app.org("alice", "owned").await;
    let alice = app.token("alice", "alice@example.com");
    let bob = app.token("bob", "bob@example.com");
    let carol = app.token("carol", "carol@example.com");
    for (user, role) in [("bob", "member"), ("carol", "admin")] {
        app.by(&alice)
            .post(format!("/api/organization/{org}/members"))
            .json(json!({"userId": user, "role": role}))
            .await
            .expect(StatusCode::CREATED);
    }
    let transfer = format!("/api/organization/{org}/transfer-owner");
    // An Admin (who holds org:settings) cannot take ownership, even with step-up.
    let Answer(status, body) = app
        .by(&carol)
        .step_up(app.step_up("carol", 1))
        .patch(&transfer)
        .json(json!({"userId": "carol"}))
        .await;
    assert_eq!(
        (status, code(status, &body)),
        (StatusCode::FORBIDDEN, ErrorCode::Forbidden),
        "{body}"
    );
    // The Owner transfers to bob.
    let transferred: Organization = app
        .by(&alice)
        .step_up(app.step_up("alice", 1))
        .patch(&transfer)
        .json(json!({"userId": "bob"}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(transferred.owner_id, "bob");
    // The new Owner has full control: adds a member, creates a Role and a rule, exports.
    app.by(&bob)
        .post(format!("/api/organization/{org}/members"))
        .json(json!({"userId": "dave"}))
        .await
        .expect(StatusCode::CREATED);
    app.by(&bob)
        .post(format!("/api/organization/{org}/roles"))
        .json(json!({"name": "Auditors", "permissions": ["audit:read"]}))
        .await
        .expect(StatusCode::CREATED);
    app.by(&bob)
        .org(&org)
        .post("/api/compliance/rules")
        .json(
            json!({"name": "pinned", "target": "plugin", "severity": "error",
                        "field": "version", "operator": "neq", "value": "latest"}),
        )
        .await
        .expect(StatusCode::CREATED);
    app.by(&bob)
        .get(format!("/api/organization/{org}/export"))
        .await
        .expect(StatusCode::OK);
    // The previous Owner stays an Admin member but can no longer act as Owner.
    let members: Vec<Member> = app
        .by(&alice)
        .get(format!("/api/organization/{org}/members"))
        .await
        .expect(StatusCode::OK)
        .items("members");
    let alice_row = members.iter().find(|m| m.user_id == "alice");
    assert_eq!(alice_row.map(|m| m.role), Some(MembershipRole::Admin));
    app.by(&alice)
        .step_up(app.step_up("alice", 1))
        .patch(&transfer)
        .json(json!({"userId": "alice"}))
        .await
        .refused(ErrorCode::Forbidden);
    // Audited with both user ids.
    let events = app.audited("org.ownership.transfer").await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].details, json!({"from": "alice", "to": "bob"}));
}

/// A token signed with the test secret whose payload is exactly `claims`.
fn raw_token(claims: Value) -> String {
    encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .unwrap()
}

async fn super_admin_comes_from_the_platform_never_from_the_token(app: &TestApp) {
    let now = Utc::now().timestamp();
    // A token that claims to be a super-admin is an ordinary user.
    let forged =
        raw_token(json!({"sub": "mallory", "exp": now + 600, "iat": now, "superAdmin": true}));
    app.by(&forged)
        .get("/api/audit/verify?orgId=x")
        .await
        .expect(StatusCode::FORBIDDEN);
    // The bootstrap identifier is, once it created the system organization.
    let (system, root) = app.system().await;
    app.by(&root)
        .get(format!("/api/audit/verify?orgId={system}"))
        .await
        .expect(StatusCode::OK);
    // Granting needs step-up.
    let grant = "/api/admin/super-admins/sam";
    app.by(&root)
        .put(grant)
        .await
        .refused(ErrorCode::StepUpRequired);
    app.by(&root)
        .step_up(app.step_up("root", 1))
        .put(grant)
        .await
        .expect(StatusCode::OK);
    let sam = app.token("sam", "sam@example.com");
    app.by(&sam)
        .get(format!("/api/audit/verify?orgId={system}"))
        .await
        .expect(StatusCode::OK);
    let admins: SuperAdmins = app
        .by(&sam)
        .get("/api/admin/super-admins")
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(admins.super_admins, ["root", "sam"]);
    // A non-super-admin cannot grant.
    let mallory = app.token("mallory", "m@example.com");
    app.by(&mallory)
        .step_up(app.step_up("mallory", 1))
        .put("/api/admin/super-admins/mallory")
        .await
        .expect(StatusCode::FORBIDDEN);
    // Revoked: sam can no longer verify.
    app.by(&root)
        .step_up(app.step_up("root", 1))
        .delete(grant)
        .await
        .expect(StatusCode::OK);
    app.by(&sam)
        .get(format!("/api/audit/verify?orgId={system}"))
        .await
        .expect(StatusCode::FORBIDDEN);
    // The last super-admin cannot revoke themselves.
    let Answer(status, body) = app
        .by(&root)
        .step_up(app.step_up("root", 1))
        .delete("/api/admin/super-admins/root")
        .await;
    assert_eq!(
        (status, code(status, &body)),
        (StatusCode::CONFLICT, ErrorCode::Conflict),
        "{body}"
    );
    // Audited in the system organization's chain.
    let granted = app.audited("admin.superadmin.grant").await;
    let revoked = app.audited("admin.superadmin.revoke").await;
    assert_eq!((granted.len(), revoked.len()), (1, 1));
    assert_eq!(granted[0].chain_key, system);
    assert_eq!(revoked[0].target_id.as_deref(), Some("sam"));
}

async fn tokens_mean_what_document_2_says(app: &TestApp) {
    let now = Utc::now().timestamp();
    let create = |token: String| async move {
        app.by(&token)
            .post("/api/organization")
            .json(json!({"name": format!("t{}", uuid::Uuid::new_v4().simple())}))
            .await
    };
    let refused = [
        (
            "nbf in the future",
            json!({"sub": "u", "exp": now + 600, "iat": now, "nbf": now + 300}),
        ),
        (
            "lives 25 hours",
            json!({"sub": "u", "exp": now + 25 * 3600, "iat": now}),
        ),
        (
            "no iat, expires in 25 hours",
            json!({"sub": "u", "exp": now + 25 * 3600}),
        ),
        (
            "empty sub",
            json!({"sub": "", "exp": now + 600, "iat": now}),
        ),
        (
            "blank sub",
            json!({"sub": "  ", "exp": now + 600, "iat": now}),
        ),
    ];
    for (why, claims) in refused {
        let Answer(status, body) = create(raw_token(claims)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{why}: {body}");
        assert_eq!(code(status, &body), ErrorCode::Unauthorized, "{why}");
    }
    let accepted = [
        (
            "24 hours",
            json!({"sub": "u", "exp": now + 24 * 3600, "iat": now}),
        ),
        (
            "nbf passed",
            json!({"sub": "u", "exp": now + 600, "iat": now, "nbf": now - 10}),
        ),
    ];
    for (why, claims) in accepted {
        let Answer(status, body) = create(raw_token(claims)).await;
        assert_eq!(status, StatusCode::CREATED, "{why}: {body}");
    }
}

on_both_backends!(
    ownership_moves_full_control_and_only_the_owner_moves_it,
    super_admin_comes_from_the_platform_never_from_the_token,
    tokens_mean_what_document_2_says,
);

// --- An identity provider's key set, served on loopback by the test itself. ---

struct Idp {
    url: String,
    served: Arc<StdMutex<Value>>,
    fetches: Arc<AtomicUsize>,
}

fn jwk(kid: &str) -> Value {
    let all: Value = serde_json::from_str(include_str!("../fixtures/public-jwks.json")).unwrap();
    all[kid].clone()
}

async fn idp(kids: &[&str]) -> Idp {
    let served = Arc::new(StdMutex::new(
        json!({"keys": kids.iter().map(|k| jwk(k)).collect::<Vec<_>>()}),
    ));
    let fetches = Arc::new(AtomicUsize::new(0));
    let router = {
        let served = served.clone();
        let fetches = fetches.clone();
        axum::Router::new().route(
            "/jwks.json",
            axum::routing::get(move || {
                let served = served.clone();
                let fetches = fetches.clone();
                async move {
                    fetches.fetch_add(1, Ordering::SeqCst);
                    axum::Json(served.lock().unwrap().clone())
                }
            }),
        )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Idp {
        url: format!("http://{addr}/jwks.json"),
        served,
        fetches,
    }
}

fn signed(kid: &str, algorithm: Algorithm, claims: Value) -> String {
    let pem = match kid {
        "rsa-a" => include_str!("../fixtures/rsa-a.pem"),
        "rsa-b" => include_str!("../fixtures/rsa-b.pem"),
        "ec-c" => include_str!("../fixtures/ec-c.pem"),
        _ => include_str!("../fixtures/rsa-outsider.pem"),
    };
    let key = match algorithm {
        Algorithm::ES256 => EncodingKey::from_ec_pem(pem.as_bytes()).unwrap(),
        _ => EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap(),
    };
    let mut header = Header::new(algorithm);
    header.kid = Some(kid.to_owned());
    encode(&header, &claims, &key).unwrap()
}

#[tokio::test]
async fn identity_provider_tokens_are_verified_against_its_key_set() {
    let provider = idp(&["rsa-a", "ec-c"]).await;
    let path = std::env::temp_dir().join(format!("compliance-jwks-{}.db", uuid::Uuid::new_v4()));
    let store = Store::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    adapters::services::operations::migrate(&store)
        .await
        .unwrap();
    let config = test_config(&[
        ("JWT_JWKS_URL", provider.url.as_str()),
        ("JWT_ISSUER", "https://idp.example.com/"),
        ("JWT_AUDIENCE", "compliance"),
        ("JWT_JWKS_MIN_REFRESH_SECONDS", "2"),
    ]);
    let state = AppState::new(
        config,
        store.clone(),
        Arc::new(adapters::audit::AuditCounters::default()),
    );
    state.infra.keys.prefetch().await;
    assert_eq!(
        provider.fetches.load(Ordering::SeqCst),
        1,
        "fetched at start"
    );
    let app = router(state);
    let call = |token: String| {
        let app = app.clone();
        async move {
            let request = Request::post("/api/organization")
                .header("authorization", format!("Bearer {token}"))
                .header("content-type", "application/json")
                .body(Body::from(
                    json!({"name": format!("o{}", uuid::Uuid::new_v4().simple())}).to_string(),
                ))
                .unwrap();
            let response = app.oneshot(request).await.unwrap();
            let status = response.status();
            let bytes = response.into_body().collect().await.unwrap().to_bytes();
            (
                status,
                serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null),
            )
        }
    };
    let now = Utc::now().timestamp();
    let claims = |sub: &str| {
        json!({"sub": sub, "exp": now + 600, "iat": now,
                                    "iss": "https://idp.example.com/", "aud": "compliance"})
    };
    // RS256 and ES256 from the set.
    let (status, body) = call(signed("rsa-a", Algorithm::RS256, claims("idp-user-1"))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = call(signed("ec-c", Algorithm::ES256, claims("idp-user-2"))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // CVE-2026-25537: an `exp` or `nbf` of the wrong JSON type is not taken for
    // absent. A string, an object or null in either claim is refused, whatever the
    // algorithm; a numeric `nbf` in the past is accepted, one in the future is not.
    let sign = |algorithm: Algorithm, claims: Value| match algorithm {
        Algorithm::HS256 => raw_token(claims),
        Algorithm::ES256 => signed("ec-c", algorithm, claims),
        _ => signed("rsa-a", algorithm, claims),
    };
    for algorithm in [Algorithm::HS256, Algorithm::RS256, Algorithm::ES256] {
        for claim in ["exp", "nbf"] {
            for wrong in [json!("9999999999"), json!({"at": now + 600}), Value::Null] {
                let mut forged = claims("typed");
                forged[claim] = wrong.clone();
                let (status, body) = call(sign(algorithm, forged)).await;
                assert_eq!(
                    (status, code(status, &body)),
                    (StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized),
                    "{algorithm:?} with {claim} = {wrong}: {body}"
                );
            }
        }
        let mut past = claims("typed-past");
        past["nbf"] = json!(now - 60);
        assert_eq!(
            call(sign(algorithm, past)).await.0,
            StatusCode::CREATED,
            "{algorithm:?}"
        );
        let mut future = claims("typed-future");
        future["nbf"] = json!(now + 300);
        assert_eq!(
            call(sign(algorithm, future)).await.0,
            StatusCode::UNAUTHORIZED,
            "{algorithm:?}"
        );
    }
    // The HS256 development path stays.
    let (status, _) = call(raw_token(json!({"sub": "dev", "exp": now + 600, "iat": now, "iss": "https://idp.example.com/", "aud": "compliance"}))).await;
    assert_eq!(status, StatusCode::CREATED);
    // Wrong issuer, wrong audience: refused.
    let mut wrong = claims("u");
    wrong["iss"] = json!("https://evil.example.com/");
    assert_eq!(
        call(signed("rsa-a", Algorithm::RS256, wrong)).await.0,
        StatusCode::UNAUTHORIZED
    );
    let mut wrong = claims("u");
    wrong["aud"] = json!("someone-else");
    assert_eq!(
        call(signed("rsa-a", Algorithm::RS256, wrong)).await.0,
        StatusCode::UNAUTHORIZED
    );
    // The algorithm comes from the key: an RSA kid with an ES256 header is refused.
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some("rsa-a".to_owned());
    let confused = encode(
        &header,
        &claims("u"),
        &EncodingKey::from_ec_pem(include_str!("../fixtures/ec-c.pem").as_bytes()).unwrap(),
    )
    .unwrap();
    let (status, body) = call(confused).await;
    assert_eq!(
        (status, code(status, &body)),
        (StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized)
    );
    assert_eq!(
        provider.fetches.load(Ordering::SeqCst),
        1,
        "known keys need no fetch"
    );

    // A key that is not in the set: one refresh (once the interval since the start's
    // fetch has passed), then refused; a second unknown key within the interval
    // fetches nothing more.
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let (status, _) = call(signed("rsa-outsider", Algorithm::RS256, claims("u"))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(provider.fetches.load(Ordering::SeqCst), 2);
    let (status, _) = call(signed("rsa-outsider", Algorithm::RS256, claims("u"))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        provider.fetches.load(Ordering::SeqCst),
        2,
        "refreshed more than once per interval"
    );

    // Rotation: the provider swaps key a for key b.
    *provider.served.lock().unwrap() = json!({"keys": [jwk("rsa-b"), jwk("ec-c")]});
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let (status, body) = call(signed("rsa-b", Algorithm::RS256, claims("idp-user-3"))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(provider.fetches.load(Ordering::SeqCst), 3);
    // The retired key is gone with the old set.
    let (status, _) = call(signed("rsa-a", Algorithm::RS256, claims("u"))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    store.close().await;
}

/// The real server (hyper in front): a header section larger than hyper buffers
/// still gets an answer in the envelope, never an empty body.
#[tokio::test]
async fn an_oversized_authorization_header_is_answered_in_the_envelope() {
    use std::io::{Read, Write};
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let db = std::env::temp_dir().join(format!("compliance-hdr-{}.db", uuid::Uuid::new_v4()));
    let mut server = std::process::Command::new(env!("CARGO_BIN_EXE_compliance"))
        .arg("serve")
        .env("DATABASE_URL", format!("sqlite://{}", db.display()))
        .env("JWT_SECRET", SECRET)
        .env("COMPLIANCE_SERVICE_PORT", port.to_string())
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut answers = Vec::new();
    for size in [100_000usize, 2_000_000] {
        let mut stream = None;
        for _ in 0..100 {
            if let Ok(s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                stream = Some(s);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let mut stream = stream.expect("the server did not start");
        let request = format!(
            "GET /api/organization HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n",
            "a".repeat(size)
        );
        let _ = stream.write_all(request.as_bytes());
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        answers.push(String::from_utf8_lossy(&answer).into_owned());
    }
    let _ = server.kill();
    let _ = server.wait();
    for answer in &answers {
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((answer, ""));
        let body: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        assert_eq!(body["success"], false, "{head}");
        assert!(
            [ErrorCode::Unauthorized, ErrorCode::HeaderTooLarge].contains(&crate::code_of(&body)),
            "{head} {body}"
        );
    }
    assert!(
        answers[1].starts_with("HTTP/1.1 431"),
        "{}",
        answers[1].lines().next().unwrap_or("")
    );
}
