//! The console's account page: personal access tokens (the secret shown once and
//! working with the API, revoked one by one or all at once), the password changed
//! with the console going on in the new session, and an authenticator app enrolled
//! from a QR code drawn on the server.

use super::console::{
    access, console_session, form_token, owner, page_of, post_form, visit, HOST, PASSWORD,
};
use super::*;
use crate::api::Answer;
use adapters::http::wire::{Me, Tokens};

/// The value of the input with `id` on `page`.
fn input_value(page: &str, id: &str) -> Option<String> {
    let pattern = format!("id=\"{id}\" value=\"");
    let start = page.find(&pattern)? + pattern.len();
    let rest = page.get(start..)?;
    Some(rest.get(..rest.find('"')?)?.to_owned())
}

/// A form of the account page posted by the holder of `cookie` with the page's
/// `token`, in `org`: `action` and its `fields`.
async fn account_form(
    app: &TestApp,
    (cookie, token, org): (&str, &str, &str),
    action: &str,
    fields: &[(&str, &str)],
) -> (StatusCode, String) {
    let mut all = vec![("csrf", token), ("org", org), ("action", action)];
    all.extend_from_slice(fields);
    post_form(app, cookie, "/console/account", &all).await
}

async fn tokens_are_made_shown_once_used_and_revoked(app: &TestApp) {
    let (alice, acme) = owner(app, "alice@example.com", "acme").await;
    let (cookie, _) = console_session(app, "alice@example.com", HOST, &[]).await;
    let (status, page) = page_of(app, &cookie, "/console/account").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(
        page.contains("id=\"account-email\">alice@example.com"),
        "{page}"
    );
    let token = form_token(&page);
    let (status, page) = account_form(
        app,
        (&cookie, &token, &acme),
        "create",
        &[("name", "ci"), ("days", "7"), ("bound", "on")],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("token ci created: copy it now"), "{page}");
    assert!(page.contains("data-copy=\"new-token\""));
    let secret = input_value(&page, "new-token").expect("the new token on the page");
    assert!(secret.starts_with("cpat_"), "{secret}");
    // It works with the API, bound to the organization chosen.
    let Answer(status, me) = app.by(&secret).get("/api/me").await;
    assert_eq!(status, StatusCode::OK, "{me}");
    let listed: Tokens = app.by(&alice).get("/api/me/tokens").await.data();
    let made = &listed.tokens[0];
    assert_eq!(made.org_id.as_deref(), Some(acme.as_str()));
    let days = (made.expires_at - Utc::now()).num_hours();
    assert!((7 * 24 - 2..=7 * 24).contains(&days), "{days} hours");
    // Shown once: the page read again lists it, its last use, never its secret.
    let (_, page) = page_of(app, &cookie, "/console/account").await;
    assert!(!page.contains(&secret));
    assert!(page.contains(">ci</td>"));
    let id = made.id.clone();
    let row = page.split(&format!("data-token=\"{id}\"")).nth(1).unwrap();
    let row = row.split("</tr>").next().unwrap();
    assert!(!row.contains("never"), "its use is listed: {row}");
    // Revoked through the page: refused by the API at once.
    let (status, page) =
        account_form(app, (&cookie, &token, &acme), "revoke", &[("id", &id)]).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains(&format!("token {id} revoked")));
    app.by(&secret)
        .get("/api/me")
        .await
        .expect(StatusCode::UNAUTHORIZED);
    // A hostile expiry: the API's refusal (beyond a year), no overflow.
    let (status, page) = account_form(
        app,
        (&cookie, &token, &acme),
        "create",
        &[("name", "forever"), ("days", "9223372036854775807")],
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert!(page.contains("id=\"error\""));
    // A name the API refuses: its message, nothing made.
    let (status, page) = account_form(
        app,
        (&cookie, &token, &acme),
        "create",
        &[("name", ""), ("days", "7")],
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert!(page.contains("id=\"error\""));
    let listed: Tokens = app.by(&alice).get("/api/me/tokens").await.data();
    assert_eq!(listed.tokens.len(), 1);

    // Revoke all: every token and session ends, the console's too.
    let (_, page) = account_form(
        app,
        (&cookie, &token, &acme),
        "create",
        &[("name", "other"), ("days", "30")],
    )
    .await;
    let other = input_value(&page, "new-token").unwrap();
    let (status, headers, _) = visit(
        app,
        "POST",
        "/console/account",
        (Some(&cookie), HOST),
        Some(&[("csrf", &token), ("org", &acme), ("action", "revoke-all")]),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(headers["location"], "/console/login");
    for gone in [&other, &alice] {
        app.by(gone)
            .get("/api/me")
            .await
            .expect(StatusCode::UNAUTHORIZED);
    }
    let (_, headers, _) = visit(
        app,
        "GET",
        "/console/account",
        (Some(&cookie), HOST),
        None,
        &[],
    )
    .await;
    assert_eq!(headers["location"], "/console/login");
}

async fn the_password_changes_and_the_console_goes_on(app: &TestApp) {
    let (alice, acme) = owner(app, "alice@example.com", "acme").await;
    let (cookie, _) = console_session(app, "alice@example.com", HOST, &[]).await;
    let (_, page) = page_of(app, &cookie, "/console/account").await;
    let token = form_token(&page);
    let change = |current: &'static str, new: &'static str, again: &'static str| {
        let (cookie, token, acme) = (cookie.clone(), token.clone(), acme.clone());
        async move {
            visit(
                app,
                "POST",
                "/console/account",
                (Some(&cookie), HOST),
                Some(&[
                    ("csrf", &token),
                    ("org", &acme),
                    ("action", "password"),
                    ("currentPassword", current),
                    ("newPassword", new),
                    ("repeatPassword", again),
                ]),
                &[],
            )
            .await
        }
    };
    let (status, _, page) = change(PASSWORD, "a new passphrase", "another one").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(page.contains("the new password and its repetition differ"));
    let (status, _, page) =
        change("not the password", "a new passphrase", "a new passphrase").await;
    assert!(status.is_client_error(), "{status}");
    let Answer(_, refused) = app
        .by(&alice)
        .put("/api/me/password")
        .json(json!({"currentPassword": "not the password", "newPassword": "a new passphrase"}))
        .await;
    let message = refused["message"].as_str().unwrap();
    assert!(page.contains(message), "{message}: {page}");
    let (status, headers, _) = change(PASSWORD, "a new passphrase", "a new passphrase").await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(headers["location"]
        .to_str()
        .unwrap()
        .starts_with("/console/account?"));
    let set = headers["set-cookie"].to_str().unwrap();
    let renewed = set
        .split(';')
        .next()
        .unwrap()
        .split_once('=')
        .unwrap()
        .1
        .to_owned();
    assert_ne!(renewed, cookie);
    // The old session ended; the new one goes on, saying why.
    let (_, old, _) = visit(
        app,
        "GET",
        "/console/account",
        (Some(&cookie), HOST),
        None,
        &[],
    )
    .await;
    assert_eq!(old["location"], "/console/login");
    let (status, page) = page_of(
        app,
        &renewed,
        &format!("/console/account?org={acme}&done=password"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("your password was changed"));
    let Answer(status, _) = app.by(&alice).get("/api/me").await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "the API's old session ended too"
    );
    app.public()
        .post("/api/auth/login")
        .json(json!({"identifier": "alice@example.com", "password": "a new passphrase"}))
        .await
        .expect(StatusCode::OK);
}

async fn an_authenticator_is_enrolled_from_a_qr_code(app: &TestApp) {
    let (_, acme) = owner(app, "alice@example.com", "acme").await;
    let (cookie, _) = console_session(app, "alice@example.com", HOST, &[]).await;
    let (_, page) = page_of(app, &cookie, "/console/account").await;
    assert!(page.contains("id=\"totp-state\">not enrolled"));
    let token = form_token(&page);
    let (status, page) = account_form(
        app,
        (&cookie, &token, &acme),
        "enroll",
        &[("password", "wrong")],
    )
    .await;
    assert!(status.is_client_error(), "{status}");
    assert!(page.contains("id=\"error\"") && !page.contains("<svg"));
    let (status, page) = account_form(
        app,
        (&cookie, &token, &acme),
        "enroll",
        &[("password", PASSWORD)],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(
        page.contains("<svg") && page.contains("</svg>"),
        "the QR code is drawn here"
    );
    assert!(!page.contains("<script>") && !page.contains("style=\""));
    let secret = page
        .split("id=\"totp-secret\">")
        .nth(1)
        .and_then(|rest| rest.split('<').next())
        .unwrap()
        .to_owned();
    let step_up = page
        .split("name=\"stepUp\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    let bytes = tenancy::totp_secret_bytes(&secret).unwrap();
    let code = tenancy::totp_code(&bytes, u64::try_from(Utc::now().timestamp()).unwrap()).unwrap();
    let (status, page) = account_form(
        app,
        (&cookie, &token, &acme),
        "confirm",
        &[("stepUp", &step_up), ("code", &code)],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("the authenticator app is enrolled"), "{page}");
    assert!(page.contains("id=\"totp-state\">enrolled"));
    let fresh = access(app, "alice@example.com").await;
    let me: Me = app.by(&fresh).get("/api/me").await.data();
    assert!(me.account.totp_enabled, "{me:?}");
}

/// In the browser: a token made and copied, the authenticator's QR code, at 1280
/// and 375 px; no CSP violation.
async fn the_account_in_the_browser(app: &TestApp) {
    use super::console::{browser, csp_violations, serve};
    owner(app, "alice@example.com", "acme").await;
    let base = serve(app.router.clone()).await;
    let b = browser().await;
    let violations_before = csp_violations(app).await;
    b.sign_in(&base, "alice@example.com").await;
    b.open(&format!("{base}/console/account")).await;
    b.type_into("#token-name", "laptop").await;
    b.click("#create-token").await;
    let notice = b.text("#notice").await;
    assert!(notice.contains("token laptop created"), "{notice}");
    b.click("#copy-token").await;
    let copied = b.text("#copy-token").await;
    assert!(
        copied == "Copied" || copied.starts_with("Selected"),
        "{copied}"
    );
    b.shot("account-token-1280").await;
    b.type_into("#totp-password", PASSWORD).await;
    b.click("#enroll-totp").await;
    // The answer's page: waited for by its secret (the click returns before it loads).
    assert!(!b.text("#totp-secret").await.is_empty());
    assert_eq!(b.count("#totp-enrollment svg").await, 1);
    b.shot("account-totp-1280").await;
    b.client.set_window_size(375, 900).await.unwrap();
    b.shot("account-totp-375").await;
    assert_eq!(csp_violations(app).await, violations_before);
    b.client.clone().close().await.unwrap();
}

on_both_backends!(
    tokens_are_made_shown_once_used_and_revoked,
    the_password_changes_and_the_console_goes_on,
    an_authenticator_is_enrolled_from_a_qr_code,
    the_account_in_the_browser,
);
