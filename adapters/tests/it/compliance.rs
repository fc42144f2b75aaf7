//! The compliance API (document 1, SEMANTICS.md 1).

use super::*;
use crate::api::{pagination, Answer};
use adapters::code::ErrorCode;
use adapters::http::wire::{
    AutoSubscribed, Exemption, ExemptionIds, OrgRule, Pin, Policy, Preference, RuleImpact,
    RuleVersion, Templates, Verdict,
};
use compliance_core::{Evaluation, ExemptionStatus, Rule};
use compliance_core::{Scope, Severity};

fn rule(name: &str, field: &str, operator: &str, value: Value, severity: &str) -> Value {
    json!({"name": name, "target": "plugin", "severity": severity, "field": field, "operator": operator, "value": value})
}

fn semver(name: &str) -> Value {
    rule(
        name,
        "version",
        "regex",
        json!("^\\d+\\.\\d+\\.\\d+$"),
        "error",
    )
}

impl TestApp {
    pub async fn validate(
        &self,
        token: &str,
        org: &str,
        attributes: Value,
        entity: Option<&str>,
        dry_run: bool,
    ) -> Answer {
        let path = if dry_run {
            "/api/compliance/validate/plugin/dry-run"
        } else {
            "/api/compliance/validate/plugin"
        };
        let mut body = json!({"attributes": attributes});
        if let Some(entity) = entity {
            body["entityId"] = json!(entity);
        }
        self.by(token).org(org).post(path).json(body).await
    }

    pub async fn blocked(
        &self,
        token: &str,
        org: &str,
        attributes: Value,
        entity: Option<&str>,
    ) -> bool {
        self.validate(token, org, attributes, entity, true)
            .await
            .expect(StatusCode::OK)
            .data::<Verdict>()
            .blocked
    }

    pub async fn rule(&self, token: &str, org: &str, body: Value) -> String {
        self.by(token)
            .org(org)
            .post("/api/compliance/rules")
            .json(body)
            .await
            .expect(StatusCode::CREATED)
            .data::<OrgRule>()
            .rule
            .id
    }

    /// Bootstraps the system organization (once); returns (its id, the root token).
    pub async fn system(&self) -> (String, String) {
        let root = self.token("root", ROOT_EMAIL);
        if let Some(system) = self.store.system_organization().await.unwrap() {
            return (system.id, root);
        }
        let system = self
            .by(&root)
            .post("/api/organization")
            .json(json!({"name": "system"}))
            .await
            .expect(StatusCode::CREATED)
            .id();
        (system, root)
    }
}

async fn the_life_of_a_rule(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let latest = json!({"name": "eslint", "version": "latest"});
    assert!(
        !app.blocked(&alice, &acme, latest.clone(), None).await,
        "no rules yet"
    );
    let id = app.rule(&alice, &acme, semver("semver")).await;
    let got: OrgRule = app
        .by(&alice)
        .org(&acme)
        .get(format!("/api/compliance/rules/{id}"))
        .await
        .data();
    assert_eq!(
        (got.rule.version, got.rule.scope, got.rule.priority),
        (1, Scope::Org, 0)
    );
    let verdict: Verdict = app
        .validate(&alice, &acme, latest.clone(), None, true)
        .await
        .expect(StatusCode::OK)
        .data();
    assert!(verdict.blocked);
    let violation = &verdict.violations[0];
    assert_eq!(
        (
            violation.rule_name(),
            violation.severity(),
            violation.field()
        ),
        ("semver", Severity::Error, "version")
    );

    // Every bad field is named; nothing is stored.
    let cases = [
        (
            rule("bad regex", "version", "regex", json!("("), "error"),
            "value",
        ),
        (
            rule(
                "long regex",
                "version",
                "regex",
                json!("a".repeat(101)),
                "error",
            ),
            "value",
        ),
        (
            rule("bad in", "version", "in", json!("x"), "error"),
            "value",
        ),
        (
            rule("bad path", "a..b", "exists", json!(null), "error"),
            "field",
        ),
        (
            rule("bad fn", "$size(a)", "exists", json!(null), "error"),
            "field",
        ),
        (
            json!({"name": "prio", "target": "plugin", "severity": "error", "field": "a", "operator": "exists", "priority": 10001}),
            "priority",
        ),
        (
            json!({"name": "dep", "target": "plugin", "severity": "error", "field": "a", "operator": "exists",
                "conditions": [{"field": "b", "operator": "exists", "dependsOnRule": "ghost"}]}),
            "conditions[0].dependsOnRule",
        ),
    ];
    for (body, field) in cases {
        let Answer(status, response) = app
            .by(&alice)
            .org(&acme)
            .post("/api/compliance/rules")
            .json(body)
            .await;
        assert_eq!(
            code(status, &response),
            ErrorCode::ValidationError,
            "{response}"
        );
        assert_eq!(
            response["details"]["problems"][0]["field"], field,
            "{response}"
        );
    }
    app.by(&alice).org(&acme).post("/api/compliance/rules").json(json!({"name": "x", "target": "plugin", "severity": "error", "field": "a", "operator": "bogus"})).await.refused(ErrorCode::ValidationError);
    app.by(&alice)
        .org(&acme)
        .post("/api/compliance/rules")
        .json(semver("SEMVER"))
        .await
        .refused(ErrorCode::Conflict);
    let mut published = semver("mine to publish");
    published["scope"] = json!("published");
    let Answer(status, body) = app
        .by(&alice)
        .org(&acme)
        .post("/api/compliance/rules")
        .json(published)
        .await;
    assert_eq!(
        code(status, &body),
        ErrorCode::Forbidden,
        "only the system organization publishes"
    );

    // Update: version 2, history says what changed.
    let mut warning = semver("semver");
    warning["severity"] = json!("warning");
    let updated: OrgRule = app
        .by(&alice)
        .org(&acme)
        .put(format!("/api/compliance/rules/{id}"))
        .json(warning)
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(updated.rule.version, 2);
    assert!(
        !app.blocked(&alice, &acme, latest.clone(), None).await,
        "a warning never blocks, and the cache saw the change"
    );
    let Answer(_, list) = app
        .by(&alice)
        .org(&acme)
        .get("/api/compliance/rules?severity=warning&name=SEM")
        .await;
    assert_eq!(pagination(&list).total, 1);
    let Answer(_, list) = app
        .by(&alice)
        .org(&acme)
        .get("/api/compliance/rules?severity=error")
        .await;
    assert_eq!(pagination(&list).total, 0);
    app.by(&alice)
        .org(&acme)
        .get("/api/compliance/rules?target=widget")
        .await
        .refused(ErrorCode::ValidationError);

    // Delete: soft; gone from lists and from evaluation, kept in history.
    app.by(&alice)
        .org(&acme)
        .delete(format!("/api/compliance/rules/{id}"))
        .await
        .expect(StatusCode::OK);
    let Answer(_, list) = app.by(&alice).org(&acme).get("/api/compliance/rules").await;
    assert_eq!(pagination(&list).total, 0);
    let Answer(_, list) = app
        .by(&alice)
        .org(&acme)
        .get("/api/compliance/rules?includeDeleted=true")
        .await;
    assert_eq!(pagination(&list).total, 1);
    let history: Vec<RuleVersion> = app
        .by(&alice)
        .org(&acme)
        .get(format!("/api/compliance/rules/{id}/history"))
        .await
        .data();
    let actions: Vec<&Value> = history.iter().map(|h| &h.change["action"]).collect();
    assert_eq!(actions, ["create", "update", "delete"]);
    assert_eq!(history[1].change["fields"], json!(["severity"]));
    assert_eq!(history[1].changed_by, "alice");
    app.by(&alice)
        .org(&acme)
        .put(format!("/api/compliance/rules/{id}"))
        .json(semver("semver"))
        .await
        .refused(ErrorCode::NotFound);
    for action in [
        "compliance.rule.create",
        "compliance.rule.update",
        "compliance.rule.delete",
    ] {
        assert_eq!(app.audited(action).await.len(), 1, "{action}");
    }

    // A Member reads rules but cannot write them.
    app.by(&alice)
        .post(format!("/api/organization/{acme}/members"))
        .json(json!({"userId": "bob"}))
        .await;
    let bob = app.token("bob", "bob@example.com");
    app.by(&bob)
        .org(&acme)
        .get("/api/compliance/rules")
        .await
        .expect(StatusCode::OK);
    app.by(&bob)
        .org(&acme)
        .post("/api/compliance/rules")
        .json(semver("bob's"))
        .await
        .refused(ErrorCode::Forbidden);
}

async fn a_pinned_subscriber_keeps_the_old_version_and_an_unpinned_one_follows(app: &TestApp) {
    let (system, root) = app.system().await;
    let mut published = rule("no latest", "version", "neq", json!("latest"), "error");
    published["scope"] = json!("published");
    let rule_id = app.rule(&root, &system, published).await;
    let pinned = app.org("alice", "pinned-co").await;
    let follower = app.org("bob", "follower-co").await;
    let alice = app.token("alice", "alice@example.com");
    let bob = app.token("bob", "bob@example.com");
    let latest = json!({"version": "latest"});
    let beta = json!({"version": "beta"});

    let Answer(_, catalog) = app
        .by(&alice)
        .org(&pinned)
        .get("/api/compliance/published-rules")
        .await;
    assert_eq!(
        (
            catalog["rules"][0]["id"].as_str(),
            catalog["rules"][0]["subscribed"].as_bool()
        ),
        (Some(rule_id.as_str()), Some(false))
    );
    for (token, org) in [(&alice, &pinned), (&bob, &follower)] {
        app.by(token)
            .org(org)
            .post("/api/compliance/subscriptions")
            .json(json!({"ruleId": rule_id}))
            .await
            .expect(StatusCode::CREATED);
        assert!(
            !app.blocked(token, org, latest.clone(), None).await,
            "a new subscription is inactive"
        );
        app.by(token)
            .org(org)
            .patch(format!("/api/compliance/subscriptions/{rule_id}"))
            .json(json!({"isActive": true}))
            .await
            .expect(StatusCode::OK);
        assert!(
            app.blocked(token, org, latest.clone(), None).await,
            "active: enforced"
        );
    }
    app.by(&alice)
        .org(&pinned)
        .post("/api/compliance/subscriptions")
        .json(json!({"ruleId": rule_id}))
        .await
        .refused(ErrorCode::Conflict);
    let Answer(_, catalog) = app
        .by(&alice)
        .org(&pinned)
        .get("/api/compliance/published-rules")
        .await;
    assert_eq!(catalog["rules"][0]["subscribed"], true);
    let pin: Pin = app
        .by(&alice)
        .org(&pinned)
        .post(format!("/api/compliance/subscriptions/{rule_id}/pin"))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(pin.pinned_version, Some(1));

    // The system organization changes the published rule: it now forbids "beta".
    let mut v2 = rule(
        "no latest",
        "version",
        "notIn",
        json!(["latest", "beta"]),
        "error",
    );
    v2["scope"] = json!("published");
    let published: OrgRule = app
        .by(&root)
        .org(&system)
        .put(format!("/api/compliance/rules/{rule_id}"))
        .json(v2)
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(published.rule.version, 2);
    assert!(
        !app.blocked(&alice, &pinned, beta.clone(), None).await,
        "pinned to version 1"
    );
    assert!(
        app.blocked(&bob, &follower, beta.clone(), None).await,
        "following the latest version"
    );
    let Answer(_, subscriptions) = app
        .by(&alice)
        .org(&pinned)
        .get("/api/compliance/subscriptions")
        .await;
    let s = &subscriptions["subscriptions"][0];
    assert_eq!(
        (
            s["pinnedVersion"].as_u64(),
            s["latestVersion"].as_u64(),
            s["rule"]["version"].as_u64(),
            s["isActive"].as_bool()
        ),
        (Some(1), Some(2), Some(1), Some(true))
    );
    let enforced: Vec<Rule> = app
        .by(&alice)
        .org(&pinned)
        .get("/api/compliance/subscriptions/enforced")
        .await
        .data();
    assert_eq!(enforced.first().map(|r| r.version), Some(1));

    app.by(&alice)
        .org(&pinned)
        .delete(format!("/api/compliance/subscriptions/{rule_id}/pin"))
        .await
        .expect(StatusCode::OK);
    assert!(
        app.blocked(&alice, &pinned, beta.clone(), None).await,
        "unpinned: follows again"
    );
    app.by(&alice)
        .org(&pinned)
        .post("/api/compliance/subscriptions/bulk")
        .json(json!({"ruleIds": [rule_id], "isActive": false}))
        .await
        .expect(StatusCode::OK);
    assert!(!app.blocked(&alice, &pinned, latest.clone(), None).await);
    app.by(&alice)
        .org(&pinned)
        .post("/api/compliance/subscriptions/bulk")
        .json(json!({"ruleIds": [rule_id, "nope"], "isActive": true}))
        .await
        .refused(ErrorCode::NotFound);
    assert!(
        !app.blocked(&alice, &pinned, latest.clone(), None).await,
        "all or nothing"
    );
    app.by(&bob)
        .org(&follower)
        .delete(format!("/api/compliance/subscriptions/{rule_id}"))
        .await
        .expect(StatusCode::OK);
    assert!(
        !app.blocked(&bob, &follower, latest.clone(), None).await,
        "unsubscribed"
    );

    // Clone: an editable copy in the organization; auto-subscribe: everything, inactive.
    let copy: OrgRule = app
        .by(&bob)
        .org(&follower)
        .post("/api/compliance/subscriptions/clone")
        .json(json!({"ruleId": rule_id, "name": "our copy"}))
        .await
        .expect(StatusCode::CREATED)
        .data();
    assert_eq!(
        (copy.rule.scope, copy.org_id.as_str()),
        (Scope::Org, follower.as_str())
    );
    assert!(
        app.blocked(&bob, &follower, beta.clone(), None).await,
        "the copy is enforced"
    );
    let auto: AutoSubscribed = app
        .by(&bob)
        .org(&follower)
        .post("/api/compliance/subscriptions/auto-subscribe")
        .await
        .data();
    assert_eq!(auto.subscribed, 1);
}

async fn parents_propagate_rules_to_their_teams(app: &TestApp) {
    let root = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let team = app
        .by(&alice)
        .post("/api/organization")
        .json(json!({"name": "team", "parentOrgId": root}))
        .await
        .id();
    let mut inherited = semver("inherited");
    inherited["propagateToChildren"] = json!(true);
    app.rule(&alice, &root, inherited).await;
    app.rule(
        &alice,
        &root,
        rule("root only", "dockerfile", "exists", json!(null), "error"),
    )
    .await;
    let doc = json!({"version": "1.0.0"});
    assert!(
        !app.blocked(&alice, &team, doc.clone(), None).await,
        "only the propagated rule reaches the team"
    );
    assert!(
        app.blocked(&alice, &team, json!({"version": "x"}), None)
            .await
    );
    assert!(
        app.blocked(&alice, &root, doc, None).await,
        "the root enforces both"
    );
}

async fn exemptions_waive_only_when_approved_and_unexpired(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let rule_id = app.rule(&alice, &acme, semver("semver")).await;
    let bad = json!({"version": "latest"});
    app.by(&alice)
        .post(format!("/api/organization/{acme}/members"))
        .json(json!({"userId": "rita"}))
        .await;
    let Answer(_, roles) = app
        .by(&alice)
        .get(format!("/api/organization/{acme}/roles?limit=100"))
        .await;
    let reviewer_role = roles["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "Compliance Admin")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.by(&alice)
        .post(format!(
            "/api/organization/{acme}/roles/{reviewer_role}/members"
        ))
        .json(json!({"userId": "rita"}))
        .await;
    let rita = app.token("rita", "rita@example.com");

    let ask = |entity: &str, expires: Option<String>| json!({"ruleId": rule_id, "entityId": entity, "reason": "vendored build", "expiresAt": expires});
    let requested: Exemption = app
        .by(&alice)
        .org(&acme)
        .post("/api/compliance/exemptions")
        .json(ask("plugin-1", None))
        .await
        .expect(StatusCode::CREATED)
        .data();
    assert_eq!(requested.status, ExemptionStatus::Requested);
    let id = requested.id;
    assert!(
        app.blocked(&alice, &acme, bad.clone(), Some("plugin-1"))
            .await,
        "requested does not waive"
    );
    let review = format!("/api/compliance/exemptions/{id}/review");
    let Answer(status, body) = app
        .by(&alice)
        .org(&acme)
        .put(&review)
        .json(json!({"decision": "approve"}))
        .await;
    assert_eq!(
        (status, code(status, &body)),
        (StatusCode::FORBIDDEN, ErrorCode::SelfApprovalForbidden)
    );
    let approved: Exemption = app
        .by(&rita)
        .org(&acme)
        .put(&review)
        .json(json!({"decision": "approve", "note": "ok"}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(approved.status, ExemptionStatus::Approved);
    let verdict: Verdict = app
        .validate(&alice, &acme, bad.clone(), Some("plugin-1"), true)
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!((verdict.blocked, verdict.exempted.len()), (false, 1));
    assert!(
        app.blocked(&alice, &acme, bad.clone(), Some("plugin-2"))
            .await,
        "one entity only"
    );
    let Answer(status, body) = app
        .by(&rita)
        .org(&acme)
        .put(&review)
        .json(json!({"decision": "reject"}))
        .await;
    assert_eq!(
        code(status, &body),
        ErrorCode::Conflict,
        "only a requested exemption is reviewed"
    );
    app.by(&alice)
        .org(&acme)
        .delete(format!("/api/compliance/exemptions/{id}"))
        .await
        .expect(StatusCode::OK);
    assert!(
        app.blocked(&alice, &acme, bad.clone(), Some("plugin-1"))
            .await,
        "revoked"
    );
    assert_eq!(
        (
            app.audited("compliance.exemption.approve").await.len(),
            app.audited("compliance.exemption.revoke").await.len()
        ),
        (1, 1)
    );

    // An expiry: it waives until then, not after.
    let soon = (Utc::now() + chrono::Duration::milliseconds(1500)).to_rfc3339();
    let id = app
        .by(&alice)
        .org(&acme)
        .post("/api/compliance/exemptions")
        .json(ask("plugin-3", Some(soon)))
        .await
        .id();
    app.by(&rita)
        .org(&acme)
        .put(format!("/api/compliance/exemptions/{id}/review"))
        .json(json!({"decision": "approve"}))
        .await;
    assert!(
        !app.blocked(&alice, &acme, bad.clone(), Some("plugin-3"))
            .await
    );
    tokio::time::sleep(std::time::Duration::from_millis(1600)).await;
    assert!(
        app.blocked(&alice, &acme, bad.clone(), Some("plugin-3"))
            .await,
        "expired"
    );
    app.by(&alice)
        .org(&acme)
        .post("/api/compliance/exemptions")
        .json(ask("p", Some("2020-01-01T00:00:00Z".into())))
        .await
        .refused(ErrorCode::ValidationError);
    app.by(&alice)
        .org(&acme)
        .post("/api/compliance/exemptions")
        .json(json!({"ruleId": "ghost", "entityId": "p", "reason": "r"}))
        .await
        .refused(ErrorCode::ValidationError);

    // Bulk: at most 500, all or nothing.
    let Answer(_, before) = app
        .by(&alice)
        .org(&acme)
        .get("/api/compliance/exemptions")
        .await;
    let many: Vec<String> = (0..501).map(|i| format!("e{i}")).collect();
    let Answer(status, body) = app
        .by(&alice)
        .org(&acme)
        .post("/api/compliance/exemptions/bulk")
        .json(json!({"ruleId": rule_id, "entityIds": many, "reason": "r"}))
        .await;
    assert_eq!(
        (status, code(status, &body)),
        (StatusCode::BAD_REQUEST, ErrorCode::BulkLimitExceeded)
    );
    let Answer(_, after) = app
        .by(&alice)
        .org(&acme)
        .get("/api/compliance/exemptions")
        .await;
    assert_eq!(
        pagination(&before).total,
        pagination(&after).total,
        "nothing stored"
    );
    let bulk: ExemptionIds = app
        .by(&alice)
        .org(&acme)
        .post("/api/compliance/exemptions/bulk")
        .json(json!({"ruleId": rule_id, "entityIds": ["a", "b", "c"], "reason": "r"}))
        .await
        .expect(StatusCode::CREATED)
        .data();
    assert_eq!((bulk.count, bulk.ids.len()), (3, 3));
    let Answer(_, listed) = app
        .by(&alice)
        .org(&acme)
        .get("/api/compliance/exemptions?status=requested")
        .await;
    assert_eq!(pagination(&listed).total, 3);
}

async fn the_system_organization_is_never_evaluated(app: &TestApp) {
    let (system, root) = app.system().await;
    app.rule(&root, &system, semver("system semver")).await;
    let verdict: Verdict = app
        .validate(&root, &system, json!({"version": "latest"}), None, false)
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!((verdict.blocked, verdict.violations.len()), (false, 0));
}

async fn limits_check_log_dry_run_and_services(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    app.rule(&alice, &acme, semver("semver")).await;
    app.rule(
        &alice,
        &acme,
        rule("has docs", "description", "exists", json!(null), "warning"),
    )
    .await;
    let mut deep = json!(1);
    for _ in 0..11 {
        deep = json!({"d": deep});
    }
    let Answer(status, body) = app.validate(&alice, &acme, deep, None, true).await;
    assert_eq!(
        (status, code(status, &body)),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::AttributeLimitExceeded
        )
    );
    assert_eq!(
        body["details"],
        json!({"limit": "depth", "max": 10, "actual": 11})
    );
    let very_deep = format!(
        "{{\"attributes\": {}1{}}}",
        "{\"d\":".repeat(300),
        "}".repeat(300)
    );
    let request = Request::post("/api/compliance/validate/plugin/dry-run")
        .header("authorization", format!("Bearer {alice}"))
        .header("x-org-id", acme.as_str())
        .header("content-type", "application/json")
        .body(Body::from(very_deep))
        .unwrap();
    let (status, body) = app.send(request).await;
    assert_eq!(
        (status, body["details"]["actual"].as_u64()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some(300)),
        "{body}"
    );
    let wide: serde_json::Map<String, Value> =
        (0..101).map(|i| (format!("k{i}"), json!(i))).collect();
    let Answer(status, body) = app
        .validate(&alice, &acme, Value::Object(wide), None, true)
        .await;
    assert_eq!(
        (status, body["details"]["limit"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("keys"))
    );
    let Answer(status, body) = app.validate(&alice, &acme, json!([1, 2]), None, true).await;
    assert_eq!(code(status, &body), ErrorCode::ValidationError);
    app.by(&alice)
        .org(&acme)
        .post("/api/compliance/validate/widget")
        .json(json!({"attributes": {}}))
        .await
        .refused(ErrorCode::NotFound);

    // Dry runs write nothing; live checks write pass, warn or block.
    app.validate(&alice, &acme, json!({"version": "x"}), Some("p1"), true)
        .await;
    let Answer(_, log) = app.by(&alice).org(&acme).get("/api/compliance/audit").await;
    assert_eq!(pagination(&log).total, 0);
    app.validate(&alice, &acme, json!({"version": "x"}), Some("p1"), false)
        .await;
    app.validate(
        &alice,
        &acme,
        json!({"version": "1.0.0"}),
        Some("p2"),
        false,
    )
    .await;
    app.validate(
        &alice,
        &acme,
        json!({"version": "1.0.0", "description": "d"}),
        Some("p3"),
        false,
    )
    .await;
    let Answer(_, log) = app
        .by(&alice)
        .org(&acme)
        .get("/api/compliance/audit?sortOrder=asc")
        .await;
    let results: Vec<&str> = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["result"].as_str().unwrap())
        .collect();
    assert_eq!(pagination(&log).total, 3);
    assert!(
        results.contains(&"block") && results.contains(&"warn") && results.contains(&"pass"),
        "{results:?}"
    );
    let Answer(_, blocked) = app
        .by(&alice)
        .org(&acme)
        .get("/api/compliance/audit?result=block&entityId=p1")
        .await;
    let names: Vec<&str> = blocked["entries"][0]["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["ruleName"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["has docs", "semver"],
        "equal priorities order by name"
    );
    app.by(&alice)
        .org(&acme)
        .get("/api/compliance/audit?result=maybe")
        .await
        .refused(ErrorCode::ValidationError);

    // The impact preview evaluates the entities validated so far.
    let impact: RuleImpact = app
        .by(&alice)
        .org(&acme)
        .post("/api/compliance/subscriptions/preview/impact")
        .json(json!({"rule": rule("needs docs", "description", "exists", json!(null), "error")}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!((impact.evaluated, impact.failing), (3, 2));
    let preview: Evaluation = app
        .by(&alice)
        .org(&acme)
        .post("/api/compliance/subscriptions/preview")
        .json(json!({"rule": semver("try"), "attributes": {"version": "1"}}))
        .await
        .data();
    assert!(preview.blocked);

    // A service (the plugin service at upload) validates with its token and x-org-id.
    let service = app.service_token("plugin");
    let verdict: Verdict = app
        .validate(
            &service,
            &acme,
            json!({"version": "x"}),
            Some("upload-1"),
            false,
        )
        .await
        .expect(StatusCode::OK)
        .data();
    assert!(verdict.blocked);
    let Answer(status, body) = app
        .validate(&service, "no-such-org", json!({}), None, true)
        .await;
    assert_eq!(code(status, &body), ErrorCode::TenantForbidden);
}

async fn notification_preferences(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let path = "/api/compliance/notification-preferences";
    let preference: Preference = app.by(&alice).org(&acme).get(path).await.data();
    assert_eq!(
        (
            preference.digest_mode.as_str(),
            preference.has_webhook_secret,
            preference.email_enabled
        ),
        ("immediate", false, false)
    );
    app.by(&alice)
        .post(format!("/api/organization/{acme}/members"))
        .json(json!({"userId": "bob"}))
        .await;
    let bob = app.token("bob", "bob@example.com");
    app.by(&bob)
        .org(&acme)
        .put(path)
        .json(json!({"emailEnabled": true}))
        .await
        .refused(ErrorCode::Forbidden);
    let saved = app.by(&alice).org(&acme).put(path).json(json!({"webhookUrl": "https://93.184.216.34/x", "webhookSecret": "s3cret", "digestMode": "daily"})).await.expect(StatusCode::OK);
    let preference: Preference = saved.data();
    assert_eq!(
        (
            preference.has_webhook_secret,
            preference.digest_mode.as_str()
        ),
        (true, "daily")
    );
    assert!(
        !saved.body().to_string().contains("s3cret"),
        "the secret is never returned"
    );
    let preference: Preference = app
        .by(&alice)
        .org(&acme)
        .put(path)
        .json(json!({"emailEnabled": true}))
        .await
        .data();
    assert!(preference.has_webhook_secret, "omitted keeps it");
    let preference: Preference = app
        .by(&alice)
        .org(&acme)
        .put(path)
        .json(json!({"webhookSecret": ""}))
        .await
        .data();
    assert!(!preference.has_webhook_secret, "empty clears it");
    app.by(&alice)
        .org(&acme)
        .put(path)
        .json(json!({"digestMode": "hourly"}))
        .await
        .refused(ErrorCode::ValidationError);
}

async fn policies_and_templates(app: &TestApp) {
    let (system, root) = app.system().await;
    let mut template = semver("template semver");
    template["isTemplate"] = json!(true);
    let template_id = app.rule(&root, &system, template).await;
    let policy_template = app
        .by(&root)
        .org(&system)
        .post("/api/compliance/policies")
        .json(json!({"name": "Supply chain", "ruleIds": [template_id], "isTemplate": true}))
        .await
        .expect(StatusCode::CREATED)
        .id();
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let templates: Templates = app
        .by(&alice)
        .org(&acme)
        .get("/api/compliance/templates")
        .await
        .data();
    assert_eq!((templates.rules.len(), templates.policies.len()), (1, 1));
    let cloned: Policy = app
        .by(&alice)
        .org(&acme)
        .post(format!(
            "/api/compliance/templates/policies/{policy_template}/clone"
        ))
        .json(json!({"name": "Our supply chain"}))
        .await
        .expect(StatusCode::CREATED)
        .data();
    let policy = cloned.id;
    assert_eq!(cloned.rule_ids.len(), 1);
    assert!(
        !cloned.rule_ids.contains(&template_id),
        "the policy points at the organization's own copies"
    );
    assert!(
        app.blocked(&alice, &acme, json!({"version": "x"}), None)
            .await,
        "the cloned rule is enforced"
    );
    let Answer(status, body) = app
        .by(&alice)
        .org(&acme)
        .post(format!(
            "/api/compliance/templates/policies/{policy_template}/clone"
        ))
        .json(json!({"name": "Twice"}))
        .await;
    assert_eq!(
        code(status, &body),
        ErrorCode::Conflict,
        "its rule names are taken now"
    );
    let Answer(_, rules) = app.by(&alice).org(&acme).get("/api/compliance/rules").await;
    assert_eq!(pagination(&rules).total, 1, "nothing half-cloned");
    // The rules are free but the policy's name is taken: the policy fails last, and
    // the rules written before it in the same transaction are rolled back with it.
    let beta = app.org("bob", "beta").await;
    let bob = app.token("bob", "bob@example.com");
    app.by(&bob)
        .org(&beta)
        .post("/api/compliance/policies")
        .json(json!({"name": "Supply chain", "ruleIds": []}))
        .await
        .expect(StatusCode::CREATED);
    app.by(&bob)
        .org(&beta)
        .post(format!(
            "/api/compliance/templates/policies/{policy_template}/clone"
        ))
        .await
        .refused(ErrorCode::Conflict);
    let Answer(_, rules) = app.by(&bob).org(&beta).get("/api/compliance/rules").await;
    assert_eq!(
        pagination(&rules).total,
        0,
        "no rule outlived the failed clone"
    );
    app.by(&alice)
        .org(&acme)
        .post("/api/compliance/templates/apply")
        .json(json!({"templateId": template_id}))
        .await
        .refused(ErrorCode::Conflict);
    let applied: OrgRule = app
        .by(&alice)
        .org(&acme)
        .post("/api/compliance/templates/apply")
        .json(json!({"templateId": template_id, "name": "applied copy"}))
        .await
        .expect(StatusCode::CREATED)
        .data();
    assert_eq!(
        (applied.rule.is_template, applied.org_id.as_str()),
        (false, acme.as_str())
    );
    app.by(&alice)
        .org(&acme)
        .post(format!(
            "/api/compliance/templates/rules/{template_id}/clone"
        ))
        .await
        .refused(ErrorCode::Conflict);
    app.by(&alice)
        .org(&acme)
        .post(format!(
            "/api/compliance/templates/rules/{template_id}/clone"
        ))
        .json(json!({"name": "another copy"}))
        .await
        .expect(StatusCode::CREATED);
    // One per cloned rule and one for the policy, one apply, one rule clone.
    assert_eq!(app.audited("compliance.template.apply").await.len(), 4);
    // Policies: CRUD, filterable.
    let Answer(_, list) = app
        .by(&alice)
        .org(&acme)
        .get("/api/compliance/policies?name=supply")
        .await;
    assert_eq!(pagination(&list).total, 1);
    let described: Policy = app
        .by(&alice)
        .org(&acme)
        .put(format!("/api/compliance/policies/{policy}"))
        .json(json!({"description": "ours"}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(described.description.as_deref(), Some("ours"));
    app.by(&alice)
        .org(&acme)
        .post("/api/compliance/policies")
        .json(json!({"name": "Our Supply Chain"}))
        .await
        .refused(ErrorCode::Conflict);
    app.by(&alice)
        .org(&acme)
        .post("/api/compliance/policies")
        .json(json!({"name": "t", "isTemplate": true}))
        .await
        .refused(ErrorCode::Forbidden);
    app.by(&alice)
        .org(&acme)
        .delete(format!("/api/compliance/policies/{policy}"))
        .await
        .expect(StatusCode::OK);
    app.by(&alice)
        .org(&acme)
        .get(format!("/api/compliance/policies/{policy}"))
        .await
        .refused(ErrorCode::NotFound);
}

async fn another_organization_cannot_reach_compliance_data(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let globex = app.org("bob", "globex").await;
    let alice = app.token("alice", "alice@example.com");
    let bob = app.token("bob", "bob@example.com");
    let rule_id = app.rule(&alice, &acme, semver("semver")).await;
    let policy = app
        .by(&alice)
        .org(&acme)
        .post("/api/compliance/policies")
        .json(json!({"name": "p", "ruleIds": [rule_id]}))
        .await
        .id();
    let exemption = app
        .by(&alice)
        .org(&acme)
        .post("/api/compliance/exemptions")
        .json(json!({"ruleId": rule_id, "entityId": "e", "reason": "r"}))
        .await
        .id();
    // Naming acme in x-org-id: refused outright.
    let Answer(status, body) = app.by(&bob).org(&acme).get("/api/compliance/rules").await;
    assert_eq!(code(status, &body), ErrorCode::TenantForbidden);
    // Naming acme's ids from globex: not found, and nothing changes.
    let attempts: Vec<(&str, String, Option<Value>)> = vec![
        ("GET", format!("/api/compliance/rules/{rule_id}"), None),
        (
            "GET",
            format!("/api/compliance/rules/{rule_id}/history"),
            None,
        ),
        (
            "PUT",
            format!("/api/compliance/rules/{rule_id}"),
            Some(semver("stolen")),
        ),
        ("DELETE", format!("/api/compliance/rules/{rule_id}"), None),
        ("GET", format!("/api/compliance/policies/{policy}"), None),
        (
            "PUT",
            format!("/api/compliance/policies/{policy}"),
            Some(json!({"name": "x"})),
        ),
        ("DELETE", format!("/api/compliance/policies/{policy}"), None),
        (
            "DELETE",
            format!("/api/compliance/exemptions/{exemption}"),
            None,
        ),
        (
            "PUT",
            format!("/api/compliance/exemptions/{exemption}/review"),
            Some(json!({"decision": "approve"})),
        ),
        (
            "POST",
            "/api/compliance/subscriptions".to_owned(),
            Some(json!({"ruleId": rule_id})),
        ),
    ];
    for (method, path, body) in attempts {
        let Answer(status, response) = app
            .by(&bob)
            .org(&globex)
            .method(method, &path)
            .json_opt(body)
            .await;
        assert_eq!(
            code(status, &response),
            ErrorCode::NotFound,
            "{method} {path}"
        );
    }
    let Answer(_, rules) = app.by(&bob).org(&globex).get("/api/compliance/rules").await;
    assert_eq!(pagination(&rules).total, 0);
    assert!(
        !app.blocked(&bob, &globex, json!({"version": "x"}), None)
            .await,
        "acme's rules never touch globex"
    );
    let history: Vec<RuleVersion> = app
        .by(&alice)
        .org(&acme)
        .get(format!("/api/compliance/rules/{rule_id}/history"))
        .await
        .data();
    assert_eq!(history.len(), 1);
}

// Concurrent live checks: each is answered after its check-log row, its entity's
// snapshot and its notification are stored, and none is lost or written twice.
async fn concurrent_live_checks_are_each_recorded(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    app.rule(&alice, &acme, semver("SEMVER")).await;
    let checks = 64;
    let requests = (0..checks)
        .map(|i| {
            let version = if i % 2 == 0 { "1.0.0" } else { "latest" };
            app.by(&alice)
                .org(&acme)
                .post("/api/compliance/validate/plugin")
                .json(json!({"attributes": {"version": version}, "entityId": format!("e{i}")}))
                .request()
        })
        .collect();
    let answers = app.concurrently(requests).await;
    for (i, answer) in answers.into_iter().enumerate() {
        let verdict: Verdict = Answer::from(answer).expect(StatusCode::OK).data();
        assert_eq!(verdict.blocked, i % 2 == 1, "{i}");
    }
    let Answer(_, log) = app
        .by(&alice)
        .org(&acme)
        .get("/api/compliance/audit?limit=100")
        .await;
    assert_eq!(pagination(&log).total, checks, "{log}");
    let mut entities: Vec<String> = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["entityId"].as_str().unwrap().to_owned())
        .collect();
    entities.sort();
    entities.dedup();
    assert_eq!(entities.len() as u64, checks, "one row per check");
    let Answer(_, blocked) = app
        .by(&alice)
        .org(&acme)
        .get("/api/compliance/audit?result=block")
        .await;
    assert_eq!(pagination(&blocked).total, checks / 2, "{blocked}");
    // Every entity's snapshot is kept: the impact preview judges all of them.
    let impact: RuleImpact = app
        .by(&alice)
        .org(&acme)
        .post("/api/compliance/subscriptions/preview/impact")
        .json(json!({"rule": semver("again")}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!((impact.evaluated, impact.failing), (checks, checks / 2));
    // And each block's notification, with its deliveries: one per blocked check.
    let now = chrono::Utc::now();
    let mut notified = std::collections::BTreeSet::new();
    while let Some(delivery) = app
        .store
        .claim_delivery(now, now + chrono::Duration::minutes(5))
        .await
        .unwrap()
    {
        assert_eq!(delivery.org_id, acme);
        notified.insert(delivery.notification_id);
    }
    assert_eq!(notified.len() as u64, checks / 2);
}

// An entity's snapshot follows its attributes: a check with other attributes replaces
// it (the impact preview judges the new ones), a check with the same ones leaves the
// row as it was (its `updated_at` is when the attributes last changed).
async fn a_snapshot_follows_the_attributes_and_an_unchanged_check_keeps_it(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    app.rule(&alice, &acme, semver("SEMVER")).await;
    let (alice, acme) = (&alice, &acme);
    let check = |version: &'static str| async move {
        app.by(alice)
            .org(acme)
            .post("/api/compliance/validate/plugin")
            .json(json!({"attributes": {"version": version}, "entityId": "e1"}))
            .await
            .expect(StatusCode::OK);
    };
    let kept = || async {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT attributes, updated_at FROM entity_snapshots WHERE entity_id = 'e1'",
        )
        .fetch_all(adapters::storage::pool_for_tests(&app.store))
        .await
        .unwrap();
        assert_eq!(rows.len(), 1, "{rows:?}");
        rows.into_iter().next().unwrap()
    };
    let failing = |expected: u64| async move {
        let impact: RuleImpact = app
            .by(alice)
            .org(acme)
            .post("/api/compliance/subscriptions/preview/impact")
            .json(json!({"rule": semver("again")}))
            .await
            .expect(StatusCode::OK)
            .data();
        assert_eq!((impact.evaluated, impact.failing), (1, expected));
    };
    check("1.0.0").await;
    let (first, first_at) = kept().await;
    assert_eq!(first, r#"{"version":"1.0.0"}"#);
    failing(0).await;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    check("1.0.0").await;
    assert_eq!(
        kept().await,
        (first, first_at.clone()),
        "unchanged: not rewritten"
    );
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    check("latest").await;
    let (changed, changed_at) = kept().await;
    assert_eq!(changed, r#"{"version":"latest"}"#);
    assert!(changed_at > first_at, "{changed_at} after {first_at}");
    failing(1).await;
}

on_both_backends!(
    concurrent_live_checks_are_each_recorded,
    a_snapshot_follows_the_attributes_and_an_unchanged_check_keeps_it,
    the_life_of_a_rule,
    a_pinned_subscriber_keeps_the_old_version_and_an_unpinned_one_follows,
    parents_propagate_rules_to_their_teams,
    exemptions_waive_only_when_approved_and_unexpired,
    the_system_organization_is_never_evaluated,
    limits_check_log_dry_run_and_services,
    notification_preferences,
    policies_and_templates,
    another_organization_cannot_reach_compliance_data,
);

async fn the_sample_content_loads_once(app: &TestApp) {
    let (system, root) = app.system().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let router = app.router.clone();
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    let first = adapters::cli::load_content(&url, &root, &system)
        .await
        .unwrap();
    assert_eq!((first.rules_created, first.policies_created), (8, 3));
    let again = adapters::cli::load_content(&url, &root, &system)
        .await
        .unwrap();
    assert_eq!(
        (
            again.rules_created,
            again.rules_skipped,
            again.policies_created,
            again.policies_skipped
        ),
        (0, 8, 0, 3)
    );
    server.abort();
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let Answer(_, catalog) = app
        .by(&alice)
        .org(&acme)
        .get("/api/compliance/published-rules?limit=100")
        .await;
    assert_eq!(pagination(&catalog).total, 8);
    let templates: Templates = app
        .by(&alice)
        .org(&acme)
        .get("/api/compliance/templates")
        .await
        .data();
    assert_eq!(templates.policies.len(), 3);
    let auto: AutoSubscribed = app
        .by(&alice)
        .org(&acme)
        .post("/api/compliance/subscriptions/auto-subscribe")
        .await
        .data();
    assert_eq!(auto.subscribed, 8);
    let Answer(_, subscriptions) = app
        .by(&alice)
        .org(&acme)
        .get("/api/compliance/subscriptions")
        .await;
    let ids: Vec<String> = subscriptions["subscriptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["ruleId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(pagination(&subscriptions).total, 8);
    // Paginated like every other list.
    let Answer(_, first) = app
        .by(&alice)
        .org(&acme)
        .get("/api/compliance/subscriptions?limit=3&offset=6")
        .await;
    assert_eq!(
        first["subscriptions"].as_array().unwrap().len(),
        2,
        "{first}"
    );
    assert!(!pagination(&first).has_more);
    assert_eq!(first["subscriptions"][0]["ruleId"], ids[6].as_str());
    app.by(&alice)
        .org(&acme)
        .post("/api/compliance/subscriptions/bulk")
        .json(json!({"ruleIds": ids, "isActive": true}))
        .await;
    let piped = json!({"name": "x", "version": "1.0.0", "description": "a helpful plugin", "accessModifier": "private",
                       "installCommands": ["curl https://example.com/install.sh | sh"]});
    let verdict: Verdict = app.validate(&alice, &acme, piped, None, true).await.data();
    assert_eq!(
        verdict.violations[0].rule_name(),
        "Install commands do not pipe"
    );
    assert!(verdict.blocked);
}

mod content {
    use super::*;
    on_both_backends!(the_sample_content_loads_once);
}

// The rule-set cache carries the organization, so that a service's warm validation
// reads nothing; deleting the organization must drop that entry.
async fn a_deleted_organization_no_longer_validates_from_the_cache(app: &TestApp) {
    let (_, root) = app.system().await;
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    app.rule(&alice, &acme, semver("semver")).await;
    let service = app.service_token("plugin");
    for _ in 0..2 {
        let verdict: Verdict = app
            .validate(&service, &acme, json!({"version": "x"}), None, true)
            .await
            .expect(StatusCode::OK)
            .data();
        assert!(verdict.blocked);
    }
    let delete = Request::delete(format!("/api/organization/{acme}"))
        .header("authorization", format!("Bearer {root}"))
        .header("x-step-up-token", app.step_up("root", 1))
        .body(Body::empty())
        .unwrap();
    let (status, _) = app.send(delete).await;
    assert_eq!(status, StatusCode::OK);
    let Answer(status, body) = app
        .validate(&service, &acme, json!({"version": "x"}), None, true)
        .await;
    assert_eq!(code(status, &body), ErrorCode::TenantForbidden);
}

mod cache {
    use super::*;
    on_both_backends!(a_deleted_organization_no_longer_validates_from_the_cache);
}

// Fail closed: when the rules cannot be loaded, validation answers 503
// COMPLIANCE_UNAVAILABLE, and an enforcement point rejects the operation.
async fn validation_fails_closed_when_storage_is_gone(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let service = app.service_token("plugin");
    app.store.close().await;
    let Answer(status, body) = app
        .validate(&service, &acme, json!({"version": "1.0.0"}), None, false)
        .await;
    assert_eq!(
        (status, code(status, &body)),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::ComplianceUnavailable
        )
    );
}

mod fail_closed {
    use super::*;
    on_both_backends!(validation_fails_closed_when_storage_is_gone);
}
