//! The console's People page: members, invitations, Roles and the ownership, each
//! action done through the page and confirmed through the API; a member's attempt
//! refused with the API's message, nothing changed.

use super::console::{
    console_session, form_token, owner, page_of, post_form, register, HOST, PASSWORD,
};
use super::*;
use crate::api::Answer;
use adapters::http::wire::Organization;

async fn members_of(app: &TestApp, token: &str, org: &str) -> Vec<Value> {
    let Answer(status, body) = app
        .by(token)
        .get(format!("/api/organization/{org}/members"))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["members"].as_array().unwrap().clone()
}

fn member<'a>(members: &'a [Value], user: &str) -> Option<&'a Value> {
    members.iter().find(|m| m["userId"] == user)
}

async fn an_admin_manages_people_through_the_page(app: &TestApp) {
    let app = &app.beside(&[("QUOTA_TIER_DEVELOPER_SEATS", "-1")]).await;
    let (alice, acme) = owner(app, "alice@example.com", "acme").await;
    let bob = register(app, "bob@example.com").await;
    let (cookie, _) = console_session(app, "alice@example.com", HOST, &[]).await;
    let (status, page) = page_of(app, &cookie, "/console/people").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(
        page.contains("<td>alice@example.com</td><td>owner</td>"),
        "{page}"
    );
    let token = form_token(&page);
    let post = |fields: Vec<(&'static str, String)>| {
        let (cookie, token, acme) = (cookie.clone(), token.clone(), acme.clone());
        async move {
            let mut all: Vec<(&str, &str)> = vec![("csrf", &token), ("org", &acme)];
            all.extend(fields.iter().map(|(k, v)| (*k, v.as_str())));
            post_form(app, &cookie, "/console/people", &all).await
        }
    };
    // Members.
    let (status, page) = post(vec![
        ("action", "add".into()),
        ("userId", bob.clone()),
        ("role", "member".into()),
    ])
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("bob@example.com added as member"), "{page}");
    assert_eq!(
        member(&members_of(app, &alice, &acme).await, &bob).unwrap()["role"],
        "member"
    );
    let (_, page) = post(vec![
        ("action", "role".into()),
        ("userId", bob.clone()),
        ("role", "admin".into()),
    ])
    .await;
    assert!(page.contains("bob@example.com is now admin"), "{page}");
    assert_eq!(
        member(&members_of(app, &alice, &acme).await, &bob).unwrap()["role"],
        "admin"
    );
    let (_, page) = post(vec![
        ("action", "deactivate".into()),
        ("userId", bob.clone()),
    ])
    .await;
    assert!(page.contains("bob@example.com deactivated"), "{page}");
    assert_eq!(
        member(&members_of(app, &alice, &acme).await, &bob).unwrap()["active"],
        false
    );
    let (_, page) = post(vec![("action", "activate".into()), ("userId", bob.clone())]).await;
    assert!(page.contains("bob@example.com activated"));
    assert_eq!(
        member(&members_of(app, &alice, &acme).await, &bob).unwrap()["active"],
        true
    );

    // Invitations.
    let (status, page) = post(vec![
        ("action", "invite".into()),
        ("email", "dave@example.com".into()),
        ("role", "member".into()),
    ])
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("dave@example.com invited as member"));
    let Answer(_, listed) = app.by(&alice).org(&acme).get("/api/invitation").await;
    let invitation = listed["invitations"][0]["id"].as_str().unwrap().to_owned();
    let (_, page) = post(vec![
        ("action", "resend".into()),
        ("id", invitation.clone()),
    ])
    .await;
    assert!(
        page.contains("the invitation of dave@example.com sent again"),
        "{page}"
    );
    let Answer(_, listed) = app.by(&alice).org(&acme).get("/api/invitation").await;
    assert_eq!(listed["invitations"][0]["sentCount"], 2);
    let (status, page) = post(vec![
        ("action", "invite".into()),
        ("email", "not an address".into()),
    ])
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert!(page.contains("id=\"error\""));
    let (_, page) = post(vec![
        ("action", "revoke".into()),
        ("id", invitation.clone()),
    ])
    .await;
    assert!(page.contains("the invitation of dave@example.com revoked"));
    let Answer(_, listed) = app.by(&alice).org(&acme).get("/api/invitation").await;
    assert_eq!(listed["invitations"][0]["status"], "revoked");

    // Roles: made of permissions the author holds, given, taken, deleted.
    let (_, page) = page_of(app, &cookie, &format!("/console/people?org={acme}")).await;
    assert!(
        page.contains("name=\"permission:compliance:read\""),
        "{page}"
    );
    let (status, page) = post(vec![
        ("action", "create-role".into()),
        ("name", "Auditors".into()),
        ("permission:compliance:read", "on".into()),
        ("permission:audit:read", "on".into()),
    ])
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("Role Auditors created"));
    let Answer(_, roles) = app
        .by(&alice)
        .get(format!("/api/organization/{acme}/roles"))
        .await;
    let auditors = roles["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "Auditors")
        .unwrap()
        .clone();
    let mut permissions: Vec<&str> = auditors["permissions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    permissions.sort_unstable();
    assert_eq!(permissions, vec!["audit:read", "compliance:read"]);
    let role = auditors["id"].as_str().unwrap().to_owned();
    let (_, page) = post(vec![
        ("action", "give-role".into()),
        ("roleId", role.clone()),
        ("userId", bob.clone()),
    ])
    .await;
    assert!(page.contains("Role Auditors given"), "{page}");
    let held = |roles: &Value| {
        roles["roles"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == json!(role))
            .map(|r| r["members"].clone())
    };
    let Answer(_, roles) = app
        .by(&alice)
        .get(format!("/api/organization/{acme}/roles"))
        .await;
    assert_eq!(held(&roles).unwrap(), json!([bob]));
    let (_, page) = post(vec![
        ("action", "take-role".into()),
        ("roleId", role.clone()),
        ("userId", bob.clone()),
    ])
    .await;
    assert!(
        page.contains(&format!("Role {role} taken from {bob}")),
        "{page}"
    );
    let Answer(_, roles) = app
        .by(&alice)
        .get(format!("/api/organization/{acme}/roles"))
        .await;
    assert_eq!(held(&roles).unwrap(), json!([]));
    let (_, page) = post(vec![
        ("action", "delete-role".into()),
        ("roleId", role.clone()),
    ])
    .await;
    assert!(page.contains(&format!("Role {role} deleted")));
    let Answer(_, roles) = app
        .by(&alice)
        .get(format!("/api/organization/{acme}/roles"))
        .await;
    assert!(held(&roles).is_none());

    // The ownership: a wrong password changes nothing; the right one hands it over.
    let (status, page) = post(vec![
        ("action", "transfer".into()),
        ("userId", bob.clone()),
        ("password", "wrong".into()),
    ])
    .await;
    assert!(status.is_client_error(), "{status}");
    assert!(page.contains("id=\"error\""));
    let org: Organization = app
        .by(&alice)
        .get(format!("/api/organization/{acme}"))
        .await
        .data();
    assert_ne!(org.owner_id, bob);
    let (status, page) = post(vec![
        ("action", "transfer".into()),
        ("userId", bob.clone()),
        ("password", PASSWORD.into()),
    ])
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let org: Organization = app
        .by(&alice)
        .get(format!("/api/organization/{acme}"))
        .await
        .data();
    assert_eq!(org.owner_id, bob);

    // Removing: bob, now the owner, removes alice.
    let (bob_cookie, _) = console_session(app, "bob@example.com", HOST, &[]).await;
    let (_, page) = page_of(app, &bob_cookie, &format!("/console/people?org={acme}")).await;
    let bob_token = form_token(&page);
    let alice_id = member(&members_of(app, &alice, &acme).await, "x").map(|_| String::new());
    assert!(alice_id.is_none());
    let alice_id = members_of(app, &alice, &acme)
        .await
        .iter()
        .find(|m| m["email"] == "alice@example.com")
        .unwrap()["userId"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, page) = post_form(
        app,
        &bob_cookie,
        "/console/people",
        &[
            ("csrf", &bob_token),
            ("org", &acme),
            ("action", "remove"),
            ("userId", &alice_id),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains(&format!("{alice_id} removed")));
}

async fn a_member_is_refused_with_the_apis_message(app: &TestApp) {
    let app = &app.beside(&[("QUOTA_TIER_DEVELOPER_SEATS", "-1")]).await;
    let (alice, acme) = owner(app, "alice@example.com", "acme").await;
    let carol = register(app, "carol@example.com").await;
    app.by(&alice)
        .post(format!("/api/organization/{acme}/members"))
        .json(json!({"userId": carol, "role": "member"}))
        .await
        .expect(StatusCode::CREATED);
    let (cookie, _) = console_session(app, "carol@example.com", HOST, &[]).await;
    let (status, page) = page_of(app, &cookie, &format!("/console/people?org={acme}")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    for control in [
        "id=\"add-member\"",
        "id=\"create-role\"",
        "value=\"remove\"",
        "id=\"transfer\"",
    ] {
        assert!(!page.contains(control), "{control}");
    }
    let token = form_token(&page);
    let before = members_of(app, &alice, &acme).await;
    let alice_id = before
        .iter()
        .find(|m| m["email"] == "alice@example.com")
        .unwrap()["userId"]
        .as_str()
        .unwrap()
        .to_owned();
    for fields in [
        vec![
            ("action", "role"),
            ("userId", alice_id.as_str()),
            ("role", "member"),
        ],
        vec![
            ("action", "create-role"),
            ("name", "Mine"),
            ("permission:org:settings", "on"),
        ],
        vec![
            ("action", "invite"),
            ("email", "eve@example.com"),
            ("role", "admin"),
        ],
    ] {
        let mut all: Vec<(&str, &str)> = vec![("csrf", &token), ("org", &acme)];
        all.extend(fields.iter().copied());
        let (status, page) = post_form(app, &cookie, "/console/people", &all).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{fields:?}: {page}");
        assert!(page.contains("id=\"error\""), "{page}");
    }
    assert_eq!(members_of(app, &alice, &acme).await, before);
    let Answer(_, roles) = app
        .by(&alice)
        .get(format!("/api/organization/{acme}/roles"))
        .await;
    assert!(roles["roles"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["name"] != "Mine"));
    let Answer(_, listed) = app.by(&alice).org(&acme).get("/api/invitation").await;
    assert_eq!(listed["invitations"], json!([]));
}

/// In the browser: the page at 1280 and 375 px with a member, an invitation and a
/// custom Role, every control named; a Role made by clicking; no CSP violation.
async fn people_in_the_browser(app: &TestApp) {
    use super::console::{browser, csp_violations, serve};
    let app = &app.beside(&[("QUOTA_TIER_DEVELOPER_SEATS", "-1")]).await;
    let (alice, acme) = owner(app, "alice@example.com", "acme").await;
    let bob = register(app, "bob@example.com").await;
    app.by(&alice)
        .post(format!("/api/organization/{acme}/members"))
        .json(json!({"userId": bob, "role": "admin"}))
        .await;
    app.by(&alice)
        .org(&acme)
        .post("/api/invitation/send")
        .json(json!({"email": "dave@example.com"}))
        .await;
    let base = serve(app.router.clone()).await;
    let b = browser().await;
    let violations_before = csp_violations(app).await;
    b.sign_in(&base, "alice@example.com").await;
    b.open(&format!("{base}/console/people?org={acme}")).await;
    b.type_into("#role-name", "Readers").await;
    b.click("#permission-compliance\\:read").await;
    b.click("#create-role button").await;
    let notice = b.text("#notice").await;
    assert!(notice.contains("Role Readers created"), "{notice}");
    b.shot("people-1280").await;
    b.client.set_window_size(375, 900).await.unwrap();
    b.shot("people-375").await;
    assert_eq!(csp_violations(app).await, violations_before);
    b.client.clone().close().await.unwrap();
}

on_both_backends!(
    an_admin_manages_people_through_the_page,
    a_member_is_refused_with_the_apis_message,
    people_in_the_browser,
);
