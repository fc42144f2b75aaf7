//! Single sign-on through a real OpenID provider on loopback: PyPI's
//! `oidc-provider-mock` (scripts/test installs it and sets `OIDC_PROVIDER_MOCK`),
//! driven as a browser would (a cookie jar of one cookie, the provider's form
//! posted), on both backends.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::TestApp;

const PUBLIC_URL: &str = "http://127.0.0.1:18080";

/// An `oidc-provider-mock` on loopback, stopped when dropped.
struct Provider {
    child: Child,
    issuer: String,
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn provider(users: &[Value]) -> Provider {
    let port = super::crash::free_port();
    let mut command = Command::new(
        std::env::var("OIDC_PROVIDER_MOCK").unwrap_or_else(|_| "oidc-provider-mock".to_owned()),
    );
    command.args([
        "-H",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "--require-nonce",
        "true",
    ]);
    for user in users {
        command.args(["--user-claims", &user.to_string()]);
    }
    let provider = Provider {
        child: command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("oidc-provider-mock (PyPI) must be installed: scripts/test installs it and sets OIDC_PROVIDER_MOCK"),
        issuer: format!("http://127.0.0.1:{port}"),
    };
    for _ in 0..300 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return provider;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("oidc-provider-mock did not start");
}

async fn sso_app(base: &TestApp) -> (TestApp, adapters::outbound::dns::StaticRecords) {
    let app = base
        .beside(&[
            ("SSO_ALLOW_LOOPBACK_HTTP", "true"),
            ("PUBLIC_URL", PUBLIC_URL),
        ])
        .await;
    let records = adapters::outbound::dns::StaticRecords::default();
    app.state.sso.set_txt(Arc::new(records.clone()));
    (app, records)
}

/// A request through the router, answering the status, the headers and the body.
async fn raw(app: &TestApp, request: Request<Body>) -> (StatusCode, axum::http::HeaderMap, Value) {
    let response = app.router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, headers, body)
}

/// What a browser holds after `start`: the provider's URL and the binding cookie.
async fn start(app: &TestApp, query: &str) -> (String, String) {
    let (status, headers, body) = raw(
        app,
        Request::get(format!("/api/auth/sso/start?{query}"))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::FOUND, "{body}");
    let location = headers["location"].to_str().unwrap().to_owned();
    let cookie = headers["set-cookie"].to_str().unwrap();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap().to_owned();
    (location, pair)
}

/// The person picks `sub` at the provider: the callback path it redirects to.
async fn authorize(location: &str, sub: &str) -> String {
    assert!(
        location.contains("code_challenge_method=S256"),
        "{location}"
    );
    assert!(location.contains("nonce="), "{location}");
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let page = client.get(location).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let answer = client
        .post(location)
        .form(&[("sub", sub)])
        .send()
        .await
        .unwrap();
    assert_eq!(
        answer.status(),
        302,
        "{}",
        answer.text().await.unwrap_or_default()
    );
    let back = answer.headers()["location"].to_str().unwrap().to_owned();
    back.strip_prefix(PUBLIC_URL)
        .unwrap_or_else(|| panic!("the provider sent the browser to {back}"))
        .to_owned()
}

async fn callback(app: &TestApp, path: &str, cookie: Option<&str>) -> (StatusCode, Value) {
    let mut request = Request::get(path);
    if let Some(cookie) = cookie {
        request = request.header("cookie", cookie);
    }
    let (status, _, body) = raw(app, request.body(Body::empty()).unwrap()).await;
    (status, body)
}

async fn enterprise(app: &TestApp, org: &str) {
    let root = app.super_token().await;
    let (status, body) = app
        .stepped(
            "PATCH",
            &format!("/api/organization/{org}/tier"),
            &root,
            Some(app.step_up("root", 0)),
            Some(json!({"tier": "enterprise"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// acme (Enterprise), its verified domain and one configuration; the owner's token.
async fn configured(
    app: &TestApp,
    records: &adapters::outbound::dns::StaticRecords,
    issuer: &str,
    jit: bool,
) -> (String, String, String) {
    let acme = app.org("owner", "acme").await;
    enterprise(app, &acme).await;
    let owner = app.token("owner", "owner@example.com");
    let (status, claimed) = app
        .call(
            "POST",
            &format!("/api/organization/{acme}/domains"),
            &owner,
            None,
            Some(json!({"domain": "Acme-SSO.test"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{claimed}");
    let claimed = &claimed["data"];
    assert_eq!(claimed["domain"], "acme-sso.test");
    assert_eq!(claimed["verified"], false);
    let path = format!("/api/organization/{acme}/domains/acme-sso.test/verify");
    // Not published yet: 400, nothing verified.
    let (status, body) = app.call("POST", &path, &owner, None, None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    records.publish(
        claimed["recordName"].as_str().unwrap(),
        claimed["recordValue"].as_str().unwrap(),
    );
    let (status, body) = app.call("POST", &path, &owner, None, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["verified"], true);
    let (status, config) = app
        .call(
            "POST",
            &format!("/api/organization/{acme}/idp"),
            &owner,
            None,
            Some(json!({
                "name": "corp", "issuer": issuer, "clientId": "platform",
                "clientSecret": "s3cret-of-the-client", "domains": ["acme-sso.test"],
                "jitProvisioning": jit,
                "roleMappings": [{"group": "auditors", "role": "Compliance Viewer"}],
            })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{config}");
    assert!(
        !config.to_string().contains("s3cret-of-the-client"),
        "{config}"
    );
    assert_eq!(config["data"]["active"], true);
    (
        acme,
        owner,
        config["data"]["id"].as_str().unwrap().to_owned(),
    )
}

async fn provisioning_signs_a_person_in_once(base: &TestApp) {
    let provider = provider(&[
        json!({"sub": "alice-at-idp", "email": "alice@acme-sso.test", "email_verified": true, "groups": ["auditors"]}),
        json!({"sub": "mallory-at-idp", "email": "mallory@acme-sso.test", "email_verified": false}),
    ])
    .await;
    let (app, records) = sso_app(base).await;
    let (acme, _owner, _) = configured(&app, &records, &provider.issuer, true).await;

    let (location, cookie) = start(&app, "email=alice@acme-sso.test").await;
    let back = authorize(&location, "alice-at-idp").await;
    // Without the browser's cookie the state is refused (and stays unused).
    let (status, body) = callback(&app, &back, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(body["code"], "SSO_STATE_INVALID");
    // The callback's state was used by that refusal: a fresh sign-in.
    let (location, cookie2) = start(&app, "org=acme").await;
    let back = authorize(&location, "alice-at-idp").await;
    let (status, session) = callback(&app, &back, Some(&cookie2)).await;
    assert_eq!(status, StatusCode::OK, "{session}");
    let access = session["data"]["accessToken"].as_str().unwrap().to_owned();
    // A replayed state is refused.
    let (status, body) = callback(&app, &back, Some(&cookie2)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["code"], "SSO_STATE_INVALID");
    let _ = cookie;

    // The person is a member with the mapped Role, signed in.
    let (status, me) = app.call("GET", "/api/me", &access, None, None).await;
    assert_eq!(status, StatusCode::OK, "{me}");
    assert_eq!(me["data"]["email"], "alice@acme-sso.test");
    let (status, members) = app
        .call(
            "GET",
            &format!("/api/organization/{acme}/members"),
            &access,
            None,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{members}");
    assert!(
        members.to_string().contains("alice@acme-sso.test")
            || members
                .to_string()
                .contains(me["data"]["userId"].as_str().unwrap())
    );

    // An unverified e-mail creates nothing.
    let (location, cookie) = start(&app, "org=acme").await;
    let back = authorize(&location, "mallory-at-idp").await;
    let (status, body) = callback(&app, &back, Some(&cookie)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(body["code"], "SSO_EMAIL_NOT_VERIFIED");
    let accounts: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM accounts WHERE email = 'mallory@acme-sso.test'")
            .fetch_one(adapters::storage::pool_for_tests(&app.store))
            .await
            .unwrap();
    assert_eq!(accounts, 0);
    let failed = app.audited("user.login.failed").await;
    assert!(
        failed
            .iter()
            .any(|e| e.details.to_string().contains("sso e-mail not verified")),
        "refusals are audited with their reason"
    );
    app.stop().await;
}

async fn enforcement_refuses_other_credentials(base: &TestApp) {
    let provider = provider(&[
        json!({"sub": "alice-at-idp", "email": "alice@acme-sso.test", "email_verified": true}),
    ])
    .await;
    let (app, records) = sso_app(base).await;
    let (acme, owner, _) = configured(&app, &records, &provider.issuer, true).await;
    let (location, cookie) = start(&app, "org=acme").await;
    let back = authorize(&location, "alice-at-idp").await;
    let (status, session) = callback(&app, &back, Some(&cookie)).await;
    assert_eq!(status, StatusCode::OK, "{session}");
    let alice_sso = session["data"]["accessToken"].as_str().unwrap().to_owned();

    // The owner keeps password access as an armed break-glass account.
    let until = (chrono::Utc::now() + chrono::Duration::days(1)).to_rfc3339();
    let (status, body) = app
        .stepped(
            "PUT",
            &format!("/api/organization/{acme}/sso/break-glass/owner"),
            &owner,
            Some(app.step_up("owner", 0)),
            Some(json!({"until": until, "reason": "the identity provider may fail"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = app
        .stepped(
            "PUT",
            &format!("/api/organization/{acme}/sso"),
            &owner,
            Some(app.step_up("owner", 0)),
            Some(json!({"required": true})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["data"]["required"], true);

    // A member signed in otherwise is refused, naming how to sign in.
    let (status, body) = app
        .call(
            "POST",
            &format!("/api/organization/{acme}/members"),
            &owner,
            None,
            Some(json!({"userId": "bob", "role": "member"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let bob = app.token("bob", "bob@example.com");
    let (status, body) = app
        .call(
            "GET",
            &format!("/api/organization/{acme}/members"),
            &bob,
            None,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["code"], "SSO_REQUIRED");
    assert!(body["message"]
        .as_str()
        .unwrap()
        .contains("/api/auth/sso/start?org=acme"));
    // The SSO session and the break-glass owner pass.
    for token in [&alice_sso, &owner] {
        let (status, body) = app
            .call(
                "GET",
                &format!("/api/organization/{acme}/members"),
                token,
                None,
                None,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    // Disarmed, the owner is refused too (every replica follows within a second).
    let (status, _) = app
        .call(
            "DELETE",
            &format!("/api/organization/{acme}/sso/break-glass/owner"),
            &owner,
            None,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = app
        .call(
            "GET",
            &format!("/api/organization/{acme}/members"),
            &owner,
            None,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["code"], "SSO_REQUIRED");
    app.stop().await;
}

async fn configurations_are_bounded_and_gated(base: &TestApp) {
    let provider = provider(&[]).await;
    let (app, records) = sso_app(base).await;
    let (acme, owner, first) = configured(&app, &records, &provider.issuer, false).await;
    let path = format!("/api/organization/{acme}/idp");
    for n in 2..=5 {
        let (status, body) = app
            .call("POST", &path, &owner, None, Some(json!({"name": format!("idp-{n}"), "issuer": provider.issuer, "clientId": "c", "clientSecret": "s"})))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let (status, body) = app
        .call("POST", &path, &owner, None, Some(json!({"name": "sixth", "issuer": provider.issuer, "clientId": "c", "clientSecret": "s"})))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    // An issuer whose document names another (a templated or wrong one): 400.
    let (status, body) = app
        .call("PUT", &format!("{path}/{first}"), &owner, None, Some(json!({"name": "corp", "issuer": format!("{}/", provider.issuer), "clientId": "c", "version": 1})))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["details"]["field"], "issuer");
    // A public mail domain cannot be claimed.
    let (status, body) = app
        .call(
            "POST",
            &format!("/api/organization/{acme}/domains"),
            &owner,
            None,
            Some(json!({"domain": "gmail.com"})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    // Without the feature (a Developer organization): 403, and a downgrade keeps
    // the configurations, inactive.
    let globex = app.org("gina", "globex").await;
    let gina = app.token("gina", "gina@example.com");
    let (status, body) = app
        .call("POST", &format!("/api/organization/{globex}/idp"), &gina, None, Some(json!({"name": "x", "issuer": provider.issuer, "clientId": "c", "clientSecret": "s"})))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["code"], "FEATURE_NOT_AVAILABLE");
    let root = app.super_token().await;
    let (status, body) = app
        .stepped(
            "PATCH",
            &format!("/api/organization/{acme}/tier"),
            &root,
            Some(app.step_up("root", 0)),
            Some(json!({"tier": "developer"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = app.call("GET", &path, &owner, None, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let listed = body["data"].as_array().unwrap();
    assert_eq!(listed.len(), 5);
    assert!(listed
        .iter()
        .all(|c| c["active"] == false && c["enabled"] == true));
    app.stop().await;
}

crate::on_both_backends!(
    provisioning_signs_a_person_in_once,
    enforcement_refuses_other_credentials,
    configurations_are_bounded_and_gated,
);
