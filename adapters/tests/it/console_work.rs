//! The console's working pages beyond rules and people: the inventory's forms (a
//! pipeline from pasted JSON or YAML, a plugin's ZIP uploaded, a block shown as the
//! list of violations), the organization's announcements posted, edited and removed,
//! conversations (started, written, and a message by someone else appearing in an
//! open page without a reload), and templates and policies applied. Each action is
//! confirmed through the API; a Member's attempt shows the API's refusal and
//! changes nothing.

use crate::api::{pagination, Answer};
use adapters::http::wire::{MessagePage, Preference};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use tower::ServiceExt;

use super::console::{
    access, browser, console_session, form_token, owner, page_of, post_form, register, serve, HOST,
};
use super::plugins::{manifest, plugin_zip, zip_of};
use super::*;

/// Alice owns acme; Bob is a Member of it. Their tokens, acme, Bob's id.
async fn team(app: &TestApp) -> (String, String, String, String) {
    let (alice, acme) = owner(app, "alice@example.com", "acme").await;
    let bob_id = register(app, "bob@example.com").await;
    app.by(&alice)
        .post(format!("/api/organization/{acme}/members"))
        .json(json!({"userId": bob_id, "role": "member"}))
        .await
        .expect(StatusCode::CREATED);
    let bob = access(app, "bob@example.com").await;
    (alice, bob, acme, bob_id)
}

/// A block for public entities of `target`.
async fn private_only(app: &TestApp, token: &str, org: &str, target: &str) {
    app.by(token)
        .org(org)
        .post("/api/compliance/rules")
        .json(
            json!({"name": format!("Private {target}s"), "target": target, "severity": "error",
                        "field": "accessModifier", "operator": "eq", "value": "private"}),
        )
        .await
        .expect(StatusCode::CREATED);
}

async fn count(app: &TestApp, token: &str, org: &str, path: &str) -> u64 {
    let Answer(status, body) = app.by(token).org(org).get(path).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    pagination(&body).total
}

/// A signed-in visitor of the console posting its forms in an organization, with
/// the page's form token.
#[derive(Clone, Copy)]
struct At<'a> {
    app: &'a TestApp,
    cookie: &'a str,
    token: &'a str,
    org: &'a str,
}

impl<'a> At<'a> {
    fn new(app: &'a TestApp, cookie: &'a str, token: &'a str, org: &'a str) -> At<'a> {
        At {
            app,
            cookie,
            token,
            org,
        }
    }

    /// A form's `fields` posted to `path`: the status and the page.
    async fn post(&self, path: &str, fields: &[(&str, &str)]) -> (StatusCode, String) {
        let mut all = vec![("csrf", self.token), ("org", self.org)];
        all.extend_from_slice(fields);
        post_form(self.app, self.cookie, path, &all).await
    }

    /// The inventory's upload form (`multipart/form-data`): `fields` and the file
    /// part `plugin`.
    async fn upload(
        &self,
        fields: &[(&str, &str)],
        archive: Option<&[u8]>,
    ) -> (StatusCode, String) {
        let boundary = "console-test-boundary";
        let mut body = Vec::new();
        let mut all = vec![("csrf", self.token), ("org", self.org)];
        all.extend_from_slice(fields);
        for (name, value) in all {
            body.extend_from_slice(
                format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n").as_bytes(),
            );
        }
        if let Some(archive) = archive {
            body.extend_from_slice(
                format!("--{boundary}\r\nContent-Disposition: form-data; name=\"plugin\"; filename=\"p.zip\"\r\nContent-Type: application/zip\r\n\r\n").as_bytes(),
            );
            body.extend_from_slice(archive);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        let request = Request::post("/console/inventory/plugin")
            .header("host", HOST)
            .header(
                "cookie",
                format!("__Host-compliance_console={}", self.cookie),
            )
            .header(
                "content-type",
                format!("multipart/form-data; boundary={boundary}"),
            )
            .body(Body::from(body))
            .unwrap();
        let response = self.app.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }
}

async fn the_inventory_adds_pipelines_and_uploads_plugins_and_shows_blocks(app: &TestApp) {
    let app = &app.beside(&[("QUOTA_TIER_DEVELOPER_SEATS", "-1")]).await;
    let (alice, bob, acme, _) = team(app).await;
    private_only(app, &alice, &acme, "pipeline").await;
    private_only(app, &alice, &acme, "plugin").await;
    let (cookie, _) = console_session(app, "alice@example.com", HOST, &[]).await;
    let (status, page) = page_of(app, &cookie, &format!("/console/inventory?org={acme}")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("id=\"add-pipeline\"") && page.contains("id=\"upload-plugin\""));
    let token = form_token(&page);
    let alice_at = At::new(app, &cookie, &token, &acme);
    let pipelines = "/api/pipelines?limit=1";
    let plugins = "/api/plugins?limit=1";

    // YAML, passing.
    let yaml = "project: web\norganization: acme\npipelineName: from-yaml\naccessModifier: private\nprops: {}\n";
    let (status, page) = alice_at
        .post(
            "/console/inventory",
            &[("action", "createPipeline"), ("pipeline", yaml)],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("pipeline from-yaml created (pass)"), "{page}");
    assert_eq!(count(app, &alice, &acme, pipelines).await, 1);
    // JSON, blocked: the violations as a list, the body kept, nothing stored.
    let json_body = r#"{"project": "web", "organization": "acme", "pipelineName": "open-one", "accessModifier": "public", "props": {}}"#;
    let (status, page) = alice_at
        .post(
            "/console/inventory",
            &[("action", "createPipeline"), ("pipeline", json_body)],
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{page}");
    assert!(
        page.contains("the organization&#39;s compliance rules block it"),
        "{page}"
    );
    let list = page
        .split("id=\"violations\"")
        .nth(1)
        .expect("the violations' list");
    assert!(list.contains("Private pipelines"), "{list}");
    assert!(list.contains("accessModifier"), "{list}");
    assert!(page.contains("open-one"), "the pasted body is kept");
    assert_eq!(count(app, &alice, &acme, pipelines).await, 1);
    // Neither JSON nor YAML of an object: the field is named; nothing sent.
    let (status, page) = alice_at
        .post(
            "/console/inventory",
            &[
                ("action", "createPipeline"),
                ("pipeline", "- just\n- a list\n"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert!(page.contains("id=\"problems\""), "{page}");
    // The API's own problems are listed with the field they name.
    let (status, page) = alice_at
        .post(
            "/console/inventory",
            &[
                ("action", "createPipeline"),
                ("pipeline", "{\"project\": \"web\"}"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert_eq!(count(app, &alice, &acme, pipelines).await, 1);

    // A plugin: uploaded, and blocked when public.
    let (status, page) = alice_at
        .upload(
            &[("accessModifier", "private")],
            Some(&plugin_zip("linter", "1.0.0")),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(
        page.contains("plugin linter@1.0.0 uploaded (pass)"),
        "{page}"
    );
    assert_eq!(count(app, &alice, &acme, plugins).await, 1);
    let (status, page) = alice_at
        .upload(
            &[("accessModifier", "public")],
            Some(&plugin_zip("linter", "2.0.0")),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{page}");
    let list = page
        .split("id=\"violations\"")
        .nth(1)
        .expect("the violations' list");
    assert!(list.contains("Private plugins"), "{list}");
    assert_eq!(count(app, &alice, &acme, plugins).await, 1);
    // The archive's own refusal (no manifest) is the API's message.
    let (status, page) = alice_at
        .upload(&[], Some(&zip_of(&[("README", b"no manifest")])))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert!(page.contains("Refused: "), "{page}");
    // No file; a part the form does not have; no token or another's: refused, nothing stored.
    let (status, _) = alice_at.upload(&[], None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = alice_at
        .upload(&[("extra", "x")], Some(&plugin_zip("other", "1.0.0")))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let forged = "0".repeat(64);
    let forger = At {
        token: &forged,
        ..alice_at
    };
    let (status, page) = forger
        .upload(&[], Some(&plugin_zip("forged", "1.0.0")))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{page}");
    assert_eq!(count(app, &alice, &acme, plugins).await, 1);
    let _ = manifest;

    // A Member may add pipelines and plugins (the Member role's pipelines:write
    // and plugins:write): the same forms, the same judgement.
    let (bob_cookie, _) = console_session(app, "bob@example.com", HOST, &[]).await;
    let (_, page) = page_of(app, &bob_cookie, &format!("/console/inventory?org={acme}")).await;
    assert!(page.contains("id=\"add-pipeline\"") && page.contains("id=\"upload-plugin\""));
    let bob_token = form_token(&page);
    let bob_at = At::new(app, &bob_cookie, &bob_token, &acme);
    let (status, page) = bob_at
        .post(
            "/console/inventory",
            &[("action", "createPipeline"), ("pipeline", json_body)],
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{page}");
    assert!(page.contains("id=\"violations\""), "{page}");
    // Someone who is not a member: the API's refusal, nothing stored.
    register(app, "eve@example.com").await;
    let eve = access(app, "eve@example.com").await;
    let (eve_cookie, _) = console_session(app, "eve@example.com", HOST, &[]).await;
    let (_, page) = page_of(app, &eve_cookie, "/console/account").await;
    let eve_token = form_token(&page);
    let eve_at = At::new(app, &eve_cookie, &eve_token, &acme);
    let (status, page) = eve_at
        .post(
            "/console/inventory",
            &[("action", "createPipeline"), ("pipeline", yaml)],
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{page}");
    let Answer(_, refusal) = app
        .by(&eve)
        .org(&acme)
        .post("/api/pipelines")
        .json(json!({}))
        .await;
    let message = refusal["message"].as_str().unwrap();
    assert!(page.contains(&message.replace('\'', "&#39;")), "{page}");
    let (status, _) = eve_at.upload(&[], Some(&plugin_zip("eves", "1.0.0"))).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(count(app, &alice, &acme, pipelines).await, 1);
    assert_eq!(count(app, &alice, &acme, plugins).await, 1);
    let _ = bob;
}

/// The organization's announcements as its admins manage them.
async fn managed(app: &TestApp, token: &str, org: &str) -> Vec<Value> {
    let Answer(status, body) = app
        .by(token)
        .org(org)
        .get("/api/messages/announcements?view=managed")
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["announcements"].as_array().unwrap().clone()
}

/// How many messages a conversation holds.
async fn messages_of(app: &TestApp, token: &str, org: &str, conversation: &str) -> usize {
    let uri = format!("/api/messages/conversations/{conversation}/messages");
    app.by(token)
        .org(org)
        .get(&uri)
        .await
        .data::<MessagePage>()
        .messages
        .len()
}

async fn admins_post_edit_and_remove_announcements_from_the_inbox(app: &TestApp) {
    let app = &app.beside(&[("QUOTA_TIER_DEVELOPER_SEATS", "-1")]).await;
    let (alice, bob, acme, _) = team(app).await;
    let (cookie, _) = console_session(app, "alice@example.com", HOST, &[]).await;
    let (_, page) = page_of(app, &cookie, &format!("/console/inbox?org={acme}")).await;
    assert!(page.contains("id=\"post-announcement\""), "{page}");
    let token = form_token(&page);
    let alice_at = At::new(app, &cookie, &token, &acme);
    let (status, page) = alice_at
        .post(
            "/console/inbox",
            &[
                ("action", "post"),
                ("title", "Freeze"),
                ("body", "No deploys on Friday"),
                ("severity", "warning"),
                ("startsAt", ""),
                ("endsAt", "2099-01-01T00:00"),
                ("dismissible", "on"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("announcement Freeze posted"), "{page}");
    let posted = managed(app, &alice, &acme).await;
    assert_eq!(posted.len(), 1);
    assert_eq!(posted[0]["severity"], "warning");
    assert_eq!(posted[0]["endsAt"], "2099-01-01T00:00:00Z");
    assert_eq!(posted[0]["dismissible"], true);
    let id = posted[0]["id"].as_str().unwrap().to_owned();
    // Shown as every page's banner, and in the edit list.
    let (_, page) = page_of(app, &cookie, &format!("/console/inbox?org={acme}")).await;
    assert!(page.contains(&format!("data-managed=\"{id}\"")), "{page}");
    assert!(page.contains("value=\"2099-01-01T00:00\""), "{page}");
    // Edited: severity and text, the window's end removed.
    let (status, page) = alice_at
        .post(
            "/console/inbox",
            &[
                ("action", "edit"),
                ("id", &id),
                ("title", "Freeze!"),
                ("body", "No deploys this week"),
                ("severity", "critical"),
                ("startsAt", ""),
                ("endsAt", ""),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("announcement Freeze! changed"), "{page}");
    let edited = managed(app, &alice, &acme).await;
    assert_eq!(edited[0]["title"], "Freeze!");
    assert_eq!(edited[0]["severity"], "critical");
    assert_eq!(edited[0]["endsAt"], Value::Null);
    assert_eq!(edited[0]["dismissible"], false);
    // A date that is not one: the console's refusal, nothing changed.
    let (status, page) = alice_at
        .post(
            "/console/inbox",
            &[
                ("action", "edit"),
                ("id", &id),
                ("title", "X"),
                ("body", "Y"),
                ("severity", "info"),
                ("endsAt", "next week"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert_eq!(managed(app, &alice, &acme).await[0]["title"], "Freeze!");
    // The API's refusal (an empty title) shown, nothing changed.
    let (status, page) = alice_at
        .post(
            "/console/inbox",
            &[
                ("action", "edit"),
                ("id", &id),
                ("title", ""),
                ("body", "Y"),
                ("severity", "info"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert!(page.contains("Refused: "), "{page}");
    assert_eq!(managed(app, &alice, &acme).await[0]["title"], "Freeze!");

    // A Member sees no form; posting anyway is the API's refusal.
    let (bob_cookie, _) = console_session(app, "bob@example.com", HOST, &[]).await;
    let (_, page) = page_of(app, &bob_cookie, &format!("/console/inbox?org={acme}")).await;
    assert!(!page.contains("id=\"post-announcement\""));
    assert!(page.contains("Freeze!"), "the Member sees it");
    let bob_token = form_token(&page);
    let bob_at = At::new(app, &bob_cookie, &bob_token, &acme);
    for fields in [
        vec![
            ("action", "post"),
            ("title", "Mine"),
            ("body", "b"),
            ("severity", "info"),
        ],
        vec![("action", "remove"), ("id", id.as_str())],
    ] {
        let (status, page) = bob_at.post("/console/inbox", &fields).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{page}");
        assert!(page.contains("Refused: "), "{page}");
    }
    app.by(&bob)
        .org(&acme)
        .get("/api/messages/announcements?view=managed")
        .await
        .expect(StatusCode::FORBIDDEN);
    assert_eq!(managed(app, &alice, &acme).await.len(), 1);
    // Removed by the admin.
    let (status, page) = alice_at
        .post("/console/inbox", &[("action", "remove"), ("id", &id)])
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(managed(app, &alice, &acme).await.is_empty());
}

async fn templates_are_applied_and_policies_cloned_from_their_page(app: &TestApp) {
    let app = &app.beside(&[("QUOTA_TIER_DEVELOPER_SEATS", "-1")]).await;
    let (system, root) = app.system().await;
    let template = app
        .rule(
            &root,
            &system,
            json!({"name": "Pinned versions", "target": "pipeline", "severity": "error",
                   "field": "props.version", "operator": "neq", "value": "latest", "isTemplate": true}),
        )
        .await;
    let policy = app
        .by(&root)
        .org(&system)
        .post("/api/compliance/policies")
        .json(json!({"name": "Supply chain", "ruleIds": [template], "isTemplate": true}))
        .await
        .expect(StatusCode::CREATED)
        .id();
    let (alice, _bob, acme, _) = team(app).await;
    let (cookie, _) = console_session(app, "alice@example.com", HOST, &[]).await;
    let (status, page) = page_of(
        app,
        &cookie,
        &format!("/console/rules/templates?org={acme}"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    // What each adds is shown before applying it.
    let row = page
        .split(&format!("data-template=\"{template}\""))
        .nth(1)
        .unwrap();
    assert!(row.contains("props.version neq latest"), "{row}");
    let listed = page
        .split(&format!("data-policy=\"{policy}\""))
        .nth(1)
        .unwrap();
    assert!(listed.contains("Adds: Pinned versions"), "{listed}");
    let token = form_token(&page);
    let alice_at = At::new(app, &cookie, &token, &acme);
    let (status, page) = alice_at
        .post(
            "/console/rules/templates",
            &[
                ("action", "apply"),
                ("templateId", &template),
                ("name", "Our pins"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(
        page.contains("rule Our pins added from the template"),
        "{page}"
    );
    let Answer(_, rules) = app.by(&alice).org(&acme).get("/api/compliance/rules").await;
    let names: Vec<&str> = rules["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Our pins"]);
    let (status, page) = alice_at
        .post(
            "/console/rules/templates",
            &[("action", "clone"), ("templateId", &policy)],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("cloned with its rules"), "{page}");
    let Answer(_, policies) = app
        .by(&alice)
        .org(&acme)
        .get("/api/compliance/policies")
        .await;
    assert_eq!(pagination(&policies).total, 1, "{policies}");
    // The organization's policy lists its own copies by name.
    let (_, page) = page_of(
        app,
        &cookie,
        &format!("/console/rules/templates?org={acme}"),
    )
    .await;
    let own = page.split("id=\"policies\"").nth(1).unwrap();
    assert!(
        own.contains("Supply chain") && own.contains("Rules: Pinned versions"),
        "{own}"
    );
    // A template that does not exist: the API's refusal; a Member's attempt: refused.
    let (status, page) = alice_at
        .post(
            "/console/rules/templates",
            &[("action", "apply"), ("templateId", "nope")],
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{page}");
    let (bob_cookie, _) = console_session(app, "bob@example.com", HOST, &[]).await;
    let (_, page) = page_of(
        app,
        &bob_cookie,
        &format!("/console/rules/templates?org={acme}"),
    )
    .await;
    assert!(!page.contains("value=\"apply\""), "no Apply for a Member");
    let bob_token = form_token(&page);
    let bob_at = At::new(app, &bob_cookie, &bob_token, &acme);
    let (status, page) = bob_at
        .post(
            "/console/rules/templates",
            &[("action", "apply"), ("templateId", &template)],
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{page}");
    let Answer(_, rules) = app.by(&alice).org(&acme).get("/api/compliance/rules").await;
    assert_eq!(
        pagination(&rules).total,
        2,
        "the applied one and the policy's copy"
    );
}

async fn conversations_are_started_written_and_followed_live_in_the_browser(app: &TestApp) {
    let app = &app.beside(&[("QUOTA_TIER_DEVELOPER_SEATS", "-1")]).await;
    let (alice, bob, acme, bob_id) = team(app).await;
    // Through the page's forms: started with Bob, written to.
    let (cookie, _) = console_session(app, "alice@example.com", HOST, &[]).await;
    let (_, page) = page_of(app, &cookie, &format!("/console/conversations?org={acme}")).await;
    assert!(
        page.contains("bob@example.com"),
        "members by e-mail: {page}"
    );
    let token = form_token(&page);
    let alice_at = At::new(app, &cookie, &token, &acme);
    let with = format!("with.{bob_id}");
    let (status, page) = alice_at
        .post(
            "/console/conversations",
            &[
                ("action", "start"),
                (&with, "on"),
                ("subject", "Release"),
                ("body", "Shall we ship?"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let Answer(_, listed) = app
        .by(&bob)
        .org(&acme)
        .get("/api/messages/conversations")
        .await;
    let conversation = listed["conversations"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(listed["conversations"][0]["subject"], "Release");
    assert!(
        page.contains("id=\"conversation-messages\""),
        "the new one is open: {page}"
    );
    let (status, page) = alice_at
        .post(
            "/console/conversations",
            &[
                ("action", "write"),
                ("id", &conversation),
                ("body", "<b>now</b>"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(
        page.contains("&#60;b&#62;now&#60;/b&#62;"),
        "as text: {page}"
    );
    assert_eq!(messages_of(app, &bob, &acme, &conversation).await, 2);
    // Someone who takes no part: an empty body is the API's refusal; another's
    // conversation is not found.
    let (status, _) = alice_at
        .post(
            "/console/conversations",
            &[("action", "write"), ("id", &conversation), ("body", "")],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(messages_of(app, &bob, &acme, &conversation).await, 2);

    // In the browser: Bob's message through the API appears in Alice's open page.
    let base = serve(app.router.clone()).await;
    let b = browser().await;
    b.sign_in(&base, "alice@example.com").await;
    b.open(&format!(
        "{base}/console/conversations?org={acme}&id={conversation}"
    ))
    .await;
    assert_eq!(b.count("#conversation-messages li").await, 2);
    // The stream is open once the page has read the list again on its opening.
    tokio::time::sleep(Duration::from_millis(500)).await;
    app.by(&bob)
        .org(&acme)
        .post(format!(
            "/api/messages/conversations/{conversation}/messages"
        ))
        .json(json!({"body": "Ship it <now>"}))
        .await
        .expect(StatusCode::CREATED);
    let posted = Instant::now();
    let mut shown = String::new();
    while posted.elapsed() < Duration::from_secs(2) {
        shown = b.text("#conversation-messages").await;
        if shown.contains("Ship it <now>") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        shown.contains("bob@example.com") && shown.contains("Ship it <now>"),
        "within 2 s: {shown}"
    );
    assert_eq!(b.count("#conversation-messages li").await, 3);
    b.shot("conversation").await;
    // Written in the page by keyboard-free form use, and no duplicate from the stream.
    b.type_into("#message", "Done").await;
    b.click("#send").await;
    for _ in 0..100 {
        if b.text("main").await.contains("the message was sent") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(b.count("#conversation-messages li").await, 4);
    assert_eq!(messages_of(app, &alice, &acme, &conversation).await, 4);
}

/// Waits for the page's confirmation (or fails with the page's refusal).
async fn confirmed(b: &super::console::Browser, what: &str) {
    for _ in 0..200 {
        if b.count("#notice").await > 0 {
            let notice = b.text("#notice").await;
            assert!(notice.contains(what), "{notice}");
            return;
        }
        if b.count("#error").await > 0 {
            panic!("refused: {}", b.text("#error").await);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no confirmation of {what}");
}

async fn the_inventory_and_the_announcements_work_in_the_browser(app: &TestApp) {
    let app = &app.beside(&[("QUOTA_TIER_DEVELOPER_SEATS", "-1")]).await;
    let (alice, _bob, acme, _) = team(app).await;
    private_only(app, &alice, &acme, "pipeline").await;
    let base = serve(app.router.clone()).await;
    let b = browser().await;
    b.sign_in(&base, "alice@example.com").await;

    // A pipeline pasted as YAML, then one the rules block.
    b.open(&format!("{base}/console/inventory?org={acme}"))
        .await;
    b.click("details:has(#add-pipeline) > summary").await;
    b.type_into(
        "#pipeline",
        "project: web\norganization: acme\npipelineName: typed\naccessModifier: private\nprops: {}\n",
    )
    .await;
    b.click("#create-pipeline").await;
    confirmed(&b, "pipeline typed created (pass)").await;
    b.click("details:has(#add-pipeline) > summary").await;
    b.type_into(
        "#pipeline",
        r#"{"project": "web", "organization": "acme", "pipelineName": "open", "accessModifier": "public", "props": {}}"#,
    )
    .await;
    b.click("#create-pipeline").await;
    let violations = b.text("#violations").await;
    assert!(violations.contains("Private pipelines"), "{violations}");
    b.shot("inventory-blocked").await;
    assert_eq!(count(app, &alice, &acme, "/api/pipelines?limit=1").await, 1);

    // A plugin's ZIP chosen in the file field.
    let zip = std::env::temp_dir().join(format!("plugin-{}.zip", uuid::Uuid::new_v4()));
    std::fs::write(&zip, plugin_zip("linter", "1.0.0")).unwrap();
    b.open(&format!("{base}/console/inventory?org={acme}"))
        .await;
    b.click("details:has(#upload-plugin) > summary").await;
    b.client
        .find(fantoccini::Locator::Css("#plugin"))
        .await
        .unwrap()
        .send_keys(zip.to_str().unwrap())
        .await
        .unwrap();
    b.click("#upload").await;
    confirmed(&b, "plugin linter@1.0.0 uploaded").await;
    let _ = std::fs::remove_file(&zip);
    assert_eq!(count(app, &alice, &acme, "/api/plugins?limit=1").await, 1);

    // An announcement posted from the inbox shows as the banner.
    b.open(&format!("{base}/console/inbox?org={acme}")).await;
    b.click("details:has(#post-announcement) > summary").await;
    b.type_into("#new-title", "Maintenance").await;
    b.type_into("#new-body", "Saturday 02:00 UTC").await;
    b.client
        .find(fantoccini::Locator::Css("#new-severity"))
        .await
        .unwrap()
        .select_by_value("critical")
        .await
        .unwrap();
    b.click("#post").await;
    confirmed(&b, "announcement Maintenance posted").await;
    let banner = b.text("section.announcement").await;
    assert!(
        banner.to_lowercase().contains("critical:") && banner.contains("Maintenance"),
        "{banner}"
    );
    let posted = managed(app, &alice, &acme).await;
    assert_eq!(posted[0]["severity"], "critical");
    assert_eq!(posted[0]["body"], "Saturday 02:00 UTC");
    b.shot("inbox-announcements").await;
}

async fn a_template_and_the_settings_work_in_the_browser(app: &TestApp) {
    let app = &app.beside(&[("QUOTA_TIER_DEVELOPER_SEATS", "-1")]).await;
    let (system, root) = app.system().await;
    let template = app
        .rule(
            &root,
            &system,
            json!({"name": "No latest", "target": "plugin", "severity": "warning",
                   "field": "version", "operator": "neq", "value": "latest", "isTemplate": true}),
        )
        .await;
    let (alice, _bob, acme, _) = team(app).await;
    let base = serve(app.router.clone()).await;
    let b = browser().await;
    b.sign_in(&base, "alice@example.com").await;
    b.open(&format!("{base}/console/rules?org={acme}")).await;
    b.click("#templates-link").await;
    assert!(b.lands_on("/console/rules/templates").await);
    b.type_into(&format!("#name-{template}"), "Pinned plugins")
        .await;
    b.click(&format!("tr[data-template='{template}'] button"))
        .await;
    confirmed(&b, "rule Pinned plugins added from the template").await;
    b.shot("templates").await;
    let Answer(_, rules) = app.by(&alice).org(&acme).get("/api/compliance/rules").await;
    assert_eq!(rules["rules"][0]["name"], "Pinned plugins", "{rules}");
    assert_eq!(rules["rules"][0]["operator"], "neq", "{rules}");

    b.open(&format!("{base}/console/settings?org={acme}")).await;
    b.click("#emailEnabled").await;
    b.client
        .find(fantoccini::Locator::Css("#digestMode"))
        .await
        .unwrap()
        .select_by_value("weekly")
        .await
        .unwrap();
    b.click("#save-settings").await;
    confirmed(&b, "the notification settings were saved").await;
    let saved: Preference = app
        .by(&alice)
        .org(&acme)
        .get("/api/compliance/notification-preferences")
        .await
        .data();
    assert_eq!(
        (saved.digest_mode.as_str(), saved.email_enabled),
        ("weekly", true)
    );
}

on_both_backends!(
    a_template_and_the_settings_work_in_the_browser,
    the_inventory_and_the_announcements_work_in_the_browser,
    the_inventory_adds_pipelines_and_uploads_plugins_and_shows_blocks,
    admins_post_edit_and_remove_announcements_from_the_inbox,
    templates_are_applied_and_policies_cloned_from_their_page,
    conversations_are_started_written_and_followed_live_in_the_browser,
);
