//! Reporting: one fixture stream of execution events (duplicates, out of order, a
//! resumed execution, another organization's resource name, an unregistered one,
//! a malformed event) through the ingest, and every execution report against
//! figures worked out by hand from the same events, on both backends.

use crate::api::{data_of, Answer};
use adapters::code::ErrorCode;
use adapters::http::wire::{Pipeline, UnattributedList};
use adapters::services::reports::{CountReport, DurationReport, Ingested, PluginSummaryReport};
use chrono::DateTime;

use super::fixtures::staged_pipeline;
use super::*;

const ARN_A: &str = "arn:aws:codepipeline:us-east-1:111111111111:web";
const ARN_B: &str = "arn:aws:codepipeline:us-east-1:222222222222:api";
const ARN_X: &str = "arn:aws:codepipeline:us-east-1:111111111111:nightly";
const RANGE: &str = "from=2026-11-19T00:00:00Z&to=2026-11-22T00:00:00Z";

/// One envelope as EventBridge delivers it.
fn envelope(
    id: &str,
    (resource, execution): (&str, &str),
    at: &str,
    state: &str,
    (stage, action, category): (Option<&str>, Option<&str>, Option<&str>),
) -> Value {
    let kind = match (stage, action) {
        (None, _) => "Pipeline",
        (Some(_), None) => "Stage",
        (Some(_), Some(_)) => "Action",
    };
    let mut detail = json!({
        "pipeline": resource.rsplit(':').next().unwrap(),
        "execution-id": execution,
        "state": state,
        "version": if id.len() % 2 == 0 { json!(3) } else { json!("3") },
    });
    if let Some(stage) = stage {
        detail["stage"] = json!(stage);
    }
    if let Some(action) = action {
        detail["action"] = json!(action);
        detail["type"] =
            json!({"owner": "AWS", "provider": "CodeBuild", "category": category, "version": "1"});
    }
    json!({
        "version": "0",
        "id": id,
        "detail-type": format!("CodePipeline {kind} Execution State Change"),
        "source": "aws.codepipeline",
        "account": "111111111111",
        "time": format!("2026-11-20T{at}Z"),
        "region": "us-east-1",
        "resources": [resource],
        "detail": detail,
    })
}

/// The fixture stream, in delivery order: shuffled, with duplicates.
fn stream() -> Vec<Value> {
    let p = |id: &str, r: &str, x: &str, at: &str, state: &str| {
        envelope(id, (r, x), at, state, (None, None, None))
    };
    let s = |id: &str, x: &str, at: &str, state: &str, stage: &str| {
        envelope(id, (ARN_A, x), at, state, (Some(stage), None, None))
    };
    let events = vec![
        // x1: succeeded in 100 s (Build 60 s, Deploy 40 s).
        p("e01", ARN_A, "x1", "10:00:00", "STARTED"),
        s("e02", "x1", "10:00:00", "STARTED", "Build"),
        s("e03", "x1", "10:01:00", "SUCCEEDED", "Build"),
        s("e04", "x1", "10:01:00", "STARTED", "Deploy"),
        s("e05", "x1", "10:01:40", "SUCCEEDED", "Deploy"),
        p("e06", ARN_A, "x1", "10:01:40", "SUCCEEDED"),
        // x2: a test action fails after 30 s.
        p("e07", ARN_A, "x2", "11:00:00", "STARTED"),
        s("e08", "x2", "11:00:00", "STARTED", "Test"),
        envelope(
            "e09",
            (ARN_A, "x2"),
            "11:00:30",
            "FAILED",
            (Some("Test"), Some("Unit"), Some("Test")),
        ),
        s("e10", "x2", "11:00:30", "FAILED", "Test"),
        p("e11", ARN_A, "x2", "11:00:30", "FAILED"),
        // x3: fails in Build, resumed, succeeds: 6 minutes from its start.
        p("e12", ARN_A, "x3", "12:00:00", "STARTED"),
        s("e13", "x3", "12:00:00", "STARTED", "Build"),
        s("e14", "x3", "12:00:20", "FAILED", "Build"),
        p("e15", ARN_A, "x3", "12:00:20", "FAILED"),
        p("e16", ARN_A, "x3", "12:05:00", "RESUMED"),
        s("e17", "x3", "12:05:00", "RESUMED", "Build"),
        s("e18", "x3", "12:06:00", "SUCCEEDED", "Build"),
        p("e19", ARN_A, "x3", "12:06:00", "SUCCEEDED"),
        // x4: superseded; x5: stopped after 90 s; x6: still running.
        p("e20", ARN_A, "x4", "13:00:00", "STARTED"),
        p("e21", ARN_A, "x4", "13:00:10", "SUPERSEDED"),
        p("e22", ARN_A, "x5", "14:00:00", "STARTED"),
        s("e23", "x5", "14:00:00", "STARTED", "Deploy"),
        p("e24", ARN_A, "x5", "14:01:00", "STOPPING"),
        s("e25", "x5", "14:01:30", "STOPPED", "Deploy"),
        p("e26", ARN_A, "x5", "14:01:30", "STOPPED"),
        p("e27", ARN_A, "x6", "15:00:00", "STARTED"),
        // Another organization's pipeline, and one nobody registered (yet).
        p("e28", ARN_B, "y1", "10:30:00", "STARTED"),
        p("e29", ARN_B, "y1", "10:31:00", "SUCCEEDED"),
        p("e30", ARN_X, "z1", "16:00:00", "STARTED"),
        p("e31", ARN_X, "z1", "16:00:05", "FAILED"),
    ];
    // Delivered backwards in three batches, each event of the last batch twice.
    let mut delivered: Vec<Value> = events.into_iter().rev().collect();
    let again: Vec<Value> = delivered[20..].to_vec();
    delivered.extend(again);
    delivered
}

async fn report(app: &TestApp, token: &str, org: &str, name: &str, query: &str) -> Answer {
    app.by(token)
        .org(org)
        .get(format!("/api/reports/execution/{name}?{RANGE}{query}"))
        .await
}

async fn ok(app: &TestApp, token: &str, org: &str, name: &str, query: &str) -> Value {
    let Answer(status, body) = report(app, token, org, name, query).await;
    assert_eq!(status, StatusCode::OK, "{name}{query}: {body}");
    body["data"].clone()
}

async fn pipeline(app: &TestApp, token: &str, org: &str, name: &str, arn: &str) -> String {
    let id = app
        .by(token)
        .org(org)
        .post("/api/pipelines")
        .json(staged_pipeline(name))
        .await
        .expect(StatusCode::CREATED)
        .id();
    app.by(token)
        .org(org)
        .post("/api/pipelines/registry")
        .json(json!({"arn": arn, "pipelineId": id}))
        .await
        .expect(StatusCode::OK);
    id
}

fn service(app: &TestApp) -> String {
    let mut claims = adapters::auth::Claims::user(
        "eventbridge",
        None,
        Utc::now(),
        std::time::Duration::from_secs(600),
    );
    claims.service = Some("eventbridge".to_owned());
    app.keys.sign(&claims).unwrap()
}

async fn the_fixture_stream_gives_the_same_reports_as_worked_out_by_hand(app: &TestApp) {
    let org_a = app.org("alice", "acme").await;
    let org_b = app.org("bob", "globex").await;
    let alice = app.token("alice", "alice@example.com");
    let bob = app.token("bob", "bob@example.com");
    let web = pipeline(app, &alice, &org_a, "web", ARN_A).await;
    pipeline(app, &bob, &org_b, "api", ARN_B).await;
    let service = service(app);

    // A malformed event refuses its whole batch, naming it; nothing is stored.
    let mut bad = stream()[..5].to_vec();
    bad[3]["detail"]["state"] = json!("EXPLODED");
    let Answer(status, body) = app
        .by(&service)
        .post("/api/reports/events")
        .json(json!(bad))
        .await;
    assert_eq!(code(status, &body), ErrorCode::ValidationError);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("[3].detail.state"),
        "{body}"
    );
    let counted: CountReport = report(app, &alice, &org_a, "count", "").await.data();
    assert_eq!(counted.overall.total, 0);
    // A user cannot post events.
    app.by(&alice)
        .post("/api/reports/events")
        .json(json!(stream()[0]))
        .await
        .expect(StatusCode::FORBIDDEN);

    let events = stream();
    let mut stored = 0;
    for batch in [&events[..12], &events[12..25], &events[25..]] {
        let ingested: Ingested = app
            .by(&service)
            .post("/api/reports/events")
            .json(json!(batch))
            .await
            .expect(StatusCode::OK)
            .data();
        stored += ingested.stored;
    }
    assert_eq!(stored, 31, "each event once");
    // One envelope alone is accepted too, and a redelivery stores nothing.
    let again: Ingested = app
        .by(&service)
        .post("/api/reports/events")
        .json(events[0].clone())
        .await
        .data();
    assert_eq!(again.stored, 0);

    let count = ok(app, &alice, &org_a, "count", "").await;
    assert_eq!(
        count["overall"],
        json!({"total": 6, "succeeded": 2, "failed": 1, "stopped": 1, "canceled": 0, "superseded": 1, "running": 1})
    );
    assert_eq!(count["pipelines"][0]["pipelineId"], web.as_str());
    assert_eq!(count["pipelines"].as_array().unwrap().len(), 1);

    let rate = ok(app, &alice, &org_a, "success-rate", "").await;
    assert_eq!(
        rate["overall"],
        json!({"succeeded": 2, "failed": 2, "rate": 0.5})
    );
    let series = rate["series"].as_array().unwrap();
    assert_eq!(series.len(), 3, "every day of the range, empty ones too");
    assert_eq!(
        series[0],
        json!({"start": "2026-11-19T00:00:00Z", "succeeded": 0, "failed": 0, "rate": null})
    );
    assert_eq!(series[1]["rate"], 0.5);
    let hourly = ok(app, &alice, &org_a, "success-rate", "&granularity=hour").await;
    assert_eq!(hourly["series"].as_array().unwrap().len(), 72);
    assert_eq!(
        hourly["series"][34],
        json!({"start": "2026-11-20T10:00:00Z", "succeeded": 1, "failed": 0, "rate": 1.0})
    );

    let duration = ok(app, &alice, &org_a, "duration", "").await;
    assert_eq!(
        duration["overall"],
        json!({"count": 4, "min": 30000, "mean": 145000.0, "median": 95000.0, "p95": 321000.0, "max": 360000})
    );

    // The same figures computed in Rust from the same events: each execution folded
    // from its events, then counted and summarized the plain way.
    let mut by_execution: std::collections::BTreeMap<String, Vec<reporting::ExecutionEvent>> =
        std::collections::BTreeMap::new();
    for envelope in stream() {
        let event = reporting::ExecutionEvent::parse(&envelope).unwrap();
        if event.resource == ARN_A {
            by_execution
                .entry(event.execution_id.clone())
                .or_default()
                .push(event);
        }
    }
    let folded: Vec<reporting::Execution> = by_execution
        .values()
        .map(|events| reporting::fold(events).unwrap())
        .collect();
    let with = |state: reporting::State| folded.iter().filter(|e| e.state == state).count();
    assert_eq!(count["overall"]["total"], folded.len());
    assert_eq!(
        count["overall"]["succeeded"],
        with(reporting::State::Succeeded)
    );
    assert_eq!(count["overall"]["failed"], with(reporting::State::Failed));
    assert_eq!(count["overall"]["stopped"], with(reporting::State::Stopped));
    assert_eq!(
        count["overall"]["superseded"],
        with(reporting::State::Superseded)
    );
    let mut finished: Vec<i64> = folded
        .iter()
        .filter(|e| {
            matches!(
                e.state.outcome(),
                reporting::Outcome::Success | reporting::Outcome::Failure
            )
        })
        .filter_map(|e| e.duration_ms)
        .collect();
    finished.sort_unstable();
    assert_eq!(duration["overall"]["count"], finished.len());
    assert_eq!(duration["overall"]["min"], finished[0]);
    assert_eq!(duration["overall"]["max"], *finished.last().unwrap());
    assert_eq!(
        duration["overall"]["mean"],
        finished.iter().sum::<i64>() as f64 / finished.len() as f64
    );
    assert_eq!(
        duration["overall"]["p95"],
        reporting::percentile(&finished, 95).unwrap()
    );

    let errors = ok(app, &alice, &org_a, "errors", "").await;
    assert_eq!(errors["failures"], 2);
    assert_eq!(
        errors["categories"],
        json!([{"category": "stopped", "count": 1, "share": 0.5}, {"category": "test", "count": 1, "share": 0.5}])
    );

    let failures = ok(app, &alice, &org_a, "stage-failures", "").await;
    let stages = failures["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 1, "{failures}");
    assert_eq!(stages[0]["stage"], "Test");
    assert_eq!(stages[0]["failures"], 1);
    assert_eq!(stages[0]["series"].as_array().unwrap().len(), 3);
    assert_eq!(stages[0]["series"][1]["count"], 1);

    let slow = ok(app, &alice, &org_a, "stage-bottlenecks", "").await;
    let names: Vec<&str> = slow["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Build", "Deploy", "Test"]);
    assert_eq!(slow["stages"][0]["durations"]["p95"], 345000.0);
    assert_eq!(slow["stages"][1]["durations"]["p95"], 87500.0);
    let top = ok(app, &alice, &org_a, "stage-bottlenecks", "&limit=1").await;
    assert_eq!(top["stages"].as_array().unwrap().len(), 1);

    // The other organization sees its own only.
    let theirs = ok(app, &bob, &org_b, "count", "").await;
    assert_eq!(theirs["overall"]["total"], 1);
    assert_eq!(theirs["overall"]["succeeded"], 1);

    // The unregistered name waits aside, listed for super-admins, until registered.
    let root = app.token("root", ROOT_EMAIL);
    app.by(&root)
        .post("/api/organization")
        .json(json!({"name": "system"}))
        .await
        .expect(StatusCode::CREATED);
    let waiting: UnattributedList = app
        .by(&root)
        .get("/api/reports/unattributed")
        .await
        .expect(StatusCode::OK)
        .data();
    let first = &waiting.resources[0];
    assert_eq!((first.resource.as_str(), first.executions), (ARN_X, 1));
    app.by(&alice)
        .get("/api/reports/unattributed")
        .await
        .expect(StatusCode::FORBIDDEN);
    let nightly = pipeline(app, &alice, &org_a, "nightly", ARN_X).await;
    let count = ok(app, &alice, &org_a, "count", "").await;
    assert_eq!(count["overall"]["total"], 7);
    assert_eq!(count["pipelines"][1]["pipelineId"], nightly.as_str());
    let waiting: UnattributedList = app.by(&root).get("/api/reports/unattributed").await.data();
    assert!(waiting.resources.is_empty(), "{waiting:?}");
    let errors = ok(
        app,
        &alice,
        &org_a,
        "errors",
        &format!("&pipelineId={nightly}"),
    )
    .await;
    assert_eq!(
        errors["categories"],
        json!([{"category": "pipeline", "count": 1, "share": 1.0}])
    );
}

/// Issue 51: a resource name has one owner at a time, live or restorable (a second
/// registration by another organization is 409; a super-admin may move it, audited
/// in both); history attributed to an organization stays its own (a move, a delete,
/// a restore), and a purged organization's executions never come back as another's.
async fn execution_data_stays_with_its_organization(app: &TestApp) {
    let acme = app.org("alice", "acme").await;
    let globex = app.org("bob", "globex").await;
    let alice = app.token("alice", "alice@example.com");
    let bob = app.token("bob", "bob@example.com");
    pipeline(app, &alice, &acme, "web", ARN_A).await;
    let service = service(app);
    app.by(&service)
        .post("/api/reports/events")
        .json(json!(stream()))
        .await
        .expect(StatusCode::OK);
    let total = |token: String, org: String| async move {
        ok(app, &token, &org, "count", "").await["overall"]["total"].clone()
    };
    assert_eq!(total(alice.clone(), acme.clone()).await, 6);

    // Globex cannot take acme's name: 409, and acme's analytics stay as they were.
    let bobs = app
        .by(&bob)
        .org(&globex)
        .post("/api/pipelines")
        .json(staged_pipeline("web"))
        .await
        .expect(StatusCode::CREATED)
        .id();
    let register = |token: String, take_over: bool| {
        let bobs = bobs.clone();
        let globex = globex.clone();
        async move {
            app.by(&token)
                .org(&globex)
                .post("/api/pipelines/registry")
                .json(json!({"arn": ARN_A, "pipelineId": bobs, "takeOver": take_over}))
                .await
        }
    };
    let Answer(status, body) = register(bob.clone(), false).await;
    assert_eq!(code(status, &body), ErrorCode::Conflict, "{body}");
    let Answer(status, body) = register(bob.clone(), true).await;
    assert_eq!(
        code(status, &body),
        ErrorCode::Forbidden,
        "only a super-admin moves it: {body}"
    );
    assert_eq!(total(alice.clone(), acme.clone()).await, 6);
    assert_eq!(total(bob.clone(), globex.clone()).await, 0);

    // Deleted, acme still holds it (it may be restored): still 409.
    let root = app.super_token().await;
    let step = app.step_up("root", 0);
    app.by(&root)
        .step_up(&step)
        .delete(format!("/api/organization/{acme}"))
        .await
        .expect(StatusCode::OK);
    let Answer(status, body) = register(bob.clone(), false).await;
    assert_eq!(code(status, &body), ErrorCode::Conflict, "{body}");
    assert_eq!(
        total(bob.clone(), globex.clone()).await,
        0,
        "nothing of acme's leaked"
    );
    app.by(&root)
        .step_up(step)
        .post(format!("/api/organization/{acme}/restore"))
        .await
        .expect(StatusCode::OK);
    assert_eq!(
        total(alice.clone(), acme.clone()).await,
        6,
        "restored with its history"
    );

    // A super-admin moves the name: the history stays acme's, new runs are globex's.
    let Answer(status, body) = register(root.clone(), true).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(total(alice.clone(), acme.clone()).await, 6);
    assert_eq!(total(bob.clone(), globex.clone()).await, 0);
    let moved = app.audited("pipeline.registry.deregister").await;
    assert!(
        moved
            .iter()
            .any(|e| e.chain_key == acme && e.details["movedTo"] == globex.as_str()),
        "{moved:?}"
    );
    let later = vec![envelope(
        "n1",
        (ARN_A, "x9"),
        "18:00:00",
        "STARTED",
        (None, None, None),
    )];
    app.by(&service)
        .post("/api/reports/events")
        .json(json!(later))
        .await
        .expect(StatusCode::OK);
    assert_eq!(total(bob.clone(), globex.clone()).await, 1);
    assert_eq!(total(alice.clone(), acme.clone()).await, 6);

    // Globex is deleted and purged: its events go with it; a third organization
    // registering the name gets none of its history, nor acme's.
    let step = app.step_up("root", 0);
    app.by(&root)
        .step_up(step)
        .delete(format!("/api/organization/{globex}"))
        .await
        .expect(StatusCode::OK);
    // Purged as past its window (a restore window of no days, a second from now).
    adapters::workers::retention::purge_deleted(
        &app.store,
        Utc::now() + chrono::Duration::seconds(1),
        0,
    )
    .await
    .unwrap();
    let initech = app.org("carol", "initech").await;
    let carol = app.token("carol", "carol@example.com");
    pipeline(app, &carol, &initech, "web", ARN_A).await;
    assert_eq!(total(carol.clone(), initech.clone()).await, 0);
    assert_eq!(total(alice.clone(), acme.clone()).await, 6);
}

async fn reports_are_scoped_permitted_and_refuse_hostile_parameters(app: &TestApp) {
    let root = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let team = app
        .by(&alice)
        .post("/api/organization")
        .json(json!({"name": "team-a", "parentOrgId": root}))
        .await
        .expect(StatusCode::CREATED)
        .id();
    pipeline(app, &alice, &team, "web", ARN_A).await;
    let service = service(app);
    app.by(&service)
        .post("/api/reports/events")
        .json(json!(stream()))
        .await
        .expect(StatusCode::OK);
    // The root's own report holds none of its team's; with includeTeams it does.
    assert_eq!(
        ok(app, &alice, &root, "count", "").await["overall"]["total"],
        0
    );
    let rolled = ok(app, &alice, &root, "count", "&includeTeams=true").await;
    assert_eq!(rolled["overall"]["total"], 6);
    assert_eq!(rolled["scope"]["orgIds"], json!([root, team]));
    // A member has reports:read, not reports:rollup; a stranger neither.
    app.by(&alice)
        .post(format!("/api/organization/{root}/members"))
        .json(json!({"userId": "mia"}))
        .await
        .expect(StatusCode::CREATED);
    let mia = app.token("mia", "mia@example.com");
    assert_eq!(
        ok(app, &mia, &root, "count", "").await["overall"]["total"],
        0
    );
    let Answer(status, body) = report(app, &mia, &root, "count", "&includeTeams=true").await;
    assert_eq!(code(status, &body), ErrorCode::Forbidden);
    let eve = app.token("eve", "eve@example.com");
    let Answer(status, body) = report(app, &eve, &root, "count", "").await;
    assert_eq!(code(status, &body), ErrorCode::TenantForbidden);
    // Events stored but not derived (a crash between the two) are derived by the
    // worker's pass.
    let late = envelope(
        "late-1",
        (ARN_A, "x9"),
        "17:00:00",
        "STARTED",
        (None, None, None),
    );
    let parsed = reporting::ExecutionEvent::parse(&late).unwrap();
    // Stored, and not derived (as after a crash between an ingest and its derivation).
    let mut unit = app.store.transaction().await.unwrap();
    unit.record_report_events(
        &[adapters::storage::NewReportEvent {
            id: parsed.id.clone(),
            resource: parsed.resource.clone(),
            execution_id: parsed.execution_id.clone(),
            occurred_at: parsed.time,
            body: serde_json::to_string(&parsed).unwrap(),
        }],
        Utc::now(),
    )
    .await
    .unwrap();
    unit.commit().await.unwrap();
    assert_eq!(
        ok(app, &alice, &root, "count", "&includeTeams=true").await["overall"]["total"],
        6
    );
    let state = AppState::new(test_config(&[]), app.store.clone(), Arc::default());
    assert_eq!(
        adapters::services::reports::derive_pending(&state.infra.store, 100)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        adapters::services::reports::derive_pending(&state.infra.store, 100)
            .await
            .unwrap(),
        0
    );
    let counted = ok(app, &alice, &root, "count", "&includeTeams=true").await;
    assert_eq!(counted["overall"]["total"], 7);
    assert_eq!(counted["overall"]["running"], 2);
    // Retention: what started before the cutoff goes, with its events.
    let pruned = adapters::workers::retention::prune_reports(
        &app.store,
        DateTime::parse_from_rfc3339("2026-11-20T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc),
    )
    .await
    .unwrap();
    assert_eq!(pruned, 2, "x1 and x2 started before noon");
    let left = ok(app, &alice, &root, "count", "&includeTeams=true").await;
    assert_eq!(left["overall"]["total"], 5);
    // A stored failure whose category this server does not know is a corrupt row:
    // the report fails closed instead of guessing.
    app.sql("UPDATE report_executions SET error = 'mystery' WHERE outcome = 'failure'")
        .await;
    let Answer(status, body) = report(app, &alice, &team, "errors", "").await;
    assert_eq!(code(status, &body), ErrorCode::InternalError, "{body}");
    app.sql("UPDATE report_executions SET error = 'test' WHERE error = 'mystery'")
        .await;
    // An empty range is zeros, not an error.
    let empty: DurationReport = app
        .by(&alice)
        .org(&team)
        .get("/api/reports/execution/duration?from=2020-01-01T00:00:00Z&to=2020-01-02T00:00:00Z")
        .await
        .expect(StatusCode::OK)
        .data();
    assert!(empty.overall.is_none());
    // Hostile parameters: 400, the parameter named.
    for (query, field) in [
        ("from=2016-01-01T00:00:00Z&to=2026-01-01T00:00:00Z", "from"),
        ("from=2026-11-22T00:00:00Z&to=2026-11-21T00:00:00Z", "from"),
        ("from=yesterday", "from"),
        ("to=soon", "to"),
        ("limit=-1", "limit"),
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=ten", "limit"),
        ("granularity=minute", "granularity"),
        ("includeTeams=maybe", "includeTeams"),
    ] {
        let Answer(status, body) = app
            .by(&alice)
            .org(&team)
            .get(format!("/api/reports/execution/success-rate?{query}"))
            .await;
        assert_eq!(
            code(status, &body),
            ErrorCode::ValidationError,
            "{query}: {body}"
        );
        assert_eq!(body["details"]["field"], field, "{query}: {body}");
    }
    let Answer(status, body) = app
        .by(&alice)
        .org(&team)
        .get("/api/reports/execution/count?colour=red")
        .await;
    assert_eq!(code(status, &body), ErrorCode::ValidationError, "{body}");
    // A batch over the bound, an empty one, a non-event.
    let many: Vec<Value> = (0..1001)
        .map(|i| {
            let mut e = stream()[0].clone();
            e["id"] = json!(format!("many-{i}"));
            e
        })
        .collect();
    for body in [
        json!(many),
        json!([]),
        json!("events"),
        json!([{"id": "x"}]),
    ] {
        app.by(&service)
            .post("/api/reports/events")
            .json(body)
            .await
            .refused(ErrorCode::ValidationError);
    }
}

on_both_backends!(
    execution_data_stays_with_its_organization,
    the_fixture_stream_gives_the_same_reports_as_worked_out_by_hand,
    reports_are_scoped_permitted_and_refuse_hostile_parameters,
);

/// `compliance report ingest`: a backfill file (one envelope per line, duplicates
/// included) sent to a real server process in batches; a malformed file sends
/// nothing.
#[tokio::test]
async fn the_command_line_backfills_a_file() {
    use super::crash::{create_org, free_port, start_with, user_token, wait_healthy};
    let dir = std::env::temp_dir().join(format!("compliance-backfill-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}", dir.join("reports.db").display());
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let server = start_with(&url, port, &[]);
    let client = reqwest::Client::new();
    wait_healthy(&client, &base).await;
    let alice = user_token("alice");
    let org = create_org(&client, &base, &alice, "acme").await;
    let created: Pipeline = data_of(
        client
            .post(format!("{base}/api/pipelines"))
            .bearer_auth(&alice)
            .header("x-org-id", &org)
            .json(&staged_pipeline("web"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let pipeline = created.id.as_str();
    let registered = client
        .post(format!("{base}/api/pipelines/registry"))
        .bearer_auth(&alice)
        .header("x-org-id", &org)
        .json(&json!({"arn": ARN_A, "pipelineId": pipeline}))
        .send()
        .await
        .unwrap();
    assert_eq!(registered.status(), StatusCode::OK);
    let mut claims = adapters::auth::Claims::user(
        "backfill",
        None,
        Utc::now(),
        std::time::Duration::from_secs(600),
    );
    claims.service = Some("backfill".to_owned());
    let service = adapters::auth::TokenKeys::hs256(SECRET)
        .sign(&claims)
        .unwrap();
    let ingest = |file: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_compliance"))
            .args([
                "report",
                "ingest",
                &file.display().to_string(),
                "--batch",
                "7",
            ])
            .env("PLATFORM_URL", &base)
            .env("PLATFORM_TOKEN", &service)
            .output()
            .unwrap()
    };
    let lines: Vec<String> = stream().iter().map(Value::to_string).collect();
    let mut broken = lines.clone();
    broken[4] = broken[4].replace("aws.codepipeline", "aws.ec2");
    let bad = dir.join("bad.ndjson");
    std::fs::write(&bad, broken.join("\n")).unwrap();
    let refused = ingest(&bad);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("event 5: source"),
        "{refused:?}"
    );
    let good = dir.join("events.ndjson");
    std::fs::write(&good, lines.join("\n")).unwrap();
    let sent = ingest(&good);
    assert!(sent.status.success(), "{sent:?}");
    let totals: Value = serde_json::from_slice(&sent.stdout).unwrap();
    assert_eq!(totals["received"], 42, "31 events, 11 of them twice");
    assert_eq!(totals["stored"], 31);
    let count: CountReport = data_of(
        client
            .get(format!("{base}/api/reports/execution/count?{RANGE}"))
            .bearer_auth(&alice)
            .header("x-org-id", &org)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(count.overall.total, 6, "{count:?}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// With `REPORTING_DATABASE_URL`, reports read the standby while its heartbeat is
/// at most `REPORTING_MAX_LAG_SECONDS` old, and say so (`scope.readFrom`,
/// `scope.asOf`: the standby's heartbeat); beyond, or when it does not answer, they
/// read the primary and say that. The standby's sessions are read-only.
#[tokio::test]
async fn reports_read_the_standby_while_it_keeps_up() {
    let Some(app) = TestApp::postgres().await else {
        return;
    };
    let Some((standby_url, admin_url, standby_name)) = fresh_postgres().await else {
        return;
    };
    // The "standby": another database of the same schema, without the events, whose
    // heartbeat this test writes as the primary's replication would.
    let standby_writer = Store::connect(&standby_url).await.unwrap();
    adapters::services::operations::migrate(&standby_writer)
        .await
        .unwrap();
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    pipeline(&app, &alice, &org, "web", ARN_A).await;
    app.by(&service(&app))
        .post("/api/reports/events")
        .json(json!(stream()))
        .await
        .expect(StatusCode::OK);
    let on_primary = ok(&app, &alice, &org, "count", "").await;
    assert_eq!(on_primary["scope"]["readFrom"], "primary");
    assert!(on_primary["overall"]["total"].as_u64().unwrap() > 0);

    let standby = Store::connect_standby(&standby_url).await.unwrap();
    let reader = app
        .reading_reports_from(standby.clone(), &[("REPORTING_MAX_LAG_SECONDS", "30")])
        .await;
    // No heartbeat yet: the primary.
    let read = ok(&reader, &alice, &org, "count", "").await;
    assert_eq!(read["scope"]["readFrom"], "primary");
    assert_eq!(read["overall"], on_primary["overall"]);

    // A heartbeat 5 s old: the standby (which has no events), as of the beat.
    let beat = Utc::now() - chrono::Duration::seconds(5);
    standby_writer.beat(beat).await.unwrap();
    let read = ok(&reader, &alice, &org, "count", "").await;
    assert_eq!(read["scope"]["readFrom"], "standby", "{read}");
    assert_eq!(read["overall"]["total"], 0);
    let as_of: chrono::DateTime<Utc> = read["scope"]["asOf"].as_str().unwrap().parse().unwrap();
    assert!(
        (as_of - beat).num_milliseconds().abs() < 1,
        "{as_of} {beat}"
    );
    let plugins: PluginSummaryReport = reader
        .by(&alice)
        .org(&org)
        .get(format!("/api/reports/plugins/summary?{RANGE}"))
        .await
        .data();
    assert_eq!(json!(plugins.scope.read_from), "standby", "{plugins:?}");

    // Its sessions write nothing.
    let refused = standby.beat(Utc::now()).await.unwrap_err();
    assert!(
        matches!(refused, adapters::storage::StoreError::Unavailable(_)),
        "{refused:?}"
    );

    // A heartbeat older than the lag allowed: the primary again, as of now.
    let reader_strict = app
        .reading_reports_from(standby.clone(), &[("REPORTING_MAX_LAG_SECONDS", "3")])
        .await;
    let before = Utc::now();
    let read = ok(&reader_strict, &alice, &org, "count", "").await;
    assert_eq!(read["scope"]["readFrom"], "primary");
    assert_eq!(read["overall"], on_primary["overall"]);
    let as_of: chrono::DateTime<Utc> = read["scope"]["asOf"].as_str().unwrap().parse().unwrap();
    assert!(as_of >= before - chrono::Duration::milliseconds(1));

    // A standby that does not answer: the primary.
    standby.close().await;
    let read = ok(&reader, &alice, &org, "count", "").await;
    assert_eq!(read["scope"]["readFrom"], "primary");
    assert_eq!(read["overall"], on_primary["overall"]);

    reader.stop().await;
    reader_strict.stop().await;
    standby_writer.close().await;
    drop_postgres(&admin_url, &standby_name).await;
    app.finish().await;
}

/// Every report answers the same JSON, byte for byte, on SQLite and PostgreSQL for
/// one event stream (issue 51): a root and its team, ties in every list, stage
/// names that a database's collation orders otherwise than bytes do (`Build`,
/// `build`, `Étape`, `zeta`). The servers' random ids are made the same on both
/// (pipelines) or replaced by names in the text (organizations), so that what is
/// compared is the backends' answers alone.
#[tokio::test]
async fn every_report_is_the_same_json_on_both_backends() {
    let Some(postgres) = TestApp::postgres().await else {
        return;
    };
    let sqlite = TestApp::sqlite().await;
    let mut answers = Vec::new();
    for app in [&sqlite, &postgres] {
        answers.push(every_report(app).await);
    }
    let (left, right) = (&answers[0], &answers[1]);
    assert_eq!(left.len(), right.len());
    for ((name, a), (_, b)) in left.iter().zip(right) {
        assert_eq!(a, b, "{name} differs between SQLite and PostgreSQL");
    }
    sqlite.finish().await;
    postgres.finish().await;
}

/// Each report's answer as text, for the fixture stream with collation-sensitive
/// stage names, through a root and its team.
/// A report's answer with its `scope.asOf` (the instant it was read: differs from
/// run to run) replaced by a mark, after checking it is a time.
fn without_as_of(mut body: Value) -> Value {
    let as_of = &mut body["data"]["scope"]["asOf"];
    assert!(
        as_of
            .as_str()
            .is_some_and(|t| t.parse::<DateTime<Utc>>().is_ok()),
        "{as_of}"
    );
    *as_of = json!("AS-OF");
    body
}

async fn every_report(app: &TestApp) -> Vec<(String, String)> {
    let root = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let team = app
        .by(&alice)
        .post("/api/organization")
        .json(json!({"name": "team-a", "parentOrgId": root}))
        .await
        .expect(StatusCode::CREATED)
        .id();
    let web = pipeline(app, &alice, &root, "web", ARN_A).await;
    let api = pipeline(app, &alice, &team, "api", ARN_B).await;
    let nightly = pipeline(app, &alice, &root, "nightly", ARN_X).await;
    for (id, fixed) in [(&web, "p-web"), (&api, "p-api"), (&nightly, "p-nightly")] {
        app.sql(&format!(
            "UPDATE pipelines SET id = '{fixed}' WHERE id = '{id}'"
        ))
        .await;
        app.sql(&format!(
            "UPDATE pipeline_registry SET pipeline_id = '{fixed}' WHERE pipeline_id = '{id}'"
        ))
        .await;
    }
    let mut events = stream();
    // Stages whose names a collation orders otherwise than bytes, failing and
    // taking the same time, so that only the order of names tells them apart.
    for (n, stage) in ["zeta", "Étape", "build", "Build"].iter().enumerate() {
        for (resource, execution) in [(ARN_B, "y1"), (ARN_X, "z1")] {
            let id = |k: &str| format!("c-{resource}-{n}-{k}");
            let stage = Some(*stage);
            events.push(envelope(
                &id("s"),
                (resource, execution),
                "16:10:00",
                "STARTED",
                (stage, None, None),
            ));
            events.push(envelope(
                &id("f"),
                (resource, execution),
                "16:10:30",
                "FAILED",
                (stage, None, None),
            ));
        }
    }
    let service = service(app);
    app.by(&service)
        .post("/api/reports/events")
        .json(json!(events))
        .await
        .expect(StatusCode::OK);
    let mut answers = Vec::new();
    for name in [
        "count",
        "success-rate",
        "duration",
        "stage-failures",
        "stage-bottlenecks",
        "errors",
    ] {
        for query in [
            "",
            "&includeTeams=true",
            "&includeTeams=true&granularity=hour&limit=3",
        ] {
            let Answer(status, body) = report(app, &alice, &root, name, query).await;
            assert_eq!(status, StatusCode::OK, "{name}{query}: {body}");
            let text = without_as_of(body)
                .to_string()
                .replace(&root, "ORG-ROOT")
                .replace(&team, "ORG-TEAM");
            if name == "stage-failures" && query == "&includeTeams=true" {
                // Equal failures: the names in byte order, not a collation's.
                let at = |stage: &str| {
                    text.find(&format!("\"stage\":\"{stage}\""))
                        .unwrap_or(usize::MAX)
                };
                let order = [at("Build"), at("build"), at("zeta"), at("Étape")];
                assert!(order.iter().all(|i| *i != usize::MAX), "{text}");
                assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}: {text}");
            }
            answers.push((format!("{name}{query}"), text));
        }
    }
    for name in [
        "summary",
        "build-success-rate",
        "build-duration",
        "build-failures",
    ] {
        let Answer(status, body) = app
            .by(&alice)
            .org(&root)
            .get(format!(
                "/api/reports/plugins/{name}?{RANGE}&includeTeams=true"
            ))
            .await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
        let text = without_as_of(body)
            .to_string()
            .replace(&root, "ORG-ROOT")
            .replace(&team, "ORG-TEAM");
        answers.push((name.to_owned(), text));
    }
    answers
}
