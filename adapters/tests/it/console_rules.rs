//! The Rules pages of the console: the editor writes, previews (through the dry-run
//! endpoint with the rule being written), changes and deletes rules, shows the
//! API's problems beside the fields it names, and compares two versions; the
//! dry-run endpoint's `rule` itself.

use super::console::{
    access, console_session, form_token, owner, page_of, post_form, register, HOST,
};
use super::*;
use crate::api::{pagination, Answer};
use adapters::code::ErrorCode;
use adapters::http::wire::{OrgRule, Pipeline, Verdict};

/// Text as the pages write it (askama's escaping).
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&#34;")
        .replace('\'', "&#39;")
}

const PRIVATE_ONLY: &[(&str, &str)] = &[
    ("name", "Private only"),
    ("target", "pipeline"),
    ("severity", "error"),
    ("field", "accessModifier"),
    ("operator", "eq"),
    ("value", "private"),
    ("priority", "5"),
    ("tags", "visibility"),
    ("scope", "org"),
    ("conditionMode", "all"),
];

fn private_only_rule() -> Value {
    json!({"name": "Private only", "target": "pipeline", "severity": "error",
           "field": "accessModifier", "operator": "eq", "value": "private", "priority": 5,
           "tags": ["visibility"], "scope": "org", "conditionMode": "all", "conditions": [],
           "propagateToChildren": false})
}

/// The editor's form: `fields` over [`PRIVATE_ONLY`], with the page's token.
fn form<'a>(
    token: &'a str,
    org: &'a str,
    action: &'a str,
    fields: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    let mut all: Vec<(&str, &str)> = vec![("csrf", token), ("org", org), ("action", action)];
    for (name, value) in PRIVATE_ONLY {
        if !fields.iter().any(|(n, _)| n == name) {
            all.push((name, value));
        }
    }
    all.extend_from_slice(fields);
    all
}

async fn rules_of(app: &TestApp, token: &str, org: &str) -> Vec<Value> {
    let Answer(status, body) = app.by(token).org(org).get("/api/compliance/rules").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["rules"].as_array().unwrap().clone()
}

async fn the_rule_editor_writes_previews_compares_and_deletes(app: &TestApp) {
    let (alice, acme) = owner(app, "alice@example.com", "acme").await;
    let (cookie, _) = console_session(app, "alice@example.com", HOST, &[]).await;
    let (status, page) = page_of(app, &cookie, "/console/rules").await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("id=\"new-rule\""), "an owner may write rules");
    let (status, page) = page_of(app, &cookie, "/console/rules/edit").await;
    assert_eq!(status, StatusCode::OK);
    let token = form_token(&page);
    for operator in ["eq", "notContains", "lengthLt", "countGt"] {
        assert!(
            page.contains(&format!(">{operator}</option>")),
            "{operator}"
        );
    }

    // The preview is the dry-run endpoint's answer for the rule being written.
    let public = r#"{"accessModifier": "public", "pipelineName": "web"}"#;
    let (status, page) = post_form(
        app,
        &cookie,
        "/console/rules/edit",
        &form(&token, &acme, "preview", &[("attributes", public)]),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let verdict: Verdict = app
        .by(&alice)
        .org(&acme)
        .post("/api/compliance/validate/pipeline/dry-run")
        .json(
            json!({"attributes": serde_json::from_str::<Value>(public).unwrap(),
                        "rule": private_only_rule()}),
        )
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(verdict.violations.len(), 1, "{verdict:?}");
    assert!(verdict.blocked);
    assert!(
        page.contains("the preview finds 1 violation(s) and blocks"),
        "{page}"
    );
    let message = verdict.violations[0].message();
    let message = message.as_str();
    assert!(page.contains(&escaped(message)), "{message}");
    assert!(page.contains("class=\"this-rule\""));
    // The form keeps what was written.
    assert!(page.contains("value=\"Private only\""));
    // YAML passes, as the endpoint says.
    let (_, page) = post_form(
        app,
        &cookie,
        "/console/rules/edit",
        &form(
            &token,
            &acme,
            "preview",
            &[("attributes", "accessModifier: private\n")],
        ),
    )
    .await;
    assert!(page.contains("the preview passes"), "{page}");
    assert!(
        rules_of(app, &alice, &acme).await.is_empty(),
        "a preview stores nothing"
    );

    // The API's problems stand beside the fields they name; nothing is stored.
    let (status, page) = post_form(
        app,
        &cookie,
        "/console/rules/edit",
        &form(&token, &acme, "save", &[("operator", "in")]),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert!(page.contains("id=\"value-problem\""), "{page}");
    assert!(page.contains("aria-invalid=\"true\" aria-describedby=\"value-problem\""));
    // The form's own: a priority that is no number, conditions that are no list.
    let (status, page) = post_form(
        app,
        &cookie,
        "/console/rules/edit",
        &form(
            &token,
            &acme,
            "save",
            &[("priority", "high"), ("conditions", "{}")],
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(page.contains("id=\"priority-problem\"") && page.contains("id=\"conditions-problem\""));
    let (status, page) = post_form(
        app,
        &cookie,
        "/console/rules/edit",
        &form(&token, &acme, "preview", &[("attributes", "[1, 2]")]),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(page.contains("id=\"attributes-problem\""));
    assert!(rules_of(app, &alice, &acme).await.is_empty());

    // Saved: the list shows the rule with its value, as the API stores it.
    let conditions = r#"[{"field": "pipelineName", "operator": "notEmpty"}]"#;
    let (status, page) = post_form(
        app,
        &cookie,
        "/console/rules/edit",
        &form(&token, &acme, "save", &[("conditions", conditions)]),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(
        page.contains("rule Private only saved at version 1"),
        "{page}"
    );
    let stored = rules_of(app, &alice, &acme).await;
    assert_eq!(stored.len(), 1);
    let rule = stored[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(stored[0]["value"], "private");
    assert_eq!(stored[0]["priority"], 5);
    assert_eq!(stored[0]["tags"], json!(["visibility"]));
    assert_eq!(stored[0]["conditions"][0]["operator"], "notEmpty");
    assert!(
        page.contains("<code class=\"value\">private</code>"),
        "{page}"
    );

    // Edited: the form holds the stored rule; a save is version 2.
    let (_, page) = page_of(
        app,
        &cookie,
        &format!("/console/rules/edit?org={acme}&rule={rule}"),
    )
    .await;
    assert!(page.contains(&format!("name=\"ruleId\" value=\"{rule}\"")));
    assert!(
        page.contains("id=\"value\" name=\"value\" value=\"private\""),
        "{page}"
    );
    assert!(page.contains("notEmpty"), "the conditions are shown");
    let (status, page) = post_form(
        app,
        &cookie,
        "/console/rules/edit",
        &form(
            &token,
            &acme,
            "save",
            &[("ruleId", &rule), ("value", "internal")],
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("rule Private only saved at version 2"));
    let one: OrgRule = app
        .by(&alice)
        .org(&acme)
        .get(format!("/api/compliance/rules/{rule}"))
        .await
        .data();
    assert_eq!((&one.rule.value, one.rule.version), (&json!("internal"), 2));

    // The history: the two versions side by side, the changed line on each side.
    let (_, page) = page_of(
        app,
        &cookie,
        &format!("/console/rules?org={acme}&history={rule}"),
    )
    .await;
    assert!(page.contains("Version 1 beside version 2"), "{page}");
    let changed: Vec<&str> = page
        .split("<tr class=\"changed\">")
        .skip(1)
        .filter_map(|rest| rest.split("</tr>").next())
        .collect();
    assert!(
        changed
            .iter()
            .any(|row| row.contains("− ") && row.contains("private")),
        "{page}"
    );
    assert!(changed
        .iter()
        .any(|row| row.contains("+ ") && row.contains("internal")));
    assert!(
        !changed.iter().any(|row| row.contains("accessModifier")),
        "an unchanged line is not marked"
    );

    // Deleted through the list.
    let (status, page) = post_form(
        app,
        &cookie,
        "/console/rules",
        &[
            ("csrf", &token),
            ("org", &acme),
            ("action", "delete"),
            ("ruleId", &rule),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains(&format!("rule {rule} deleted")));
    assert!(rules_of(app, &alice, &acme).await.is_empty());
}

async fn a_member_sees_the_apis_refusal_and_nothing_changes(app: &TestApp) {
    let (alice, acme) = owner(app, "alice@example.com", "acme").await;
    let carol_id = register(app, "carol@example.com").await;
    app.by(&alice)
        .post(format!("/api/organization/{acme}/members"))
        .json(json!({"userId": carol_id, "role": "member"}))
        .await
        .expect(StatusCode::CREATED);
    let rule = app
        .by(&alice)
        .org(&acme)
        .post("/api/compliance/rules")
        .json(private_only_rule())
        .await
        .expect(StatusCode::CREATED)
        .id();
    let carol = access(app, "carol@example.com").await;
    let Answer(status, refused) = app
        .by(&carol)
        .org(&acme)
        .post("/api/compliance/rules")
        .json(private_only_rule())
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");

    let (cookie, _) = console_session(app, "carol@example.com", HOST, &[]).await;
    let (_, page) = page_of(app, &cookie, "/console/rules").await;
    assert!(!page.contains("id=\"new-rule\"") && !page.contains("value=\"delete\""));
    let token = form_token(&page);
    for (path, fields) in [
        (
            "/console/rules/edit",
            form(&token, &acme, "save", &[("name", "Other")]),
        ),
        (
            "/console/rules/edit",
            form(&token, &acme, "save", &[("ruleId", &rule), ("value", "x")]),
        ),
        (
            "/console/rules",
            vec![
                ("csrf", token.as_str()),
                ("org", acme.as_str()),
                ("action", "delete"),
                ("ruleId", rule.as_str()),
            ],
        ),
    ] {
        let (status, page) = post_form(app, &cookie, path, &fields).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{page}");
        let message = refused["message"].as_str().unwrap();
        assert!(page.contains(&escaped(message)), "{message}: {page}");
    }
    let stored = rules_of(app, &alice, &acme).await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0]["value"], "private");
    assert_eq!(stored[0]["version"], 1);
}

/// `rule` in a dry run: checked as a create would be, evaluated in place of the
/// stored rule with its id or beside the others; refused by a live check; nothing
/// recorded.
async fn a_dry_run_evaluates_the_rule_being_written(app: &TestApp) {
    let (alice, acme) = owner(app, "alice@example.com", "acme").await;
    let stored: OrgRule = app
        .by(&alice)
        .org(&acme)
        .post("/api/compliance/rules")
        .json(private_only_rule())
        .await
        .data();
    let dry = |body: Value| {
        let (alice, acme) = (alice.clone(), acme.clone());
        async move {
            app.by(&alice)
                .org(&acme)
                .post("/api/compliance/validate/pipeline/dry-run")
                .json(body)
                .await
        }
    };
    let public = json!({"accessModifier": "public"});
    let plain: Verdict = dry(json!({"attributes": public}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(plain.violations.len(), 1);
    // The stored rule, rewritten to allow public: nothing is violated.
    let mut edited = json!(stored);
    edited["value"] = json!("public");
    let replaced: Verdict = dry(json!({"attributes": public, "rule": edited}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert!(replaced.violations.is_empty(), "{replaced:?}");
    assert!(!replaced.blocked);
    // A new rule is evaluated beside the stored ones.
    let named = json!({"name": "Named", "target": "pipeline", "severity": "warning",
                       "field": "pipelineName", "operator": "exists"});
    let beside: Verdict = dry(json!({"attributes": public, "rule": named}))
        .await
        .data();
    let names: Vec<&str> = beside.violations.iter().map(|v| v.rule_name()).collect();
    assert_eq!(names.len(), 2, "{beside:?}");
    assert!(names.contains(&"Named") && names.contains(&"Private only"));
    // Checked as a create is: every problem with its field.
    let mut wrong = private_only_rule();
    wrong["operator"] = json!("in");
    let Answer(status, refused) = dry(json!({"attributes": public, "rule": wrong})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(code(status, &refused), ErrorCode::ValidationError);
    assert_eq!(refused["details"]["problems"][0]["field"], "value");
    // Another target than the path's.
    let mut plugin = private_only_rule();
    plugin["target"] = json!("plugin");
    let Answer(status, refused) = dry(json!({"attributes": public, "rule": plugin})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .starts_with("rule.target"),
        "{refused}"
    );
    // The key written escaped is refused, not taken for no rule at all.
    let escaped_key =
        format!(r#"{{"attributes": {{"accessModifier": "public"}}, "\u0072ule": {edited}}}"#);
    let (status, refused) = app
        .send(
            Request::post("/api/compliance/validate/pipeline/dry-run")
                .header("authorization", format!("Bearer {alice}"))
                .header("x-org-id", &acme)
                .header("content-type", "application/json")
                .body(Body::from(escaped_key))
                .unwrap(),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert!(
        refused["message"].as_str().unwrap().contains("not escaped"),
        "{refused}"
    );
    // A live check never evaluates a draft, and records nothing when refused.
    let Answer(_, before) = app.by(&alice).org(&acme).get("/api/compliance/audit").await;
    let Answer(status, refused) = app
        .by(&alice)
        .org(&acme)
        .post("/api/compliance/validate/pipeline")
        .json(json!({"attributes": public, "rule": edited, "entityId": "e-1"}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert!(
        refused["message"].as_str().unwrap().starts_with("rule:"),
        "{refused}"
    );
    let Answer(_, after) = app.by(&alice).org(&acme).get("/api/compliance/audit").await;
    assert_eq!(pagination(&before).total, pagination(&after).total);
    // The stored rule is as it was.
    assert_eq!(rules_of(app, &alice, &acme).await[0]["value"], "private");
}

/// In the browser, by keyboard and mouse: a rule written, previewed and saved, at
/// 1280 and 375 px wide; no CSP violation.
async fn a_rule_is_written_in_the_browser(app: &TestApp) {
    use super::console::{browser, csp_violations, serve};
    let (alice, acme) = owner(app, "alice@example.com", "acme").await;
    let base = serve(app.router.clone()).await;
    let b = browser().await;
    let violations_before = csp_violations(app).await;
    b.sign_in(&base, "alice@example.com").await;
    b.open(&format!("{base}/console/rules?org={acme}")).await;
    b.click("#new-rule").await;
    assert!(b.lands_on("/console/rules/edit").await);
    b.type_into("#name", "Private only").await;
    b.type_into("#field", "accessModifier").await;
    b.type_into("#value", "private").await;
    b.type_into("#attributes", "accessModifier: public").await;
    b.shot("rule-editor-1280").await;
    b.click("#preview-rule").await;
    let preview = b.text("#preview").await;
    assert!(preview.contains("Blocked: 1 violation(s)"), "{preview}");
    assert!(preview.contains("Private only (this rule)"), "{preview}");
    b.shot("rule-preview-1280").await;
    b.client.set_window_size(375, 900).await.unwrap();
    b.shot("rule-preview-375").await;
    let overflow: bool = serde_json::from_value(
        b.client
            .execute(
                "return document.documentElement.scrollWidth > window.innerWidth + 1;",
                vec![],
            )
            .await
            .unwrap(),
    )
    .unwrap();
    assert!(!overflow, "the editor fits 375 px");
    b.client.set_window_size(1280, 1000).await.unwrap();
    b.click("#save-rule").await;
    // The list answers the save (waited for by its table: the editor had a notice
    // too), with its confirmation.
    assert_eq!(b.text("#rules code.value").await, "private");
    let notice = b.text("#notice").await;
    assert!(
        notice.contains("rule Private only saved at version 1"),
        "{notice}"
    );
    b.shot("rules-1280").await;
    b.client.set_window_size(375, 900).await.unwrap();
    b.shot("rules-375").await;
    let stored = rules_of(app, &alice, &acme).await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0]["value"], "private");
    assert_eq!(csp_violations(app).await, violations_before);
    b.client.clone().close().await.unwrap();
}

async fn the_preview_runs_on_a_chosen_entity_of_the_inventory(app: &TestApp) {
    let (alice, acme) = owner(app, "alice@example.com", "acme").await;
    let pipeline = app
        .by(&alice)
        .org(&acme)
        .post("/api/pipelines")
        .json(super::fixtures::pipeline_as("open-one", "public"))
        .await
        .expect(StatusCode::CREATED)
        .id();
    let (cookie, _) = console_session(app, "alice@example.com", HOST, &[]).await;
    let (_, page) = page_of(app, &cookie, &format!("/console/rules/edit?org={acme}")).await;
    assert!(
        page.contains(&format!("<option value=\"{pipeline}\">open-one</option>")),
        "{page}"
    );
    let token = form_token(&page);
    let (status, page) = post_form(
        app,
        &cookie,
        "/console/rules/edit",
        &form(
            &token,
            &acme,
            "preview",
            &[("entity", &pipeline), ("attributes", "")],
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    // The entity's document is shown in place of a pasted one, and the verdict is
    // the dry-run endpoint's on it.
    let stored: Pipeline = app
        .by(&alice)
        .org(&acme)
        .get(format!("/api/pipelines/{pipeline}"))
        .await
        .data();
    let document = json!({
        "project": stored.project, "organization": stored.organization,
        "pipelineName": "open-one", "accessModifier": "public", "props": stored.props
    });
    assert!(
        page.contains(&escaped(&serde_json::to_string_pretty(&document).unwrap())),
        "{page}"
    );
    let verdict: Verdict = app
        .by(&alice)
        .org(&acme)
        .post("/api/compliance/validate/pipeline/dry-run")
        .json(json!({"attributes": document, "entityId": pipeline, "rule": private_only_rule()}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert!(verdict.blocked);
    let message = verdict.violations[0].message();
    let message = message.as_str();
    let preview = page.split("id=\"preview\"").nth(1).unwrap();
    assert!(preview.contains("Blocked"), "{preview}");
    assert!(preview.contains(&escaped(message)), "{preview}");
    // An entity that is not one of the organization's: the API's refusal.
    let (status, page) = post_form(
        app,
        &cookie,
        "/console/rules/edit",
        &form(&token, &acme, "preview", &[("entity", "no-such-pipeline")]),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{page}");
    assert!(
        rules_of(app, &alice, &acme).await.is_empty(),
        "a preview stores nothing"
    );
}

on_both_backends!(
    the_preview_runs_on_a_chosen_entity_of_the_inventory,
    the_rule_editor_writes_previews_compares_and_deletes,
    a_member_sees_the_apis_refusal_and_nothing_changes,
    a_dry_run_evaluates_the_rule_being_written,
    a_rule_is_written_in_the_browser,
);
