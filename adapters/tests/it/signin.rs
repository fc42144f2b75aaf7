//! Sign-in: accounts, sessions that rotate, personal access tokens, revocation and
//! step-up, on both backends.

use crate::api::Answer;
use adapters::code::ErrorCode;
use adapters::http::wire::{
    Account, Deleted, Me, PersonalToken, Session, SignedOut, StepUpProof, Tokens, TotpEnrollment,
};
use std::time::{Duration, Instant};

use sqlx::Row;

use super::*;

pub(crate) const PASSWORD: &str = "correct horse battery";

/// A public call (the routes take no token).
pub(crate) async fn public(app: &TestApp, path: &str, body: Value) -> Answer {
    app.public().post(path).json(body).await
}

/// One text from the test database.
pub(crate) async fn text(app: &TestApp, query: &str) -> Option<String> {
    sqlx::query(query)
        .fetch_optional(adapters::storage::pool_for_tests(&app.store))
        .await
        .unwrap()
        .map(|row| {
            row.try_get::<Option<String>, _>(0)
                .unwrap()
                .unwrap_or_default()
        })
}

/// One number from the test database.
pub(crate) async fn number(app: &TestApp, query: &str) -> i64 {
    sqlx::query(query)
        .fetch_one(adapters::storage::pool_for_tests(&app.store))
        .await
        .unwrap()
        .try_get::<i64, _>(0)
        .unwrap()
}

pub(crate) async fn register(app: &TestApp, email: &str) -> String {
    let account: Account = public(
        app,
        "/api/auth/register",
        json!({"email": email, "password": PASSWORD, "name": "Ada"}),
    )
    .await
    .expect(StatusCode::CREATED)
    .data();
    assert!(!account.email_verified);
    assert_eq!(account.name.as_deref(), Some("Ada"));
    account.user_id
}

/// The token of the latest verification link mailed to `email` (read from the
/// outgoing mail, as the receiver would).
pub(crate) async fn link_token(app: &TestApp, email: &str) -> String {
    let body = text(
        app,
        &format!(
            "SELECT body FROM account_mail WHERE recipient = '{email}' ORDER BY created_at DESC LIMIT 1"
        ),
    )
    .await
    .expect("no mail to the address");
    token_in(&body)
}

pub(crate) fn token_in(mail: &str) -> String {
    let start = mail.find("token=").expect("no link in the mail") + "token=".len();
    mail[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .collect()
}

pub(crate) async fn verify(app: &TestApp, email: &str) {
    let token = link_token(app, email).await;
    let account: Account = public(app, "/api/auth/verify-email", json!({"token": token}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert!(account.email_verified);
}

pub(crate) async fn login_as(app: &TestApp, email: &str, password: &str) -> Answer {
    public(
        app,
        "/api/auth/login",
        json!({"identifier": email, "password": password}),
    )
    .await
}

/// A signed-in session: (access token, refresh token).
pub(crate) async fn session(app: &TestApp, email: &str) -> (String, String) {
    let session = app.login(email, PASSWORD).await;
    assert_eq!(session.token_type, "Bearer");
    assert_eq!(session.expires_in, 7200);
    (session.access_token, session.refresh_token)
}

pub(crate) async fn refresh(app: &TestApp, token: &str) -> Answer {
    public(app, "/api/auth/refresh", json!({"refreshToken": token})).await
}

pub(crate) async fn me_status(app: &TestApp, access: &str) -> StatusCode {
    app.by(access).get("/api/me").await.0
}

async fn a_person_registers_verifies_signs_in_refreshes_and_signs_out(app: &TestApp) {
    let strict = app.beside(&[("EMAIL_VERIFICATION_REQUIRED", "true")]).await;
    let user = register(&strict, "Ada@Example.com").await;
    // The address is taken, whatever its case.
    let Answer(status, body) = public(
        &strict,
        "/api/auth/register",
        json!({"email": "ada@example.com", "password": PASSWORD}),
    )
    .await;
    assert_eq!(code(status, &body), ErrorCode::Conflict);
    // Not verified yet: the right password is told so, a wrong one is not.
    let Answer(status, body) = login_as(&strict, "ada@example.com", PASSWORD).await;
    assert_eq!(code(status, &body), ErrorCode::EmailNotVerified);
    let Answer(status, body) = login_as(&strict, "ada@example.com", "wrong password!").await;
    assert_eq!(code(status, &body), ErrorCode::InvalidCredentials);
    let link = link_token(&strict, "ada@example.com").await;
    assert!(link.starts_with("cev_"));
    verify(&strict, "ada@example.com").await;
    // A link works once.
    let Answer(status, body) =
        public(&strict, "/api/auth/verify-email", json!({"token": link})).await;
    assert_eq!(code(status, &body), ErrorCode::Unauthorized);

    let (access, first) = session(&strict, "ADA@example.com ").await;
    let me: Account = strict
        .by(&access)
        .get("/api/me")
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(me.user_id, user);
    assert_eq!(me.email, "ada@example.com");
    assert_eq!(me.name.as_deref(), Some("Ada"));
    // The access token is the API's: an organization is created with it.
    strict
        .by(&access)
        .post("/api/organization")
        .json(json!({"name": "adas-org"}))
        .await
        .expect(StatusCode::CREATED);

    // Refresh rotates: a new pair, the old refresh token used up.
    let Session {
        refresh_token: second,
        access_token: renewed,
        ..
    } = refresh(&strict, &first).await.expect(StatusCode::OK).data();
    assert_ne!(second, first);
    assert_eq!(me_status(&strict, &renewed).await, StatusCode::OK);
    assert_eq!(me_status(&strict, &access).await, StatusCode::OK);
    // Within the grace window a second use loses and ends nothing.
    let Answer(status, body) = refresh(&strict, &first).await;
    assert_eq!(code(status, &body), ErrorCode::Unauthorized);
    assert!(
        body["message"].as_str().unwrap().contains("just used"),
        "{body}"
    );
    let third = refresh(&strict, &second)
        .await
        .expect(StatusCode::OK)
        .data::<Session>()
        .refresh_token;
    // Beyond it, a used token is a stolen one: the whole session ends.
    let long_ago = (Utc::now() - chrono::Duration::minutes(5))
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    strict
        .sql(&format!(
            "UPDATE refresh_tokens SET used_at = '{long_ago}' WHERE used_at IS NOT NULL"
        ))
        .await;
    let Answer(status, body) = refresh(&strict, &first).await;
    assert_eq!(code(status, &body), ErrorCode::Unauthorized);
    assert!(
        body["message"].as_str().unwrap().contains("used before"),
        "{body}"
    );
    let Answer(status, body) = refresh(&strict, &third).await;
    assert_eq!(
        code(status, &body),
        ErrorCode::Unauthorized,
        "the family ended"
    );
    assert_eq!(me_status(&strict, &renewed).await, StatusCode::UNAUTHORIZED);
    assert_eq!(me_status(&strict, &access).await, StatusCode::UNAUTHORIZED);

    // A new sign-in, then sign-out: its tokens stop at once; twice is fine.
    let (access, refresh_token) = session(&strict, "ada@example.com").await;
    assert_eq!(me_status(&strict, &access).await, StatusCode::OK);
    let out: SignedOut = public(
        &strict,
        "/api/auth/logout",
        json!({"refreshToken": refresh_token}),
    )
    .await
    .expect(StatusCode::OK)
    .data();
    assert!(out.signed_out);
    assert_eq!(me_status(&strict, &access).await, StatusCode::UNAUTHORIZED);
    let Answer(status, body) = refresh(&strict, &refresh_token).await;
    assert_eq!(code(status, &body), ErrorCode::Unauthorized);
    let Answer(status, _) = public(
        &strict,
        "/api/auth/logout",
        json!({"refreshToken": refresh_token}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);

    // The chain of accounts holds each step, and no secret.
    for action in [
        "user.register",
        "user.email.verified",
        "user.login",
        "user.login.failed",
        "user.logout",
    ] {
        let events = strict.audited(action).await;
        assert!(!events.is_empty(), "{action} not audited");
        assert!(events.iter().all(|e| e.org_id == "accounts"));
    }
    let everything = format!("{:?}", strict.audited("user.login.failed").await)
        + &format!("{:?}", strict.audited("user.login").await)
        + &format!("{:?}", strict.audited("user.register").await);
    for secret in [PASSWORD, "wrong password!", &link, &first, "$argon2id$"] {
        assert!(
            !everything.contains(secret),
            "the audit trail holds a secret"
        );
    }
    // Stored secrets are hashes.
    let stored = text(
        &strict,
        "SELECT password_hash FROM accounts WHERE email = 'ada@example.com'",
    )
    .await
    .unwrap();
    assert!(
        stored.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
        "{stored}"
    );
    assert_eq!(
        number(
            &strict,
            &format!("SELECT COUNT(*) FROM refresh_tokens WHERE token_hash = '{first}'")
        )
        .await,
        0
    );
    strict.stop().await;
}

async fn bad_input_is_refused_and_changes_nothing(app: &TestApp) {
    let cases = [
        (
            "/api/auth/register",
            json!({"email": "not-an-address", "password": PASSWORD}),
            "email",
        ),
        (
            "/api/auth/register",
            json!({"email": "a@example.com", "password": "short"}),
            "password",
        ),
        (
            "/api/auth/register",
            json!({"email": "a@example.com", "password": "a@example.com"}),
            "password",
        ),
        (
            "/api/auth/register",
            json!({"email": "a@example.com", "password": "x".repeat(129)}),
            "password",
        ),
        (
            "/api/auth/register",
            json!({"email": "a@example.com", "password": PASSWORD, "name": " "}),
            "name",
        ),
        (
            "/api/auth/register",
            json!({"email": "a@example.com", "password": PASSWORD, "admin": true}),
            "",
        ),
        ("/api/auth/register", json!({"email": "a@example.com"}), ""),
        (
            "/api/auth/register",
            json!({"email": "a\u{0}@example.com", "password": PASSWORD}),
            "",
        ),
        (
            "/api/auth/register",
            json!({"email": "a@example.com", "password": "tab\there is fine no"}),
            "password",
        ),
        (
            "/api/auth/login",
            json!({"identifier": "", "password": PASSWORD}),
            "identifier",
        ),
        (
            "/api/auth/login",
            json!({"identifier": "a@example.com", "password": ""}),
            "password",
        ),
        (
            "/api/auth/login",
            json!({"identifier": "a@example.com"}),
            "",
        ),
        (
            "/api/auth/login",
            json!({"identifier": "a@example.com", "password": "x".repeat(2000)}),
            "password",
        ),
        (
            "/api/auth/refresh",
            json!({"refreshToken": ""}),
            "refreshToken",
        ),
        ("/api/auth/refresh", json!({"token": "x"}), ""),
        ("/api/auth/verify-email", json!({"token": 7}), ""),
        ("/api/auth/logout", json!({}), ""),
    ];
    for (path, body, field) in cases {
        let Answer(status, answer) = public(app, path, body.clone()).await;
        assert_eq!(
            code(status, &answer),
            ErrorCode::ValidationError,
            "{path} {body}: {answer}"
        );
        if !field.is_empty() {
            assert_eq!(answer["details"]["field"], field, "{answer}");
        }
    }
    assert_eq!(number(app, "SELECT COUNT(*) FROM accounts").await, 0);
    assert_eq!(number(app, "SELECT COUNT(*) FROM signin_failures").await, 0);

    register(app, "bea@example.com").await;
    let (access, _) = session(app, "bea@example.com").await;
    let soon = (Utc::now() + chrono::Duration::days(30)).to_rfc3339();
    let past = (Utc::now() - chrono::Duration::minutes(1)).to_rfc3339();
    let far = (Utc::now() + chrono::Duration::days(400)).to_rfc3339();
    let cases = [
        (json!({"name": "ci"}), ""),
        (json!({"name": "ci", "expiresAt": "tomorrow"}), "expiresAt"),
        (json!({"name": "ci", "expiresAt": past}), "expiresAt"),
        (json!({"name": "ci", "expiresAt": far}), "expiresAt"),
        (json!({"name": "", "expiresAt": soon}), "name"),
        (
            json!({"name": "ci", "expiresAt": soon, "permissions": ["compliance:read"]}),
            "permissions",
        ),
        (
            json!({"name": "ci", "expiresAt": soon, "orgId": "x", "permissions": ["root:everything"]}),
            "permissions",
        ),
    ];
    for (body, field) in cases {
        let Answer(status, answer) = app
            .by(&access)
            .post("/api/me/tokens")
            .json(body.clone())
            .await;
        assert_eq!(
            code(status, &answer),
            ErrorCode::ValidationError,
            "{body}: {answer}"
        );
        if !field.is_empty() {
            assert_eq!(answer["details"]["field"], field, "{answer}");
        }
    }
    for body in [
        json!({"currentPassword": PASSWORD, "newPassword": "short"}),
        json!({"currentPassword": "", "newPassword": "long enough now"}),
        json!({"newPassword": "long enough now"}),
    ] {
        let Answer(status, answer) = app
            .by(&access)
            .put("/api/me/password")
            .json(body.clone())
            .await;
        assert_eq!(
            code(status, &answer),
            ErrorCode::ValidationError,
            "{body}: {answer}"
        );
    }
    app.by(&access)
        .post("/api/auth/step-up")
        .json(json!({}))
        .await
        .refused(ErrorCode::ValidationError);
    app.by(&access)
        .post("/api/auth/step-up")
        .json(json!({"totp": "123456"}))
        .await
        .refused(ErrorCode::ValidationError);
    app.by(&access)
        .put("/api/me")
        .json(json!({"email": "nope"}))
        .await
        .refused(ErrorCode::ValidationError);
    assert_eq!(number(app, "SELECT COUNT(*) FROM personal_tokens").await, 0);
    assert_eq!(number(app, "SELECT COUNT(*) FROM accounts").await, 1);
}

async fn a_wrong_password_and_an_unknown_account_answer_alike(app: &TestApp) {
    register(app, "cy@example.com").await;
    let mut known = Vec::new();
    let mut unknown = Vec::new();
    for i in 0..8 {
        // No throttle in between: each try starts clean.
        app.sql("DELETE FROM signin_failures").await;
        let started = Instant::now();
        let Answer(status, wrong) = login_as(app, "cy@example.com", "not the password").await;
        known.push(started.elapsed());
        assert_eq!(code(status, &wrong), ErrorCode::InvalidCredentials);
        let started = Instant::now();
        let Answer(status, absent) =
            login_as(app, &format!("nobody{i}@example.com"), "not the password").await;
        unknown.push(started.elapsed());
        assert_eq!(code(status, &absent), ErrorCode::InvalidCredentials);
        assert_eq!(wrong["message"], absent["message"]);
        assert_eq!(wrong.get("details"), absent.get("details"));
    }
    known.sort();
    unknown.sort();
    let (k, u) = (known[known.len() / 2], unknown[unknown.len() / 2]);
    eprintln!("median refusal: wrong password {k:?}, unknown account {u:?}");
    // Both check a hash: within a small factor of each other (a skipped hash would
    // be a hundredfold).
    let ratio = k.as_secs_f64() / u.as_secs_f64();
    assert!(
        (0.33..3.0).contains(&ratio),
        "wrong password {k:?} vs unknown {u:?}"
    );
}

async fn repeated_failures_are_slowed_then_refused(app: &TestApp) {
    let proxied = app.beside(&[("TRUST_PROXY_HEADERS", "true")]).await;
    register(&proxied, "dee@example.com").await;
    let from = |address: &str, email: &str, password: &str| {
        let mut request = app
            .public()
            .post("/api/auth/login")
            .json(json!({"identifier": email, "password": password}))
            .request();
        request.headers_mut().insert(
            "x-forwarded-for",
            format!("203.0.113.9, {address}").parse().unwrap(),
        );
        request
    };
    // Nine failures on record: the tenth is slowed, then the account is locked, the
    // right password included.
    let a_minute_ago = (Utc::now() - chrono::Duration::minutes(1))
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    proxied
        .sql(&format!(
            "INSERT INTO signin_failures (key, failures, first_at, last_at) VALUES ('account:dee@example.com', 9, '{a_minute_ago}', '{a_minute_ago}')"
        ))
        .await;
    let started = Instant::now();
    let (status, body) = proxied
        .send(from("198.51.100.1", "dee@example.com", "wrong"))
        .await;
    assert_eq!(code(status, &body), ErrorCode::InvalidCredentials);
    assert!(started.elapsed() >= Duration::from_secs(2), "not slowed");
    let response = proxied
        .router
        .clone()
        .oneshot(from("198.51.100.1", "dee@example.com", PASSWORD))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((800..=900).contains(&retry), "{retry}");
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        code(StatusCode::TOO_MANY_REQUESTS, &body),
        ErrorCode::TooManyAttempts
    );
    assert_eq!(body["details"]["retryAfter"], retry);
    // The client address is counted too: ten failures from one address lock it for
    // every account, and another address is heard.
    proxied
        .sql(&format!(
            "INSERT INTO signin_failures (key, failures, first_at, last_at) VALUES ('address:198.51.100.7', 10, '{a_minute_ago}', '{a_minute_ago}')"
        ))
        .await;
    register(&proxied, "eve@example.com").await;
    let (status, body) = proxied
        .send(from("198.51.100.7", "eve@example.com", PASSWORD))
        .await;
    assert_eq!(code(status, &body), ErrorCode::TooManyAttempts);
    let (status, body) = proxied
        .send(from("198.51.100.8", "eve@example.com", PASSWORD))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Failures counted per key, both keys at once.
    let (status, _) = proxied
        .send(from("198.51.100.8", "eve@example.com", "wrong"))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        number(
            &proxied,
            "SELECT failures FROM signin_failures WHERE key = 'address:198.51.100.8'"
        )
        .await,
        1
    );
    // A success clears the account's run (not the address's).
    let (status, _) = proxied
        .send(from("198.51.100.8", "eve@example.com", PASSWORD))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        number(
            &proxied,
            "SELECT COUNT(*) FROM signin_failures WHERE key = 'account:eve@example.com'"
        )
        .await,
        0
    );
    proxied.stop().await;
}

async fn sixteen_concurrent_refreshes_of_one_token(app: &TestApp) {
    let user = register(app, "fay@example.com").await;
    let (_, token) = session(app, "fay@example.com").await;
    let requests = (0..16)
        .map(|_| {
            app.public()
                .post("/api/auth/refresh")
                .json(json!({"refreshToken": token}))
                .request()
        })
        .collect();
    let answers = app.concurrently(requests).await;
    let won: Vec<Session> = answers
        .iter()
        .filter(|(s, _)| *s == StatusCode::OK)
        .map(|answer| Answer::from(answer.clone()).data())
        .collect();
    assert_eq!(won.len(), 1, "{answers:?}");
    for (status, body) in &answers {
        if *status != StatusCode::OK {
            assert_eq!(code(*status, body), ErrorCode::Unauthorized, "{body}");
        }
    }
    // The winner's session lives on: one live family, its token works.
    let next = &won[0].refresh_token;
    let Answer(status, body) = refresh(app, next).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        number(
            app,
            &format!(
                "SELECT COUNT(*) FROM refresh_families WHERE user_id = '{user}' AND revoked_at IS NULL"
            )
        )
        .await,
        1
    );
}

async fn personal_access_tokens_are_bounded_by_their_subset(app: &TestApp) {
    register(app, "gus@example.com").await;
    let (access, _) = session(app, "gus@example.com").await;
    let org = app
        .by(&access)
        .post("/api/organization")
        .json(json!({"name": "gus-org"}))
        .await
        .id();
    let other = app.org("someone", "someone-else").await;
    let soon = (Utc::now() + chrono::Duration::days(30)).to_rfc3339();
    let created: PersonalToken = app
        .by(&access).post("/api/me/tokens").json(json!({"name": "ci", "expiresAt": soon, "orgId": org, "permissions": ["compliance:read"]}))
        .await
        .expect(StatusCode::CREATED)
        .data();
    let secret = created.token.clone().expect("the secret, this once");
    let id = created.id.clone();
    assert!(
        secret.starts_with("cpat_") && secret.len() == 41,
        "{secret}"
    );
    assert!(tenancy::check_personal_token(&secret).is_ok());
    assert_eq!(created.hint, &secret[secret.len() - 4..]);
    // Stored hashed.
    assert_eq!(
        number(
            app,
            &format!("SELECT COUNT(*) FROM personal_tokens WHERE token_hash = '{secret}'")
        )
        .await,
        0
    );
    // Within its subset it reads; outside it nothing.
    app.by(&secret)
        .org(&org)
        .get("/api/compliance/rules")
        .await
        .expect(StatusCode::OK);
    app
        .by(&secret).org(&org).post("/api/compliance/rules").json(json!({"name": "r", "target": "plugin", "severity": "error", "field": "version", "operator": "neq", "value": "latest"}))
        .await.refused(ErrorCode::Forbidden);
    app.by(&secret)
        .org(&other)
        .get("/api/compliance/rules")
        .await
        .refused(ErrorCode::TenantForbidden);
    // The session itself may write.
    app
        .by(&access).org(&org).post("/api/compliance/rules").json(json!({"name": "r", "target": "plugin", "severity": "error", "field": "version", "operator": "neq", "value": "latest"}))
        .await.expect(StatusCode::CREATED);
    // A token cannot manage tokens, nor change the password.
    app.by(&secret)
        .post("/api/me/tokens")
        .json(json!({"name": "x", "expiresAt": soon}))
        .await
        .refused(ErrorCode::Forbidden);
    // More than the user holds is an escalation; another's organization is not theirs.
    app.by(&access)
        .post("/api/me/tokens")
        .json(json!({"name": "x", "expiresAt": soon, "orgId": other}))
        .await
        .refused(ErrorCode::TenantForbidden);
    // A mistyped token is refused before any lookup; a revoked one at once.
    let mut typo = secret.clone();
    typo.replace_range(10..11, if &secret[10..11] == "a" { "b" } else { "a" });
    assert_eq!(me_status(app, &typo).await, StatusCode::UNAUTHORIZED);
    // Listed with its last use, never its secret.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let listed: Tokens = app
        .by(&access)
        .get("/api/me/tokens")
        .await
        .expect(StatusCode::OK)
        .data();
    let listed = &listed.tokens[0];
    assert_eq!(listed.id, id);
    assert!(
        listed.token.is_none() && listed.last_used_at.is_some(),
        "{listed:?}"
    );
    assert_eq!(listed.permissions, Some(vec!["compliance:read".to_owned()]));
    app.by(&access)
        .delete(format!("/api/me/tokens/{id}"))
        .await
        .expect(StatusCode::OK);
    app.by(&secret)
        .org(&org)
        .get("/api/compliance/rules")
        .await
        .refused(ErrorCode::Unauthorized);
    app.by(&access)
        .delete(format!("/api/me/tokens/{id}"))
        .await
        .refused(ErrorCode::NotFound);
    // An unbounded token acts as its user, until it expires.
    let shortly = (Utc::now() + chrono::Duration::seconds(2)).to_rfc3339();
    let brief: PersonalToken = app
        .by(&access)
        .post("/api/me/tokens")
        .json(json!({"name": "brief", "expiresAt": shortly}))
        .await
        .expect(StatusCode::CREATED)
        .data();
    let brief = brief.token.expect("the secret, this once");
    app.by(&brief)
        .org(&org)
        .get("/api/compliance/rules")
        .await
        .expect(StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    app.by(&brief)
        .org(&org)
        .get("/api/compliance/rules")
        .await
        .refused(ErrorCode::Unauthorized);
    assert_eq!(app.audited("user.token.create").await.len(), 2);
}

async fn revoke_all_ends_every_session_and_token_at_once(app: &TestApp) {
    register(app, "ivy@example.com").await;
    let (first, first_refresh) = session(app, "ivy@example.com").await;
    let (second, _) = session(app, "ivy@example.com").await;
    let soon = (Utc::now() + chrono::Duration::days(3)).to_rfc3339();
    let pat: PersonalToken = app
        .by(&first)
        .post("/api/me/tokens")
        .json(json!({"name": "cli", "expiresAt": soon}))
        .await
        .data();
    let pat = pat.token.expect("the secret, this once");
    for token in [&first, &second, &pat] {
        assert_eq!(me_status(app, token).await, StatusCode::OK);
    }
    app.by(&second)
        .post("/api/me/tokens/revoke-all")
        .await
        .expect(StatusCode::OK);
    for token in [&first, &second, &pat] {
        assert_eq!(me_status(app, token).await, StatusCode::UNAUTHORIZED);
    }
    let Answer(status, body) = refresh(app, &first_refresh).await;
    assert_eq!(code(status, &body), ErrorCode::Unauthorized);
    // Signing in again works, and its token is good.
    let (fresh, _) = session(app, "ivy@example.com").await;
    assert_eq!(me_status(app, &fresh).await, StatusCode::OK);
    assert_eq!(app.audited("user.tokens.revoke-all").await.len(), 1);
}

async fn a_password_change_ends_the_other_sessions(app: &TestApp) {
    register(app, "jo@example.com").await;
    let (other, other_refresh) = session(app, "jo@example.com").await;
    let (mine, _) = session(app, "jo@example.com").await;
    app.by(&mine)
        .put("/api/me/password")
        .json(json!({"currentPassword": "not it at all", "newPassword": "a new passphrase"}))
        .await
        .refused(ErrorCode::InvalidCredentials);
    let renewed: Session = app
        .by(&mine)
        .put("/api/me/password")
        .json(json!({"currentPassword": PASSWORD, "newPassword": "a new passphrase"}))
        .await
        .expect(StatusCode::OK)
        .data();
    let renewed = renewed.access_token;
    assert_eq!(me_status(app, &renewed).await, StatusCode::OK);
    assert_eq!(me_status(app, &other).await, StatusCode::UNAUTHORIZED);
    assert_eq!(me_status(app, &mine).await, StatusCode::UNAUTHORIZED);
    let Answer(status, _) = refresh(app, &other_refresh).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let Answer(status, body) = login_as(app, "jo@example.com", PASSWORD).await;
    assert_eq!(code(status, &body), ErrorCode::InvalidCredentials);
    let Answer(status, _) = login_as(app, "jo@example.com", "a new passphrase").await;
    assert_eq!(status, StatusCode::OK);
    // The profile changes; a new address is verified again.
    let account: Account = app
        .by(&renewed)
        .put("/api/me")
        .json(json!({"name": "Jo", "email": "jo2@example.com"}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(
        (
            account.name.as_deref(),
            account.email.as_str(),
            account.email_verified
        ),
        (Some("Jo"), "jo2@example.com", false)
    );
    verify(app, "jo2@example.com").await;
    assert_eq!(app.audited("user.password.change").await.len(), 1);
    assert_eq!(app.audited("user.profile.update").await.len(), 1);
}

async fn step_up_proves_the_password_again(app: &TestApp) {
    let user = register(app, "kim@example.com").await;
    let (access, _) = session(app, "kim@example.com").await;
    // Without a fresh proof, deletion is refused.
    app.by(&access)
        .delete("/api/me")
        .await
        .refused(ErrorCode::StepUpRequired);
    app.by(&access)
        .post("/api/auth/step-up")
        .json(json!({"password": "wrong one"}))
        .await
        .refused(ErrorCode::InvalidCredentials);
    let StepUpProof {
        step_up_token: proof,
        expires_in,
    } = app
        .by(&access)
        .post("/api/auth/step-up")
        .json(json!({"password": PASSWORD}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(expires_in, 300);
    // The proof serves the operations that need one: an ownership transfer.
    let org = app
        .by(&access)
        .post("/api/organization")
        .json(json!({"name": "kims"}))
        .await
        .id();
    let Answer(status, body) = app
        .by(&access)
        .step_up(&proof)
        .patch(format!("/api/organization/{org}/transfer-owner"))
        .json(json!({"userId": "nobody-here"}))
        .await;
    assert_ne!(code(status, &body), ErrorCode::StepUpRequired, "{body}");
    // Another user's proof is not this user's.
    register(app, "lee@example.com").await;
    let (lee, _) = session(app, "lee@example.com").await;
    app.by(&lee)
        .step_up(&proof)
        .delete("/api/me")
        .await
        .refused(ErrorCode::Unauthorized);
    let deleted: Deleted = app
        .by(&access)
        .step_up(proof)
        .delete("/api/me")
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(deleted.id, user);
    // Deleted: it cannot sign in, its tokens stop, its history stays.
    assert_eq!(me_status(app, &access).await, StatusCode::UNAUTHORIZED);
    let Answer(status, body) = login_as(app, "kim@example.com", PASSWORD).await;
    assert_eq!(code(status, &body), ErrorCode::InvalidCredentials);
    assert_eq!(app.audited("user.delete").await.len(), 1);
    assert!(app
        .audited("user.register")
        .await
        .iter()
        .any(|e| e.actor_id == user));
    // The address is free again.
    register(app, "kim@example.com").await;
}

async fn an_authenticator_app_steps_up_with_codes_good_once(app: &TestApp) {
    register(app, "otto@example.com").await;
    let (access, _) = session(app, "otto@example.com").await;
    // Without one enrolled, a code is refused as such.
    app.by(&access)
        .post("/api/auth/step-up")
        .json(json!({"totp": "123456"}))
        .await
        .refused(ErrorCode::ValidationError);
    // Enrolling takes a fresh proof of the password: the access token alone cannot.
    app.by(&access)
        .post("/api/me/totp")
        .await
        .refused(ErrorCode::StepUpRequired);
    let password_proof: StepUpProof = app
        .by(&access)
        .post("/api/auth/step-up")
        .json(json!({"password": PASSWORD}))
        .await
        .expect(StatusCode::OK)
        .data();
    let password_proof = password_proof.step_up_token;
    app.by(&access)
        .step_up(&password_proof)
        .post("/api/me/totp/confirm")
        .json(json!({"code": "123456"}))
        .await
        .refused(ErrorCode::Conflict);
    let enrollment: TotpEnrollment = app
        .by(&access)
        .step_up(&password_proof)
        .post("/api/me/totp")
        .await
        .expect(StatusCode::CREATED)
        .data();
    let text = enrollment.secret;
    assert!(enrollment
        .otpauth_uri
        .starts_with("otpauth://totp/compliance:otto%40example.com?secret="));
    let secret = tenancy::totp_secret_bytes(&text).unwrap();
    let at = |offset: i64| {
        tenancy::totp_code(
            &secret,
            u64::try_from(Utc::now().timestamp() + offset).unwrap(),
        )
        .unwrap()
    };
    let wrong = if at(0) == "000000" {
        "111111"
    } else {
        "000000"
    };
    app.by(&access)
        .post("/api/me/totp/confirm")
        .json(json!({"code": at(0)}))
        .await
        .refused(ErrorCode::StepUpRequired);
    app.by(&access)
        .step_up(&password_proof)
        .post("/api/me/totp/confirm")
        .json(json!({"code": wrong}))
        .await
        .refused(ErrorCode::ValidationError);
    let account: Account = app
        .by(&access)
        .step_up(&password_proof)
        .post("/api/me/totp/confirm")
        .json(json!({"code": at(0)}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert!(account.totp_enabled);
    // The account is told, and the change audited.
    assert_eq!(
        number(
            app,
            "SELECT COUNT(*) FROM account_mail WHERE recipient = 'otto@example.com' AND kind = 'security'"
        )
        .await,
        1
    );
    // The code that confirmed is used up; the next step's (drift) is good, once.
    app.by(&access)
        .post("/api/auth/step-up")
        .json(json!({"totp": at(0)}))
        .await
        .refused(ErrorCode::InvalidCredentials);
    let next = at(30);
    let proof: StepUpProof = app
        .by(&access)
        .post("/api/auth/step-up")
        .json(json!({"totp": next}))
        .await
        .expect(StatusCode::OK)
        .data();
    let proof = proof.step_up_token;
    app.by(&access)
        .post("/api/auth/step-up")
        .json(json!({"totp": next}))
        .await
        .refused(ErrorCode::InvalidCredentials);
    // The secret is kept sealed or as text, never hashed away; removal needs step-up.
    app.by(&access)
        .delete("/api/me/totp")
        .await
        .refused(ErrorCode::StepUpRequired);
    let account: Account = app
        .by(&access)
        .step_up(proof)
        .delete("/api/me/totp")
        .await
        .expect(StatusCode::OK)
        .data();
    assert!(!account.totp_enabled);
    assert!(app
        .audited("user.login.failed")
        .await
        .iter()
        .all(|e| !format!("{e:?}").contains(&next)));
}

/// A step-up proof is bound to the session it was made in and to the account's
/// generation: another session of the same account cannot use it, and logout,
/// revoke-all and a password change end it (issue 51: a stolen access token made
/// itself a second factor and stepped up with it).
async fn step_up_proofs_are_bound_to_their_session_and_end_with_it(app: &TestApp) {
    register(app, "sal@example.com").await;
    let proof_of = |access: String| async move {
        let proof: StepUpProof = app
            .by(&access)
            .post("/api/auth/step-up")
            .json(json!({"password": PASSWORD}))
            .await
            .expect(StatusCode::OK)
            .data();
        proof.step_up_token
    };
    // A proof works for its own session only.
    let (first, first_refresh) = session(app, "sal@example.com").await;
    let (second, _) = session(app, "sal@example.com").await;
    let proof = proof_of(first.clone()).await;
    app.by(&first)
        .step_up(&proof)
        .post("/api/me/totp")
        .await
        .expect(StatusCode::CREATED);
    app.by(&second)
        .step_up(&proof)
        .post("/api/me/totp")
        .await
        .refused(ErrorCode::Unauthorized);
    // Logout ends the session and its proofs: the proof is refused with the
    // session's own access token (and with a new session's, being another's).
    let Answer(status, _) = public(
        app,
        "/api/auth/logout",
        json!({"refreshToken": first_refresh}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    app.by(&first)
        .step_up(&proof)
        .post("/api/me/totp")
        .await
        .expect(StatusCode::UNAUTHORIZED);
    let (third, _) = session(app, "sal@example.com").await;
    app.by(&third)
        .step_up(proof)
        .post("/api/me/totp")
        .await
        .expect(StatusCode::UNAUTHORIZED);
    // A password change ends every session, and so every proof made before (the
    // session binding refuses it; the generation it carries would too).
    let proof = proof_of(third.clone()).await;
    let fresh: Session = app
        .by(&third)
        .put("/api/me/password")
        .json(json!({"currentPassword": PASSWORD, "newPassword": "a new horse battery"}))
        .await
        .expect(StatusCode::OK)
        .data();
    let fresh = fresh.access_token;
    app.by(&fresh)
        .step_up(proof)
        .post("/api/me/totp")
        .await
        .expect(StatusCode::UNAUTHORIZED);
}

async fn the_system_organization_is_for_bootstrap_identifiers_only(app: &TestApp) {
    // A signed-in person who is not listed cannot create it.
    register(app, "mo@example.com").await;
    let (access, _) = session(app, "mo@example.com").await;
    app.by(&access)
        .post("/api/organization")
        .json(json!({"name": "system"}))
        .await
        .refused(ErrorCode::Forbidden);
    // A listed address counts only once verified: registering it is not enough.
    register(app, ROOT_EMAIL).await;
    let (root, _) = session(app, ROOT_EMAIL).await;
    app.by(&root)
        .post("/api/organization")
        .json(json!({"name": "system"}))
        .await
        .refused(ErrorCode::Forbidden);
    verify(app, ROOT_EMAIL).await;
    let (root, _) = session(app, ROOT_EMAIL).await;
    app.by(&root)
        .post("/api/organization")
        .json(json!({"name": "system"}))
        .await
        .expect(StatusCode::CREATED);
    let me: Me = app.by(&root).get("/api/me").await.data();
    assert!(me.account.super_admin);
}

async fn provisioning_makes_the_first_super_admin(app: &TestApp) {
    let state = AppState::new(test_config(&[]), app.store.clone(), Arc::default());
    let refused = adapters::services::accounts::provision(
        &state.infra.store,
        &state.config,
        &state.infra.passwords,
        ("eve@example.com", PASSWORD.to_owned()),
        Utc::now(),
    )
    .await;
    assert!(refused.is_err());
    let account = adapters::services::accounts::provision(
        &state.infra.store,
        &state.config,
        &state.infra.passwords,
        (ROOT_EMAIL, PASSWORD.to_owned()),
        Utc::now(),
    )
    .await
    .unwrap();
    assert!(account.super_admin && account.email_verified);
    let (access, _) = session(app, ROOT_EMAIL).await;
    app.by(&access)
        .get("/api/quotas/all")
        .await
        .expect(StatusCode::OK);
    let again = adapters::services::accounts::provision(
        &state.infra.store,
        &state.config,
        &state.infra.passwords,
        (ROOT_EMAIL, PASSWORD.to_owned()),
        Utc::now(),
    )
    .await;
    assert!(again.is_err(), "a second account for the same address");
}

async fn sign_in_lifetimes_follow_the_tier(app: &TestApp) {
    let tiered = app
        .beside(&[
            ("JWT_EXPIRES_IN", "1h"),
            ("JWT_EXPIRES_IN_DEVELOPER", "30m"),
        ])
        .await;
    register(&tiered, "ned@example.com").await;
    let (access, _) = session_with(&tiered, "ned@example.com", None, 3600).await;
    let org = tiered
        .by(&access)
        .post("/api/organization")
        .json(json!({"name": "neds"}))
        .await
        .id();
    session_with(&tiered, "ned@example.com", Some(&org), 1800).await;
    let other = tiered.org("stranger", "strangers").await;
    let Answer(status, body) = public(
        &tiered,
        "/api/auth/login",
        json!({"identifier": "ned@example.com", "password": PASSWORD, "orgId": other}),
    )
    .await;
    assert_eq!(code(status, &body), ErrorCode::TenantForbidden);
    tiered.stop().await;
}

async fn session_with(
    app: &TestApp,
    email: &str,
    org: Option<&str>,
    lifetime: u64,
) -> (String, String) {
    let mut body = json!({"identifier": email, "password": PASSWORD});
    if let Some(org) = org {
        body["orgId"] = json!(org);
    }
    let session: Session = public(app, "/api/auth/login", body)
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(session.expires_in, lifetime);
    (session.access_token, session.refresh_token)
}

on_both_backends!(
    step_up_proofs_are_bound_to_their_session_and_end_with_it,
    a_person_registers_verifies_signs_in_refreshes_and_signs_out,
    bad_input_is_refused_and_changes_nothing,
    a_wrong_password_and_an_unknown_account_answer_alike,
    repeated_failures_are_slowed_then_refused,
    sixteen_concurrent_refreshes_of_one_token,
    personal_access_tokens_are_bounded_by_their_subset,
    revoke_all_ends_every_session_and_token_at_once,
    a_password_change_ends_the_other_sessions,
    step_up_proves_the_password_again,
    an_authenticator_app_steps_up_with_codes_good_once,
    the_system_organization_is_for_bootstrap_identifiers_only,
    provisioning_makes_the_first_super_admin,
    sign_in_lifetimes_follow_the_tier,
);
