//! Single sign-on through a real OpenID provider on loopback: PyPI's
//! `oidc-provider-mock` (scripts/test installs it and sets `OIDC_PROVIDER_MOCK`),
//! driven as a browser would (a cookie jar of one cookie, the provider's form
//! posted), on both backends.

use crate::api::Answer;
use crate::code;
use adapters::code::ErrorCode;
use adapters::http::wire::{
    Domain, Enforcement, IdentityProvider, Me, Member, Organization, PersonalToken, Session,
};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use tenancy::sso::Refusal;
use tenancy::MembershipRole;

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
    sso_app_with(base, &[]).await
}

async fn sso_app_with(
    base: &TestApp,
    more: &[(&str, &str)],
) -> (TestApp, adapters::outbound::dns::StaticRecords) {
    let mut vars = vec![
        ("SSO_ALLOW_LOOPBACK_HTTP", "true"),
        ("PUBLIC_URL", PUBLIC_URL),
    ];
    vars.extend_from_slice(more);
    let app = base.beside(&vars).await;
    let records = adapters::outbound::dns::StaticRecords::default();
    app.state.outbound.sso.set_txt(Arc::new(records.clone()));
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
    app.by(&root)
        .step_up(app.step_up("root", 0))
        .patch(format!("/api/organization/{org}/tier"))
        .json(json!({"tier": "enterprise"}))
        .await
        .expect(StatusCode::OK);
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
    let claimed: Domain = app
        .by(&owner)
        .post(format!("/api/organization/{acme}/domains"))
        .json(json!({"domain": "Acme-SSO.test"}))
        .await
        .expect(StatusCode::CREATED)
        .data();
    assert_eq!(claimed.domain, "acme-sso.test");
    assert!(!claimed.verified);
    let path = format!("/api/organization/{acme}/domains/acme-sso.test/verify");
    // Not published yet: 400, nothing verified.
    app.by(&owner)
        .post(&path)
        .await
        .expect(StatusCode::BAD_REQUEST);
    records.publish(&claimed.record_name, &claimed.record_value);
    let verified: Domain = app
        .by(&owner)
        .post(&path)
        .await
        .expect(StatusCode::OK)
        .data();
    assert!(verified.verified);
    let Answer(status, config) = app
        .by(&owner)
        .post(format!("/api/organization/{acme}/idp"))
        .json(json!({
            "name": "corp", "issuer": issuer, "clientId": "platform",
            "clientSecret": "s3cret-of-the-client", "domains": ["acme-sso.test"],
            "jitProvisioning": jit,
            "roleMappings": [{"group": "auditors", "role": "Compliance Viewer"}],
        }))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{config}");
    assert!(
        !config.to_string().contains("s3cret-of-the-client"),
        "{config}"
    );
    let config: IdentityProvider = Answer::from((status, config)).data();
    assert!(config.active);
    (acme, owner, config.id)
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
    assert_eq!(code(status, &body), ErrorCode::Sso(Refusal::StateInvalid));
    // The callback's state was used by that refusal: a fresh sign-in.
    let (location, cookie2) = start(&app, "org=acme").await;
    let back = authorize(&location, "alice-at-idp").await;
    let access = Answer::from(callback(&app, &back, Some(&cookie2)).await)
        .expect(StatusCode::OK)
        .data::<Session>()
        .access_token;
    // A replayed state is refused.
    let (status, body) = callback(&app, &back, Some(&cookie2)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(code(status, &body), ErrorCode::Sso(Refusal::StateInvalid));
    let _ = cookie;

    // The person is a member with the mapped Role, signed in.
    let me: Me = app
        .by(&access)
        .get("/api/me")
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(me.account.email, "alice@acme-sso.test");
    let members: Vec<Member> = app
        .by(&access)
        .get(format!("/api/organization/{acme}/members"))
        .await
        .expect(StatusCode::OK)
        .items("members");
    assert!(
        members.iter().any(|m| m.user_id == me.account.user_id),
        "{members:?}"
    );

    // An unverified e-mail creates nothing.
    let (location, cookie) = start(&app, "org=acme").await;
    let back = authorize(&location, "mallory-at-idp").await;
    let (status, body) = callback(&app, &back, Some(&cookie)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(
        code(status, &body),
        ErrorCode::Sso(Refusal::EmailNotVerified)
    );
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
    let alice_sso = Answer::from(callback(&app, &back, Some(&cookie)).await)
        .expect(StatusCode::OK)
        .data::<Session>()
        .access_token;

    // The owner keeps password access as an armed break-glass account.
    let until = (chrono::Utc::now() + chrono::Duration::days(1)).to_rfc3339();
    app.by(&owner)
        .step_up(app.step_up("owner", 0))
        .put(format!("/api/organization/{acme}/sso/break-glass/owner"))
        .json(json!({"until": until, "reason": "the identity provider may fail"}))
        .await
        .expect(StatusCode::OK);
    app.by(&owner)
        .post(format!("/api/organization/{acme}/members"))
        .json(json!({"userId": "bob", "role": "member"}))
        .await
        .expect(StatusCode::CREATED);
    let bob = app.token("bob", "bob@example.com");
    let require = |grace: u32| {
        let app = &app;
        let owner = owner.clone();
        let acme = acme.clone();
        async move {
            app.by(&owner)
                .step_up(app.step_up("owner", 0))
                .put(format!("/api/organization/{acme}/sso"))
                .json(json!({"required": true, "graceHours": grace}))
                .await
        }
    };
    // With a grace period, nothing is refused yet.
    let Answer(status, body) = require(24).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let Answer(status, body) = app
        .by(&bob)
        .get(format!("/api/organization/{acme}/members"))
        .await;
    assert_eq!(status, StatusCode::OK, "during the grace: {body}");
    let enforcement: Enforcement = require(0).await.expect(StatusCode::OK).data();
    assert!(enforcement.required);

    // A member signed in otherwise is refused, naming how to sign in.
    let Answer(status, body) = app
        .by(&bob)
        .get(format!("/api/organization/{acme}/members"))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(code(status, &body), ErrorCode::SsoRequired);
    assert!(body["message"]
        .as_str()
        .unwrap()
        .contains("/api/auth/sso/start?org=acme"));
    // The SSO session and the break-glass owner pass.
    for token in [&alice_sso, &owner] {
        app.by(token)
            .get(format!("/api/organization/{acme}/members"))
            .await
            .expect(StatusCode::OK);
    }
    // Service tokens are not affected.
    let service = app.service_token("plugin");
    app.by(&service)
        .org(&acme)
        .post("/api/compliance/validate/plugin/dry-run")
        .json(json!({"attributes": {"version": "1.0.0"}}))
        .await
        .expect(StatusCode::OK);
    // Disarmed, the owner is refused too (every replica follows within a second).
    app.by(&owner)
        .delete(format!("/api/organization/{acme}/sso/break-glass/owner"))
        .await
        .expect(StatusCode::OK);
    let Answer(status, body) = app
        .by(&owner)
        .get(format!("/api/organization/{acme}/members"))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(code(status, &body), ErrorCode::SsoRequired);
    app.stop().await;
}

async fn configurations_are_bounded_and_gated(base: &TestApp) {
    let provider = provider(&[]).await;
    let (app, records) = sso_app(base).await;
    let (acme, owner, first) = configured(&app, &records, &provider.issuer, false).await;
    let path = format!("/api/organization/{acme}/idp");
    for n in 2..=5 {
        app
            .by(&owner).post(&path).json(json!({"name": format!("idp-{n}"), "issuer": provider.issuer, "clientId": "c", "clientSecret": "s"}))
            .await.expect(StatusCode::CREATED);
    }
    app
        .by(&owner).post(&path).json(json!({"name": "sixth", "issuer": provider.issuer, "clientId": "c", "clientSecret": "s"}))
        .await.expect(StatusCode::CONFLICT);
    // An issuer whose document names another (a templated or wrong one): 400.
    let Answer(status, body) = app
        .by(&owner).put(format!("{path}/{first}")).json(json!({"name": "corp", "issuer": format!("{}/", provider.issuer), "clientId": "c", "version": 1}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["details"]["field"], "issuer");
    // Super-admins manage them under /api/admin (stepped up), audited as theirs.
    let root = app.super_token().await;
    let admin_path = format!("/api/admin/organizations/{acme}/idp");
    let answer = app.by(&root).get(&admin_path).await.expect(StatusCode::OK);
    assert_eq!(answer.data::<Vec<IdentityProvider>>().len(), 5);
    assert!(!answer.body().to_string().contains("s3cret-of-the-client"));
    app.by(&root)
        .step_up(app.step_up("root", 0))
        .delete(format!("{admin_path}/{first}"))
        .await
        .expect(StatusCode::OK);
    let Answer(status, body) = app
        .by(&root).post(&admin_path).json(json!({"name": "by-root", "issuer": provider.issuer, "clientId": "c", "clientSecret": "s"}))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "step-up is required: {body}");
    app
        .by(&root).step_up(app.step_up("root", 0)).post(&admin_path).json(json!({"name": "by-root", "issuer": provider.issuer, "clientId": "c", "clientSecret": "s"}))
        .await.expect(StatusCode::CREATED);
    for action in [
        "admin.org-idp.upsert",
        "admin.org-idp.delete",
        "org.idp.upsert",
    ] {
        let events = app.audited(action).await;
        assert!(
            events.iter().any(|e| e.org_id == acme),
            "{action} in acme's chain"
        );
    }
    // A public mail domain cannot be claimed.
    app.by(&owner)
        .post(format!("/api/organization/{acme}/domains"))
        .json(json!({"domain": "gmail.com"}))
        .await
        .expect(StatusCode::BAD_REQUEST);
    // Without the feature (a Developer organization): 403, and a downgrade keeps
    // the configurations, inactive.
    let globex = app.org("gina", "globex").await;
    let gina = app.token("gina", "gina@example.com");
    let Answer(status, body) = app
        .by(&gina)
        .post(format!("/api/organization/{globex}/idp"))
        .json(json!({"name": "x", "issuer": provider.issuer, "clientId": "c", "clientSecret": "s"}))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(code(status, &body), ErrorCode::FeatureNotAvailable);
    let root = app.super_token().await;
    app.by(&root)
        .step_up(app.step_up("root", 0))
        .patch(format!("/api/organization/{acme}/tier"))
        .json(json!({"tier": "developer"}))
        .await
        .expect(StatusCode::OK);
    let listed: Vec<IdentityProvider> = app
        .by(&owner)
        .get(&path)
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(listed.len(), 5);
    assert!(listed.iter().all(|c| !c.active && c.enabled));
    app.stop().await;
}

// --- The suite's own provider (Authlib): PKCE required, every fault, rotation ------

/// `tests/sso_provider.py` on loopback, stopped when dropped.
struct OwnProvider {
    child: Child,
    issuer: String,
    client: reqwest::Client,
}

impl Drop for OwnProvider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const OWN_SECRET: &str = "authlib-client-secret";

async fn own_provider() -> OwnProvider {
    let port = super::crash::free_port();
    // The virtual environment's Python, beside the oidc-provider-mock it holds.
    let mock =
        std::env::var("OIDC_PROVIDER_MOCK").unwrap_or_else(|_| "oidc-provider-mock".to_owned());
    let python = std::path::Path::new(&mock)
        .parent()
        .map(|bin| bin.join("python"))
        .filter(|p| p.exists())
        .unwrap_or_else(|| "python3".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sso_provider.py");
    let provider = OwnProvider {
        child: Command::new(python)
            .args([script, &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the suite's provider needs Flask and Authlib: scripts/test installs them"),
        issuer: format!("http://127.0.0.1:{port}"),
        client: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap(),
    };
    for _ in 0..300 {
        let up = provider
            .client
            .get(format!(
                "{}/.well-known/openid-configuration",
                provider.issuer
            ))
            .send()
            .await;
        if up.is_ok_and(|r| r.status() == 200) {
            return provider;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the suite's provider did not start");
}

impl OwnProvider {
    async fn control(&self, what: &str, body: Value) {
        let answer = self
            .client
            .post(format!("{}/control/{what}", self.issuer))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(answer.status().is_success());
    }

    async fn jwks_fetches(&self) -> i64 {
        let counts: Value = self
            .client
            .get(format!("{}/control/counts", self.issuer))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        counts["jwks"].as_i64().unwrap()
    }

    /// A whole sign-in: start, the provider's redirect back, the callback.
    async fn sign_in(&self, app: &TestApp, query: &str) -> (StatusCode, Value) {
        let (location, cookie) = start(app, query).await;
        let answer = self.client.get(&location).send().await.unwrap();
        assert_eq!(
            answer.status(),
            302,
            "{}",
            answer.text().await.unwrap_or_default()
        );
        let back = answer.headers()["location"].to_str().unwrap();
        let path = back.strip_prefix(PUBLIC_URL).unwrap().to_owned();
        callback(app, &path, Some(&cookie)).await
    }
}

/// acme configured (as [`configured`]) for the suite's own provider, with its client
/// secret and `mappings`; the organization and the owner's token.
async fn configured_for_own(
    app: &TestApp,
    records: &adapters::outbound::dns::StaticRecords,
    issuer: &str,
    mappings: Value,
) -> (String, String) {
    let (acme, owner, config) = configured(app, records, issuer, true).await;
    app
        .by(&owner).put(format!("/api/organization/{acme}/idp/{config}")).json(json!({"name": "corp", "issuer": issuer, "clientId": "platform",
                        "clientSecret": OWN_SECRET, "domains": ["acme-sso.test"], "jitProvisioning": true,
                        "roleMappings": mappings, "version": 1}))
        .await.expect(StatusCode::OK);
    (acme, owner)
}

async fn accounts_with(app: &TestApp, email: &str) -> i64 {
    sqlx::query_scalar(&format!(
        "SELECT COUNT(*) FROM accounts WHERE email = '{email}'"
    ))
    .fetch_one(adapters::storage::pool_for_tests(&app.store))
    .await
    .unwrap()
}

async fn every_fault_is_refused_and_a_rotation_followed(base: &TestApp) {
    let provider = own_provider().await;
    let (app, records) = sso_app_with(base, &[("SSO_JWKS_MIN_REFRESH_SECONDS", "1")]).await;
    let (acme, owner) = configured_for_own(
        &app,
        &records,
        &provider.issuer,
        json!([{"group": "auditors", "role": "Compliance Viewer"}, {"group": "admins", "role": "Admin"}]),
    )
    .await;
    provider
        .control("user", json!({"sub": "dora-1", "email": "dora@acme-sso.test", "email_verified": true, "groups": ["auditors"]}))
        .await;
    for (fault, refusal) in [
        ("issuer", Refusal::IssuerMismatch),
        ("audience", Refusal::AudienceMismatch),
        ("azp", Refusal::AudienceMismatch),
        ("expired", Refusal::TokenExpired),
        ("future", Refusal::TokenExpired),
        ("nonce", Refusal::NonceMismatch),
        ("alg-none", Refusal::TokenInvalid),
        ("alg-hs256", Refusal::TokenInvalid),
        ("unknown-kid", Refusal::TokenInvalid),
    ] {
        provider.control("fault", json!({"fault": fault})).await;
        let (status, body) = provider.sign_in(&app, "org=acme").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{fault}: {body}");
        assert_eq!(
            code(status, &body),
            ErrorCode::Sso(refusal),
            "{fault}: {body}"
        );
        assert_eq!(
            accounts_with(&app, "dora@acme-sso.test").await,
            0,
            "{fault} created an account"
        );
    }
    let failed = app.audited("user.login.failed").await;
    for reason in [
        "sso issuer mismatch",
        "sso nonce mismatch",
        "sso id token expired",
    ] {
        assert!(
            failed
                .iter()
                .any(|e| e.details.to_string().contains(reason)),
            "{reason}"
        );
    }
    provider.control("fault", json!({"fault": "none"})).await;
    let dora = Answer::from(provider.sign_in(&app, "org=acme").await)
        .expect(StatusCode::OK)
        .data::<Session>()
        .access_token;
    let members_path = format!("/api/organization/{acme}/members");
    let role_of_dora = || async {
        let members: Vec<Member> = app.by(&owner).get(&members_path).await.items("members");
        members
            .into_iter()
            .find(|m| m.email.as_deref() == Some("dora@acme-sso.test"))
            .map(|m| m.role)
    };
    assert_eq!(role_of_dora().await, Some(MembershipRole::Member));

    // The mappings apply again at the next sign-in: now an admin.
    provider
        .control("user", json!({"sub": "dora-1", "email": "dora@acme-sso.test", "email_verified": true, "groups": ["admins"]}))
        .await;
    // The provider rotates its key: the new one is fetched (after the minimum wait).
    provider.control("rotate", json!({})).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let before = provider.jwks_fetches().await;
    let (status, body) = provider.sign_in(&app, "org=acme").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(provider.jwks_fetches().await, before + 1);
    assert_eq!(role_of_dora().await, Some(MembershipRole::Admin));
    let _ = dora;

    // A domain another organization verified is never this one's.
    let globex = app.org("gina", "globex").await;
    enterprise(&app, &globex).await;
    let gina = app.token("gina", "gina@example.com");
    let claimed: Domain = app
        .by(&gina)
        .post(format!("/api/organization/{globex}/domains"))
        .json(json!({"domain": "globex-sso.test"}))
        .await
        .data();
    records.publish(&claimed.record_name, &claimed.record_value);
    app.by(&gina)
        .post(format!(
            "/api/organization/{globex}/domains/globex-sso.test/verify"
        ))
        .await
        .expect(StatusCode::OK);
    // acme cannot verify it too.
    let claimed: Domain = app
        .by(&owner)
        .post(format!("/api/organization/{acme}/domains"))
        .json(json!({"domain": "globex-sso.test"}))
        .await
        .data();
    records.publish(&claimed.record_name, &claimed.record_value);
    app.by(&owner)
        .post(format!(
            "/api/organization/{acme}/domains/globex-sso.test/verify"
        ))
        .await
        .expect(StatusCode::CONFLICT);
    provider
        .control(
            "user",
            json!({"sub": "eve-1", "email": "eve@globex-sso.test", "email_verified": true}),
        )
        .await;
    let (status, body) = provider.sign_in(&app, "org=acme").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(
        code(status, &body),
        ErrorCode::Sso(Refusal::DomainOfAnotherOrganization)
    );
    assert_eq!(accounts_with(&app, "eve@globex-sso.test").await, 0);
    app.stop().await;
}

async fn an_unknown_key_refetches_at_most_once_a_minute(base: &TestApp) {
    let provider = own_provider().await;
    let (app, records) = sso_app(base).await;
    let _ = configured_for_own(&app, &records, &provider.issuer, json!([])).await;
    provider
        .control("fault", json!({"fault": "unknown-kid"}))
        .await;
    let (status, _) = provider.sign_in(&app, "org=acme").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let after_first = provider.jwks_fetches().await;
    for _ in 0..3 {
        let (status, body) = provider.sign_in(&app, "org=acme").await;
        assert_eq!(
            code(status, &body),
            ErrorCode::Sso(Refusal::TokenInvalid),
            "{status} {body}"
        );
    }
    assert_eq!(
        provider.jwks_fetches().await,
        after_first,
        "a flood of unknown keys fetches the key set at most once a minute"
    );
    app.stop().await;
}

async fn an_account_is_linked_only_after_its_password(base: &TestApp) {
    let provider = own_provider().await;
    let (app, records) = sso_app(base).await;
    let (acme, owner) = configured_for_own(&app, &records, &provider.issuer, json!([])).await;
    let carol_id = app
        .register("carol@acme-sso.test", "a long enough password 1")
        .await
        .user_id;
    provider
        .control(
            "user",
            json!({"sub": "carol-1", "email": "carol@acme-sso.test", "email_verified": true}),
        )
        .await;
    let (status, body) = provider.sign_in(&app, "email=carol@acme-sso.test").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(code(status, &body), ErrorCode::Sso(Refusal::LinkRequired));
    let link = body["details"]["linkToken"].as_str().unwrap().to_owned();
    // No silent takeover: nothing linked, no membership.
    let linked: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sso_identities")
        .fetch_one(adapters::storage::pool_for_tests(&app.store))
        .await
        .unwrap();
    assert_eq!(linked, 0);
    let Answer(status, body) = app
        .by("")
        .post("/api/auth/sso/link")
        .json(json!({"linkToken": link, "password": "not the password at all"}))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(code(status, &body), ErrorCode::InvalidCredentials);
    app.by("")
        .post("/api/auth/sso/link")
        .json(json!({"linkToken": link, "password": "a long enough password 1"}))
        .await
        .expect(StatusCode::OK);
    // Used once.
    app.by("")
        .post("/api/auth/sso/link")
        .json(json!({"linkToken": link, "password": "a long enough password 1"}))
        .await
        .expect(StatusCode::UNAUTHORIZED);
    // The next sign-in goes straight through, as the same account.
    let token = Answer::from(provider.sign_in(&app, "org=acme").await)
        .expect(StatusCode::OK)
        .data::<Session>()
        .access_token;
    let me: Me = app.by(&token).get("/api/me").await.data();
    assert_eq!(me.account.user_id, carol_id);

    // Carol becomes the Owner: her next sign-in (mapped to another Role) leaves it.
    app.by(&owner)
        .step_up(app.step_up("owner", 0))
        .patch(format!("/api/organization/{acme}/transfer-owner"))
        .json(json!({"userId": carol_id}))
        .await
        .expect(StatusCode::OK);
    let token = Answer::from(provider.sign_in(&app, "org=acme").await)
        .expect(StatusCode::OK)
        .data::<Session>()
        .access_token;
    let org: Organization = app
        .by(&token)
        .get(format!("/api/organization/{acme}"))
        .await
        .data();
    assert_eq!(org.owner_id, carol_id);
    let role: String = sqlx::query_scalar(&format!(
        "SELECT role FROM memberships WHERE org_id = '{acme}' AND user_id = '{carol_id}'"
    ))
    .fetch_one(adapters::storage::pool_for_tests(&app.store))
    .await
    .unwrap();
    assert_eq!(role, "owner");

    // A personal access token made in the SSO session passes enforcement; one made
    // in a password session does not.
    let issuing = &app;
    let pat = |access: String, name: &'static str| async move {
        let created: PersonalToken = issuing
            .by(&access)
            .post("/api/me/tokens")
            .json(json!({"name": name, "expiresAt": (chrono::Utc::now() + chrono::Duration::days(7)).to_rfc3339()}))
            .await
            .expect(StatusCode::CREATED)
            .data();
        created.token.expect("the secret, this once")
    };
    let sso_pat = pat(token.clone(), "ci").await;
    let password_access = app
        .login("carol@acme-sso.test", "a long enough password 1")
        .await
        .access_token;
    let password_pat = pat(password_access.clone(), "laptop").await;
    app.by(&owner)
        .step_up(app.step_up("owner", 0))
        .put(format!("/api/organization/{acme}/sso"))
        .json(json!({"required": true}))
        .await
        .expect(StatusCode::OK);
    let members = format!("/api/organization/{acme}/members");
    for (token, expected) in [
        (&sso_pat, StatusCode::OK),
        (&token, StatusCode::OK),
        (&password_pat, StatusCode::FORBIDDEN),
        (&password_access, StatusCode::FORBIDDEN),
    ] {
        let Answer(status, body) = app.by(token).get(&members).await;
        assert_eq!(status, expected, "{body}");
    }
    app.stop().await;
}

crate::on_both_backends!(
    provisioning_signs_a_person_in_once,
    enforcement_refuses_other_credentials,
    configurations_are_bounded_and_gated,
    every_fault_is_refused_and_a_rotation_followed,
    an_unknown_key_refetches_at_most_once_a_minute,
    an_account_is_linked_only_after_its_password,
    the_console_signs_in_through_the_provider,
);

// --- Two replicas, and the console in a real browser --------------------------------

/// A configuration saved through one server process is used by another: a sign-in
/// started on A finishes on B, and enforcement set on A is followed by B within a
/// second (its kept policy dropped by the change's own notification).
#[tokio::test]
async fn a_configuration_saved_on_one_replica_is_used_by_another() {
    let Some((url, admin_url, name)) = crate::fresh_postgres().await else {
        return;
    };
    let provider = own_provider().await;
    let ports = super::crash::two_free_ports();
    let [a, b] = ports.map(|port| format!("http://127.0.0.1:{port}"));
    let public = b.clone();
    let vars = [
        ("SSO_ALLOW_LOOPBACK_HTTP", "true"),
        ("FEATURES_FOR_ALL_TIERS", "sso"),
        ("PUBLIC_URL", public.as_str()),
    ];
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let mut servers = Vec::new();
    for port in ports {
        servers.push(super::crash::start_with(&url, port, &vars));
        super::crash::wait_healthy(&client, &format!("http://127.0.0.1:{port}")).await;
    }
    let alice = super::crash::user_token("alice");
    let org = super::crash::create_org(&client, &a, &alice, "replicated").await;
    let config: Value = client
        .post(format!("{a}/api/organization/{org}/idp"))
        .bearer_auth(&alice)
        .json(&json!({"name": "corp", "issuer": provider.issuer, "clientId": "platform",
                      "clientSecret": OWN_SECRET, "domains": ["replicated.test"], "jitProvisioning": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let config: IdentityProvider = Answer::from((StatusCode::OK, config)).data();
    assert!(config.active, "{config:?}");
    // The domain's proof is DNS's: recorded as verified here.
    let store = adapters::storage::Store::connect(&url).await.unwrap();
    sqlx::query(&format!(
        "INSERT INTO org_domains (org_id, domain, token, created_at, verified_at) \
         VALUES ('{org}', 'replicated.test', 't', '2026-11-28T00:00:00Z', '2026-11-28T00:00:00Z')"
    ))
    .execute(adapters::storage::pool_for_tests(&store))
    .await
    .unwrap();
    provider
        .control(
            "user",
            json!({"sub": "rita-1", "email": "rita@replicated.test", "email_verified": true}),
        )
        .await;
    // Started on A ...
    let started = client
        .get(format!("{a}/api/auth/sso/start?org=replicated"))
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), 302);
    let cookie = started.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let location = started.headers()["location"].to_str().unwrap().to_owned();
    let back = client.get(&location).send().await.unwrap();
    let back = back.headers()["location"].to_str().unwrap().to_owned();
    assert!(back.starts_with(&b), "{back}");
    // ... finished on B.
    let finished = client
        .get(&back)
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(
        finished.status(),
        200,
        "{}",
        finished.text().await.unwrap_or_default()
    );
    let session: Value = finished.json().await.unwrap();
    let rita = Answer::from((StatusCode::OK, session))
        .data::<Session>()
        .access_token;

    // B keeps the policy (off) for a member's password token ...
    let members = format!("{b}/api/organization/{org}/members");
    let status_on_b = |token: String| {
        let client = client.clone();
        let members = members.clone();
        async move {
            client
                .get(&members)
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(status_on_b(alice.clone()).await, 200);
    // ... enforcement is set on A ...
    let mut step =
        adapters::auth::Claims::user("alice", None, chrono::Utc::now(), Duration::from_secs(600));
    step.step_up = true;
    let step = adapters::auth::TokenKeys::hs256(crate::SECRET)
        .sign(&step)
        .unwrap();
    let set = client
        .put(format!("{a}/api/organization/{org}/sso"))
        .bearer_auth(&alice)
        .header("x-step-up-token", step)
        .json(&json!({"required": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        set.status(),
        200,
        "{}",
        set.text().await.unwrap_or_default()
    );
    let changed = std::time::Instant::now();
    // ... and B refuses the password token within a second, the SSO session not.
    let mut refused_after = None;
    while changed.elapsed() < Duration::from_secs(1) {
        if status_on_b(alice.clone()).await == 403 {
            refused_after = Some(changed.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        refused_after.is_some(),
        "B still admits a password token a second after A required SSO"
    );
    assert_eq!(status_on_b(rita).await, 200);
    for server in &servers {
        super::crash::terminate(server);
    }
    for mut server in servers {
        let _ = server.wait();
    }
    store.close().await;
    crate::drop_postgres(&admin_url, &name).await;
}

/// The console's sign-in page offers single sign-on; the whole flow in chromium
/// through oidc-provider-mock's own authorization form.
async fn the_console_signs_in_through_the_provider(base: &TestApp) {
    let provider = provider(&[
        json!({"sub": "nina-at-idp", "email": "nina@acme-sso.test", "email_verified": true}),
    ])
    .await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let console = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let app = base
        .beside(&[
            ("SSO_ALLOW_LOOPBACK_HTTP", "true"),
            ("PUBLIC_URL", console.as_str()),
        ])
        .await;
    let records = adapters::outbound::dns::StaticRecords::default();
    app.state.outbound.sso.set_txt(Arc::new(records.clone()));
    let _ = configured(&app, &records, &provider.issuer, true).await;
    let router = app.router.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    let b = super::console::browser().await;
    b.open(&format!("{console}/console/login")).await;
    b.type_into("#sso-org", "acme").await;
    b.click("#sso-sign-in").await;
    // The provider's own form: the person picks who they are.
    let mut at_provider = false;
    for _ in 0..200 {
        let url = b.client.current_url().await.unwrap();
        if url.as_str().starts_with(&provider.issuer) {
            at_provider = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(at_provider, "the browser did not reach the provider");
    b.type_into("input[name=sub]", "nina-at-idp").await;
    b.click("form button[type=submit]").await;
    assert!(
        b.lands_on("/console/posture").await,
        "the console was not reached: {}",
        b.text("main").await
    );
    let page = b.text("header").await;
    assert!(page.contains("nina@acme-sso.test"), "{page}");
    b.shot("sso-signed-in").await;
    app.stop().await;
}

/// What a sign-in costs on the server (run by hand: `cargo test -p adapters --test it
/// sso::what_a_sign_in_costs -- --ignored --nocapture`): medians of the start and of
/// the callback (which includes the code exchange with the provider on loopback),
/// beside `/health` through the same router.
#[tokio::test]
#[ignore = "a measurement, run by hand"]
async fn what_a_sign_in_costs() {
    let base = TestApp::sqlite().await;
    let provider = own_provider().await;
    let (app, records) = sso_app(&base).await;
    let _ = configured_for_own(&app, &records, &provider.issuer, json!([])).await;
    provider
        .control("user", json!({"sub": "m-1", "email": "m@acme-sso.test", "email_verified": true, "groups": ["auditors"]}))
        .await;
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let (mut starts, mut callbacks, mut health) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..60 {
        let t = std::time::Instant::now();
        let (location, cookie) = start(&app, "org=acme").await;
        starts.push(t.elapsed());
        let answer = provider.client.get(&location).send().await.unwrap();
        let back = answer.headers()["location"].to_str().unwrap();
        let path = back.strip_prefix(PUBLIC_URL).unwrap().to_owned();
        let t = std::time::Instant::now();
        let (status, _) = callback(&app, &path, Some(&cookie)).await;
        callbacks.push(t.elapsed());
        assert_eq!(status, StatusCode::OK);
        let t = std::time::Instant::now();
        raw(&app, Request::get("/health").body(Body::empty()).unwrap()).await;
        health.push(t.elapsed());
    }
    let exchange_started = std::time::Instant::now();
    let _ = provider.jwks_fetches().await;
    let provider_round_trip = exchange_started.elapsed();
    println!(
        "start {:?}, callback {:?} (one plain request to the provider on loopback: {:?}), /health {:?}",
        median(starts),
        median(callbacks),
        provider_round_trip,
        median(health)
    );
    app.stop().await;
    base.finish().await;
}
