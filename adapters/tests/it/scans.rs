//! Scans, scan schedules and the posture: a sweep over a seeded inventory with known
//! failures (counts exact), cancel mid-scan, a dead sweeper's scan resumed or failed,
//! schedules validated and run once, the system organization skipped, tenants apart.

use crate::api::{pagination, Answer};
use std::time::Duration;

use adapters::http::wire::{CompliancePosture, Pipeline, Scan, ScanSchedule};
use adapters::inventory::EntityResult;
use adapters::services::scans::{self, SweepSettings, Swept};
use chrono::Utc;

use super::fixtures::pipeline_as;
use super::*;
use adapters::code::ErrorCode;

/// Starts the due scheduled scans, with the parts `scans::run_due_schedules` reads.
async fn run_due_schedules(
    state: &AppState,
    now: chrono::DateTime<Utc>,
) -> Result<usize, adapters::services::ServiceError> {
    scans::run_due_schedules(&state.infra.store, &state.config, &state.infra.metrics, now).await
}

fn state_of(app: &TestApp, extra: &[(&str, &str)]) -> AppState {
    AppState::new(
        test_config(extra),
        app.store.clone(),
        Arc::new(adapters::audit::AuditCounters::default()),
    )
}

const SETTINGS: SweepSettings = SweepSettings {
    concurrency: 2,
    batch: 3,
    lease: Duration::from_secs(30),
};

/// Claims and sweeps every running scan to its end, as the workers would.
pub async fn sweep_all(state: &AppState) -> Vec<Swept> {
    let mut ends = Vec::new();
    let never = || false;
    while let Some(scan) = claim(state, Duration::from_secs(30)).await {
        ends.push(scans::sweep(state, &scan, SETTINGS, &never).await.unwrap());
    }
    ends
}

async fn claim(state: &AppState, lease: Duration) -> Option<adapters::storage::ScanRecord> {
    let now = Utc::now();
    state
        .infra
        .store
        .claim_scan(
            "test-sweeper",
            now,
            now + chrono::Duration::from_std(lease).unwrap(),
        )
        .await
        .unwrap()
}

/// Ten pipelines (4 public, 6 private; 3 of the private ones named `a-b`), then two
/// rules: public ones block, names not `a-b` warn. Returns the pipelines' ids.
async fn seed(app: &TestApp, token: &str, org: &str) -> Vec<String> {
    // Pro: room for more than the Developer tier's five pipelines.
    app.sql(&format!(
        "UPDATE organizations SET tier = 'pro' WHERE id = '{org}'"
    ))
    .await;
    let mut ids = Vec::new();
    let names = [
        ("pub-one", "public"),
        ("pubtwo", "public"),
        ("pubthree", "public"),
        ("pub-four", "public"),
        ("web-app", "private"),
        ("api-core", "private"),
        ("db-tools", "private"),
        ("legacy1", "private"),
        ("Legacy2", "private"),
        ("legacy_3", "private"),
    ];
    for (name, access) in names {
        ids.push(
            app.by(token)
                .org(org)
                .post("/api/pipelines")
                .json(pipeline_as(name, access))
                .await
                .expect(StatusCode::CREATED)
                .id(),
        );
    }
    for rule in [
        json!({"name": "Private only", "target": "pipeline", "severity": "error",
               "field": "accessModifier", "operator": "eq", "value": "private"}),
        json!({"name": "Named by convention", "target": "pipeline", "severity": "warning",
               "field": "pipelineName", "operator": "regex", "value": "^[a-z]+-[a-z]+$"}),
    ] {
        app.by(token)
            .org(org)
            .post("/api/compliance/rules")
            .json(rule)
            .await
            .expect(StatusCode::CREATED);
    }
    ids
}

/// The `PolicyReport` schema of the wgpolicyk8s.io v1alpha2 CRD (the
/// wg-policy-prototypes copy), as a strict validation applies it: no field the CRD
/// does not declare, at any level, and each declared one of its type and enum.
fn wgpolicyk8s_v1alpha2(report: &Value) {
    let only = |value: &Value, allowed: &[&str], at: &str| {
        for key in value
            .as_object()
            .unwrap_or_else(|| panic!("{at} is not an object"))
            .keys()
        {
            assert!(
                allowed.contains(&key.as_str()),
                "{at}.{key} is not in the CRD"
            );
        }
    };
    let strings = |value: &Value, at: &str| {
        for (key, v) in value.as_object().unwrap() {
            assert!(v.is_string(), "{at}.{key} must be a string");
        }
    };
    only(
        report,
        &[
            "apiVersion",
            "kind",
            "metadata",
            "results",
            "scope",
            "scopeSelector",
            "summary",
        ],
        "report",
    );
    if let Some(annotations) = report["metadata"].get("annotations") {
        strings(annotations, "metadata.annotations");
    }
    only(
        &report["summary"],
        &["pass", "fail", "warn", "error", "skip"],
        "summary",
    );
    for count in report["summary"].as_object().unwrap().values() {
        assert!(count.is_u64(), "summary counts are integers");
    }
    let reference = [
        "apiVersion",
        "fieldPath",
        "kind",
        "name",
        "namespace",
        "resourceVersion",
        "uid",
    ];
    for result in report["results"].as_array().unwrap() {
        only(
            result,
            &[
                "category",
                "message",
                "policy",
                "properties",
                "resourceSelector",
                "resources",
                "result",
                "rule",
                "scored",
                "severity",
                "source",
                "timestamp",
            ],
            "results[]",
        );
        assert!(result["policy"].is_string(), "policy is required");
        for text in ["category", "message", "rule", "source"] {
            assert!(result.get(text).is_none_or(Value::is_string), "{text}");
        }
        assert!(
            ["pass", "fail", "warn", "error", "skip"].contains(&result["result"].as_str().unwrap())
        );
        if let Some(severity) = result.get("severity") {
            assert!(
                ["high", "low", "medium"].contains(&severity.as_str().unwrap()),
                "severity {severity} is not in the CRD's enum"
            );
        }
        assert!(result.get("scored").is_none_or(Value::is_boolean));
        if let Some(properties) = result.get("properties") {
            strings(properties, "results[].properties");
        }
        for resource in result["resources"].as_array().into_iter().flatten() {
            only(resource, &reference, "results[].resources[]");
            strings(resource, "results[].resources[]");
        }
        if let Some(timestamp) = result.get("timestamp") {
            only(timestamp, &["seconds", "nanos"], "results[].timestamp");
            assert!(timestamp["seconds"].is_i64() && timestamp["nanos"].is_i64());
        }
    }
}

pub async fn start(app: &TestApp, token: &str, org: &str, body: Value) -> Scan {
    app.by(token)
        .org(org)
        .post("/api/compliance/scans")
        .json(body)
        .await
        .expect(StatusCode::ACCEPTED)
        .data()
}

async fn scan(app: &TestApp, token: &str, org: &str, id: &str) -> Scan {
    app.by(token)
        .org(org)
        .get(format!("/api/compliance/scans/{id}"))
        .await
        .expect(StatusCode::OK)
        .data()
}

async fn a_scan_judges_the_inventory_with_exact_counts(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let ids = seed(app, &alice, &org).await;
    let started = start(app, &alice, &org, json!({"target": "pipeline"})).await;
    assert_eq!(started.status, "running");
    assert_eq!(started.origin, "manual");
    assert_eq!(started.counts.total, 10);
    assert_eq!(started.counts.scanned, 0);
    assert_eq!(started.filter, json!({"orgId": org}));
    let id = started.id.clone();

    let state = state_of(app, &[]);
    assert_eq!(sweep_all(&state).await, [Swept::Completed]);
    // One notification, with the summary, delivered to the inbox.
    while adapters::workers::delivery::step(&state).await.unwrap() {}
    let Answer(_, inbox) = app.by(&alice).org(&org).get("/api/messages").await;
    let scan_messages: Vec<&Value> = inbox["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["title"].as_str().unwrap_or("").contains("scan"))
        .collect();
    assert_eq!(scan_messages.len(), 1, "{inbox}");
    assert_eq!(
        scan_messages[0]["title"],
        "A compliance scan found 4 blocked pipeline(s)"
    );
    assert!(scan_messages[0]["body"].as_str().unwrap().contains(&id));
    let done = scan(app, &alice, &org, &id).await;
    assert_eq!(done.status, "completed", "{done:?}");
    assert_eq!(
        json!(done.counts),
        json!({"total": 10, "scanned": 10, "passed": 3, "warned": 3, "blocked": 4, "errors": 0}),
        "public: 4 blocked; private: web-app, api-core, db-tools pass, 3 warn: {done:?}"
    );
    assert!(done.ended_at.is_some());
    let print = done.rule_set_fingerprint.as_deref().unwrap();
    assert_eq!(print.len(), 64);
    assert!(print.chars().all(|c| c.is_ascii_hexdigit()));

    // The results, paginated and narrowed.
    let Answer(status, body) = app
        .by(&alice)
        .org(&org)
        .get(format!(
            "/api/compliance/scans/{id}/results?result=block&limit=2"
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(pagination(&body).total, 4);
    assert_eq!(body["results"].as_array().unwrap().len(), 2);
    let first = &body["results"][0];
    assert_eq!(first["result"], "block");
    assert!(first["violations"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v["ruleName"] == "Private only" && v["severity"] == "error"));
    let Answer(_, all) = app
        .by(&alice)
        .org(&org)
        .get(format!("/api/compliance/scans/{id}/results?limit=100"))
        .await;
    assert_eq!(pagination(&all).total, 10);
    let judged: std::collections::BTreeSet<&str> = all["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["entityId"].as_str().unwrap())
        .collect();
    assert_eq!(judged.len(), 10, "each entity once");
    for id in &ids {
        assert!(judged.contains(id.as_str()));
    }
    let Answer(status, body) = app
        .by(&alice)
        .org(&org)
        .get(format!("/api/compliance/scans/{id}/results?result=maybe"))
        .await;
    assert_eq!(
        (status, code(status, &body)),
        (StatusCode::BAD_REQUEST, ErrorCode::ValidationError)
    );

    // Each entity keeps its new result.
    let got: Pipeline = app
        .by(&alice)
        .org(&org)
        .get(format!("/api/pipelines/{}", ids[0]))
        .await
        .data();
    let compliance = got.compliance;
    assert_eq!(compliance.result, EntityResult::Block);
    assert_eq!(compliance.scan_id.as_deref(), Some(id.as_str()));
    // Its violations are the scan's, as the scan's results give them.
    let result = all["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["entityId"] == ids[0].as_str())
        .unwrap();
    assert!(
        !result["violations"].as_array().unwrap().is_empty(),
        "{result}"
    );
    assert_eq!(json!(compliance.violations), result["violations"]);

    // The posture, from the stored results.
    let posture: CompliancePosture = app
        .by(&alice)
        .org(&org)
        .get("/api/compliance/posture?target=pipeline")
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(
        json!(posture.entities),
        json!({"total": 10, "pass": 3, "warn": 3, "block": 4, "error": 0})
    );
    let top: Vec<(&str, u64)> = posture
        .top_failing_rules
        .iter()
        .map(|r| (r.rule_name.as_str(), r.violations))
        .collect();
    // Named by convention: pubtwo, pubthree, legacy1, Legacy2, legacy_3 fail (5);
    // Private only: the 4 public ones.
    assert_eq!(top, [("Named by convention", 5), ("Private only", 4)]);
    app.by(&alice)
        .org(&org)
        .get("/api/compliance/posture?top=0")
        .await
        .expect(StatusCode::BAD_REQUEST);

    // The same as a PolicyReport.
    let Answer(status, report) = app
        .by(&alice)
        .org(&org)
        .get("/api/compliance/posture/policy-report?target=pipeline&limit=100")
        .await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert_eq!(report["apiVersion"], "wgpolicyk8s.io/v1alpha2");
    assert_eq!(report["kind"], "PolicyReport");
    assert_eq!(
        report["summary"],
        json!({"pass": 3, "fail": 4, "warn": 5, "error": 0, "skip": 0})
    );
    wgpolicyk8s_v1alpha2(&report);
    // The page is in the annotations (strings), where the CRD allows it.
    let annotations = &report["metadata"]["annotations"];
    assert_eq!(annotations["compliance/page-total"], "10", "{report}");
    assert_eq!(annotations["compliance/page-limit"], "100");
    assert_eq!(annotations["compliance/page-offset"], "0");
    let results = report["results"].as_array().unwrap();
    assert_eq!(results.iter().filter(|r| r["result"] == "fail").count(), 4);
    let fail = results.iter().find(|r| r["result"] == "fail").unwrap();
    assert_eq!(fail["rule"], "Private only");
    assert_eq!(fail["severity"], "high");
    assert_eq!(fail["resources"][0]["kind"], "Pipeline");
    app.by(&alice)
        .org(&org)
        .get("/api/compliance/posture/policy-report")
        .await
        .expect(StatusCode::BAD_REQUEST);

    // A finished scan cannot be cancelled.
    let Answer(status, body) = app
        .by(&alice)
        .org(&org)
        .post(format!("/api/compliance/scans/{id}/cancel"))
        .await;
    assert_eq!(
        (status, code(status, &body)),
        (StatusCode::CONFLICT, ErrorCode::Conflict),
        "{body}"
    );

    // Tenants apart: another organization sees none of it.
    let bob_org = app.org("bob", "bobco").await;
    let bob = app.token("bob", "bob@example.com");
    app.by(&bob)
        .org(&bob_org)
        .get(format!("/api/compliance/scans/{id}"))
        .await
        .expect(StatusCode::NOT_FOUND);
    app.by(&bob)
        .org(&bob_org)
        .get(format!("/api/compliance/scans/{id}/results"))
        .await
        .expect(StatusCode::NOT_FOUND);
    let Answer(status, _) = app
        .by(&bob)
        .org(&bob_org)
        .post(format!("/api/compliance/scans/{id}/cancel"))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let Answer(_, list) = app
        .by(&bob)
        .org(&bob_org)
        .get("/api/compliance/scans")
        .await;
    assert_eq!(pagination(&list).total, 0);
    let posture: CompliancePosture = app
        .by(&bob)
        .org(&bob_org)
        .get("/api/compliance/posture")
        .await
        .data();
    assert_eq!(posture.entities.total, 0);
    let Answer(_, list) = app
        .by(&alice)
        .org(&org)
        .get("/api/compliance/scans?status=completed&target=pipeline")
        .await;
    assert_eq!(pagination(&list).total, 1);
    assert_eq!(list["scans"][0]["id"], id.as_str());
}

async fn filters_narrow_the_sweep_and_the_caller_cannot_name_another_tenant(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    seed(app, &alice, &org).await;
    let other = app.org("bob", "bobco").await;
    let started = start(
        app,
        &alice,
        &org,
        json!({"target": "pipeline", "filter": {"orgId": other, "accessModifier": "public"}}),
    )
    .await;
    assert_eq!(
        started.filter["orgId"],
        org.as_str(),
        "the server's organization"
    );
    assert_eq!(started.counts.total, 4);
    let by_name = start(
        app,
        &alice,
        &org,
        json!({"target": "all", "filter": {"name": "web-app"}}),
    )
    .await;
    assert_eq!(by_name.counts.total, 1);
    // One running scan per target: these two are swept before `all` is asked again.
    let state = state_of(app, &[]);
    assert_eq!(sweep_all(&state).await.len(), 2);
    // Plugins belong to no project: a project filter sweeps the project's pipelines
    // and no plugin.
    let crate::api::Answer(status, body) = super::plugins::upload(
        app,
        &alice,
        &org,
        &super::plugins::plugin_zip("lint", "1.0.0"),
        Some("private"),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let by_project = start(
        app,
        &alice,
        &org,
        json!({"target": "all", "filter": {"project": "web"}}),
    )
    .await;
    assert_eq!(by_project.counts.total, 10, "{by_project:?}");
    let plugins = start(app, &alice, &org, json!({"target": "plugin"})).await;
    assert_eq!(plugins.counts.total, 1);
    assert_eq!(sweep_all(&state).await.len(), 2);
    let done = scan(app, &alice, &org, &started.id).await;
    assert_eq!(done.counts.blocked, 4);
    assert_eq!(done.counts.scanned, 4);
    let done = scan(app, &alice, &org, &by_name.id).await;
    assert_eq!(done.counts.passed, 1, "{done:?}");
    for (body, field) in [
        (json!({"target": "everything"}), "target"),
        (
            json!({"target": "pipeline", "filter": {"owner": "x"}}),
            "filter",
        ),
        (
            json!({"target": "pipeline", "filter": {"name": 7}}),
            "filter",
        ),
        (
            json!({"target": "pipeline", "filter": {"accessModifier": "secret"}}),
            "accessModifier",
        ),
    ] {
        let Answer(status, response) = app
            .by(&alice)
            .org(&org)
            .post("/api/compliance/scans")
            .json(body.clone())
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body} -> {response}");
        assert_eq!(response["details"]["field"], field, "{response}");
    }
    app.by(&alice)
        .org(&org)
        .post("/api/compliance/scans")
        .json(json!({"filter": {}}))
        .await
        .expect(StatusCode::BAD_REQUEST);
    // Nothing was stored by the refusals.
    let Answer(_, list) = app.by(&alice).org(&org).get("/api/compliance/scans").await;
    assert_eq!(pagination(&list).total, 4);
}

async fn a_cancelled_scan_stops_within_one_batch(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    seed(app, &alice, &org).await;
    let id = start(app, &alice, &org, json!({"target": "pipeline"}))
        .await
        .id;
    let state = state_of(app, &[]);
    // The sweeper judges one batch, then the scan is cancelled under it.
    let claimed = claim(&state, Duration::from_secs(30)).await.unwrap();
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let after_one = || calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= 1;
    assert_eq!(
        scans::sweep(&state, &claimed, SETTINGS, &after_one)
            .await
            .unwrap(),
        Swept::Stopped
    );
    let midway = scan(app, &alice, &org, &id).await;
    assert_eq!(midway.status, "running");
    assert_eq!(midway.counts.scanned, 3, "one batch: {midway:?}");
    let claimed = claim(&state, Duration::from_secs(30)).await.unwrap();
    let cancelled: Scan = app
        .by(&alice)
        .org(&org)
        .post(format!("/api/compliance/scans/{id}/cancel"))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(cancelled.status, "cancelled");
    let never = || false;
    assert_eq!(
        scans::sweep(&state, &claimed, SETTINGS, &never)
            .await
            .unwrap(),
        Swept::Stopped,
        "its next flush finds it cancelled"
    );
    let ended = scan(app, &alice, &org, &id).await;
    assert_eq!(ended.status, "cancelled");
    assert_eq!(ended.counts.scanned, 3, "nothing flushed after the cancel");
    assert!(ended.ended_at.is_some());
    // Nor any result: the refused flush wrote nothing.
    let Answer(_, results) = app
        .by(&alice)
        .org(&org)
        .get(format!("/api/compliance/scans/{id}/results"))
        .await;
    assert_eq!(pagination(&results).total, 3, "{results}");
    assert!(claim(&state, Duration::from_secs(30)).await.is_none());
    app.by(&alice)
        .org(&org)
        .post(format!("/api/compliance/scans/{id}/cancel"))
        .await
        .expect(StatusCode::CONFLICT);
    app.by(&alice)
        .org(&org)
        .post("/api/compliance/scans/nope/cancel")
        .await
        .expect(StatusCode::NOT_FOUND);
    app.relay().await;
    let events = app.audited("compliance.scan.cancel").await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].target_id, Some(id));
}

async fn a_dead_sweepers_scan_is_resumed_or_failed_never_stuck(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    seed(app, &alice, &org).await;
    let id = start(app, &alice, &org, json!({"target": "pipeline"}))
        .await
        .id;
    let state = state_of(app, &[]);
    // A sweeper flushes one batch and dies (its lease runs out, nothing given back).
    let claimed = claim(&state, Duration::from_secs(30)).await.unwrap();
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let after_one = || calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= 1;
    scans::sweep(&state, &claimed, SETTINGS, &after_one)
        .await
        .unwrap();
    app.sql(&format!(
        "UPDATE scans SET holder = 'dead', lease_until = '2000-01-01T00:00:00.000000Z' WHERE id = '{id}'"
    ))
    .await;
    // While a live sweeper holds a scan, nobody else claims it.
    let held = claim(&state, Duration::from_secs(30)).await.unwrap();
    assert_eq!(held.sweep.takeovers, 1);
    assert!(claim(&state, Duration::from_secs(30)).await.is_none());
    let never = || false;
    assert_eq!(
        scans::sweep(&state, &held, SETTINGS, &never).await.unwrap(),
        Swept::Completed
    );
    let done = scan(app, &alice, &org, &id).await;
    assert_eq!(
        json!(done.counts),
        json!({"total": 10, "scanned": 10, "passed": 3, "warned": 3, "blocked": 4, "errors": 0}),
        "resumed after its last flush, nothing judged twice"
    );
    // A scan whose sweepers keep dying ends failed.
    let id = start(app, &alice, &org, json!({"target": "pipeline"}))
        .await
        .id;
    app.sql(&format!(
        "UPDATE scans SET holder = 'dead', takeovers = 3, lease_until = '2000-01-01T00:00:00.000000Z' WHERE id = '{id}'"
    ))
    .await;
    assert_eq!(sweep_all(&state).await, [Swept::Failed]);
    let failed = scan(app, &alice, &org, &id).await;
    assert_eq!(failed.status, "failed");
    assert!(
        failed.error.as_deref().unwrap().contains("4 times"),
        "{failed:?}"
    );
}

async fn schedules_are_validated_and_each_due_run_starts_once(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    seed(app, &alice, &org).await;
    for (cron, field) in [
        ("0 25 * * *", Some("hour")),
        ("61 * * * *", Some("minute")),
        ("* * 0 * *", Some("dayOfMonth")),
        ("* * * 13 *", Some("month")),
        ("* * * * MON-FUNDAY", Some("dayOfWeek")),
        ("* * *", None),
        ("", None),
    ] {
        let Answer(status, body) = app
            .by(&alice)
            .org(&org)
            .post("/api/compliance/scan-schedules")
            .json(json!({"target": "pipeline", "cronExpression": cron}))
            .await;
        assert_eq!(
            (status, code(status, &body)),
            (StatusCode::BAD_REQUEST, ErrorCode::InvalidCron),
            "{cron}: {body}"
        );
        assert_eq!(body["details"]["field"], "cronExpression");
        assert_eq!(
            body["details"]["cronField"].as_str(),
            field,
            "{cron}: {body}"
        );
    }
    app.by(&alice)
        .org(&org)
        .post("/api/compliance/scan-schedules")
        .json(json!({"target": "anything", "cronExpression": "0 3 * * *"}))
        .await
        .expect(StatusCode::BAD_REQUEST);
    let schedule: ScanSchedule = app
        .by(&alice)
        .org(&org)
        .post("/api/compliance/scan-schedules")
        .json(json!({"target": "pipeline", "cronExpression": "0  3 * * *"}))
        .await
        .expect(StatusCode::CREATED)
        .data();
    let id = schedule.id;
    assert!(schedule.is_active);
    assert_eq!(schedule.cron_expression, "0 3 * * *");
    let next = schedule.next_run_at.unwrap();
    assert!(next > Utc::now() && next - Utc::now() <= chrono::Duration::days(1));
    assert_eq!(next.format("%H:%M").to_string(), "03:00");

    // An update with an invalid expression changes nothing.
    let Answer(status, body) = app
        .by(&alice)
        .org(&org)
        .put(format!("/api/compliance/scan-schedules/{id}"))
        .json(json!({"cronExpression": "0 0 32 * *"}))
        .await;
    assert_eq!(
        (status, code(status, &body)),
        (StatusCode::BAD_REQUEST, ErrorCode::InvalidCron)
    );
    let changed: ScanSchedule = app
        .by(&alice)
        .org(&org)
        .put(format!("/api/compliance/scan-schedules/{id}"))
        .json(json!({"target": "all", "cronExpression": "*/15 * * * *"}))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(
        (changed.target.as_str(), changed.cron_expression.as_str()),
        ("all", "*/15 * * * *")
    );

    // Due now: the scheduler starts its scan once, however often it runs.
    app.sql(&format!(
        "UPDATE scan_schedules SET next_run_at = '2000-01-01T00:00:00.000000Z' WHERE id = '{id}'"
    ))
    .await;
    let state = state_of(app, &[]);
    assert_eq!(run_due_schedules(&state, Utc::now()).await.unwrap(), 1);
    assert_eq!(run_due_schedules(&state, Utc::now()).await.unwrap(), 0);
    let list = app.by(&alice).org(&org).get("/api/compliance/scans").await;
    assert_eq!(list.pagination().total, 1);
    let started = &list.items::<Scan>("scans")[0];
    assert_eq!(
        (
            started.origin.as_str(),
            started.schedule_id.as_deref(),
            started.target.as_str(),
            started.requested_by.as_str()
        ),
        ("schedule", Some(id.as_str()), "all", "alice")
    );
    let listed: Vec<ScanSchedule> = app
        .by(&alice)
        .org(&org)
        .get("/api/compliance/scan-schedules")
        .await
        .items("schedules");
    let listed = &listed[0];
    assert_eq!(listed.last_scan_id.as_ref(), Some(&started.id));
    let next = listed.next_run_at.unwrap();
    assert!(next > Utc::now() && next - Utc::now() <= chrono::Duration::minutes(15));
    assert_eq!(sweep_all(&state).await, [Swept::Completed]);

    // Toggle, then delete: inactive schedules never run.
    let toggle = |active: bool| {
        let path = format!("/api/compliance/scan-schedules/{id}/active");
        let alice = &alice;
        let org = &org;
        async move {
            app.by(alice)
                .org(org)
                .patch(path)
                .json(json!({"isActive": active}))
                .await
                .expect(StatusCode::OK)
                .data::<ScanSchedule>()
        }
    };
    let off = toggle(false).await;
    assert!(!off.is_active && off.next_run_at.is_none(), "{off:?}");
    assert!(toggle(true).await.next_run_at.is_some());
    let deleted: ScanSchedule = app
        .by(&alice)
        .org(&org)
        .delete(format!("/api/compliance/scan-schedules/{id}"))
        .await
        .expect(StatusCode::OK)
        .data();
    assert!(!deleted.is_active);
    app.sql(&format!(
        "UPDATE scan_schedules SET next_run_at = '2000-01-01T00:00:00.000000Z' WHERE id = '{id}'"
    ))
    .await;
    assert_eq!(run_due_schedules(&state, Utc::now()).await.unwrap(), 0);
    let Answer(_, got) = app
        .by(&alice)
        .org(&org)
        .get("/api/compliance/scan-schedules")
        .await;
    assert_eq!(pagination(&got).total, 1, "deactivated, not removed");

    // Another tenant cannot touch it.
    let bob_org = app.org("bob", "bobco").await;
    let bob = app.token("bob", "bob@example.com");
    app.by(&bob)
        .org(&bob_org)
        .patch(format!("/api/compliance/scan-schedules/{id}/active"))
        .json(json!({"isActive": true}))
        .await
        .expect(StatusCode::NOT_FOUND);
    app.by(&bob)
        .org(&bob_org)
        .delete(format!("/api/compliance/scan-schedules/{id}"))
        .await
        .expect(StatusCode::NOT_FOUND);

    app.relay().await;
    assert_eq!(
        app.audited("compliance.scan-schedule.create").await.len(),
        1
    );
    assert_eq!(
        app.audited("compliance.scan-schedule.update").await.len(),
        3
    );
    assert_eq!(
        app.audited("compliance.scan-schedule.delete").await.len(),
        1
    );
}

async fn the_system_organization_is_skipped_unless_enabled(app: &TestApp) {
    let (system, root) = app.system().await;
    let Answer(status, body) = app
        .by(&root)
        .org(&system)
        .post("/api/pipelines")
        .json(pipeline_as("shared", "public"))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // Skipped: the scan ends at once with nothing scanned.
    let skipped = start(app, &root, &system, json!({"target": "all"})).await;
    assert_eq!(skipped.status, "completed");
    assert_eq!(skipped.counts.total, 0);
    let schedule = app
        .by(&root)
        .org(&system)
        .post("/api/compliance/scan-schedules")
        .json(json!({"target": "all", "cronExpression": "* * * * *"}))
        .await
        .expect(StatusCode::CREATED)
        .id();
    app.sql(&format!(
        "UPDATE scan_schedules SET next_run_at = '2000-01-01T00:00:00.000000Z' WHERE id = '{schedule}'"
    ))
    .await;
    let state = state_of(app, &[]);
    assert_eq!(
        run_due_schedules(&state, Utc::now()).await.unwrap(),
        0,
        "the run is skipped"
    );
    let Answer(_, list) = app
        .by(&root)
        .org(&system)
        .get("/api/compliance/scans")
        .await;
    assert_eq!(pagination(&list).total, 1, "only the requested, empty one");
    // Enabled: swept (the system organization's entities pass: no rules apply).
    let enabled = state_of(app, &[("SYSTEM_ORG_SCANS_ENABLED", "true")]);
    app.sql(&format!(
        "UPDATE scan_schedules SET next_run_at = '2000-01-01T00:00:00.000000Z' WHERE id = '{schedule}'"
    ))
    .await;
    assert_eq!(run_due_schedules(&enabled, Utc::now()).await.unwrap(), 1);
    assert_eq!(sweep_all(&enabled).await, [Swept::Completed]);
    let Answer(_, list) = app
        .by(&root)
        .org(&system)
        .get("/api/compliance/scans?status=completed")
        .await;
    let scheduled = list["scans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["origin"] == "schedule")
        .unwrap();
    assert_eq!(scheduled["counts"]["scanned"], 1);
    assert_eq!(scheduled["counts"]["passed"], 1);
}

async fn a_viewer_reads_scans_but_cannot_start_them(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let Answer(status, body) = app
        .by(&alice)
        .post(format!("/api/organization/{org}/members"))
        .json(json!({"userId": "victor", "role": "member"}))
        .await;
    assert!(status.is_success(), "{body}");
    let victor = app.token("victor", "victor@example.com");
    app.by(&victor)
        .org(&org)
        .post("/api/compliance/scans")
        .json(json!({"target": "all"}))
        .await
        .expect(StatusCode::FORBIDDEN);
    app.by(&victor)
        .org(&org)
        .post("/api/compliance/scan-schedules")
        .json(json!({"target": "all", "cronExpression": "0 * * * *"}))
        .await
        .expect(StatusCode::FORBIDDEN);
    let Answer(status, body) = app.by(&victor).org(&org).get("/api/compliance/scans").await;
    assert_eq!(status, StatusCode::OK, "a member reads compliance: {body}");
}

/// A scan waives what an approved exemption waives, also when the replica had kept
/// "this organization has none" from a scan before the approval.
async fn a_scan_waives_what_an_approved_exemption_waives(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let ids = seed(app, &alice, &org).await;
    let state = state_of(app, &[]);
    let first = start(app, &alice, &org, json!({"target": "pipeline"}))
        .await
        .id;
    assert_eq!(sweep_all(&state).await, [Swept::Completed]);
    assert_eq!(scan(app, &alice, &org, &first).await.counts.blocked, 4);
    let Answer(_, rules) = app.by(&alice).org(&org).get("/api/compliance/rules").await;
    let private_only = rules["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "Private only")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let exemption = app
        .by(&alice)
        .org(&org)
        .post("/api/compliance/exemptions")
        .json(json!({"ruleId": private_only, "entityId": ids[0], "reason": "public by design"}))
        .await
        .expect(StatusCode::CREATED)
        .id();
    let root = app.super_token().await;
    app.by(&root)
        .org(&org)
        .put(format!("/api/compliance/exemptions/{exemption}/review"))
        .json(json!({"decision": "approve"}))
        .await
        .expect(StatusCode::OK);
    let second = start(app, &alice, &org, json!({"target": "pipeline"}))
        .await
        .id;
    assert_eq!(sweep_all(&state).await, [Swept::Completed]);
    assert_eq!(
        json!(scan(app, &alice, &org, &second).await.counts),
        json!({"total": 10, "scanned": 10, "passed": 4, "warned": 3, "blocked": 3, "errors": 0}),
        "pub-one's blocking violation is waived"
    );
}

on_both_backends!(
    a_scan_judges_the_inventory_with_exact_counts,
    a_scan_waives_what_an_approved_exemption_waives,
    filters_narrow_the_sweep_and_the_caller_cannot_name_another_tenant,
    a_cancelled_scan_stops_within_one_batch,
    a_dead_sweepers_scan_is_resumed_or_failed_never_stuck,
    schedules_are_validated_and_each_due_run_starts_once,
    the_system_organization_is_skipped_unless_enabled,
    a_viewer_reads_scans_but_cannot_start_them,
);
