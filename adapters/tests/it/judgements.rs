//! Judgements stored once (issue 59): an entity refers to its latest judgement (a
//! check-log row or a scan's result row) instead of holding a copy; it reads the same
//! JSON; a judgement that says the same leaves its row alone; retention keeps what an
//! entity refers to; the copies held before are moved, resumably, and read the same.

use crate::api::{pagination, Answer};
use adapters::code::ErrorCode;
use adapters::http::wire::{CompliancePosture, Pipeline};
use adapters::inventory::EntityResult;
use adapters::services::scans::Swept;
use chrono::Utc;

use super::fixtures::pipeline_as;
use super::*;

fn state_of(app: &TestApp) -> AppState {
    AppState::new(
        test_config(&[]),
        app.store.clone(),
        Arc::new(adapters::audit::AuditCounters::default()),
    )
}

/// Sweeps every running scan to its end, as the workers would: all complete.
async fn sweep_all(state: &AppState) {
    for end in super::scans::sweep_all(state).await {
        assert_eq!(end, Swept::Completed);
    }
}

/// One text cell of the test database (NULL as `None`).
async fn cell(app: &TestApp, sql: &str) -> Option<String> {
    sqlx::query_scalar::<_, Option<String>>(sql)
        .fetch_one(adapters::storage::pool_for_tests(&app.store))
        .await
        .unwrap()
}

/// One count of the test database.
async fn count(app: &TestApp, sql: &str) -> i64 {
    sqlx::query_scalar::<_, i64>(sql)
        .fetch_one(adapters::storage::pool_for_tests(&app.store))
        .await
        .unwrap()
}

async fn create(app: &TestApp, token: &str, org: &str, name: &str, access: &str) -> Pipeline {
    app.by(token)
        .org(org)
        .post("/api/pipelines")
        .json(pipeline_as(name, access))
        .await
        .expect(StatusCode::CREATED)
        .data()
}

async fn get(app: &TestApp, token: &str, org: &str, id: &str) -> Pipeline {
    app.by(token)
        .org(org)
        .get(format!("/api/pipelines/{id}"))
        .await
        .expect(StatusCode::OK)
        .data()
}

async fn scan(app: &TestApp, token: &str, org: &str) -> String {
    super::scans::start(app, token, org, json!({"target": "pipeline"}))
        .await
        .id
}

async fn rule(app: &TestApp, token: &str, org: &str, body: Value) {
    app.by(token)
        .org(org)
        .post("/api/compliance/rules")
        .json(body)
        .await
        .expect(StatusCode::CREATED);
}

/// An organization on Pro (room for pipelines) with a warning rule on names.
async fn setup(app: &TestApp) -> (String, String) {
    let org = app.org("alice", "acme").await;
    app.sql(&format!(
        "UPDATE organizations SET tier = 'pro' WHERE id = '{org}'"
    ))
    .await;
    let alice = app.token("alice", "alice@example.com");
    rule(
        app,
        &alice,
        &org,
        json!({"name": "Named by convention", "target": "pipeline", "severity": "warning",
               "field": "pipelineName", "operator": "regex", "value": "^[a-z]+-[a-z]+$"}),
    )
    .await;
    // The rule's own re-evaluation (a scan of nothing yet) is done.
    sweep_all(&state_of(app)).await;
    (org, alice)
}

async fn an_entity_refers_to_its_latest_judgement_stored_once(app: &TestApp) {
    let (org, alice) = setup(app).await;
    let state = state_of(app);
    let created = create(app, &alice, &org, "legacy1", "private").await;
    let id = created.id.clone();
    assert_eq!(created.compliance.result, EntityResult::Warn);
    let message = created.compliance.violations[0].message();
    assert!(message.starts_with("Named by convention: "), "{created:?}");

    // The door's check is the judgement: the entity holds no copy and refers to it;
    // the violations are stored once, without their messages (written again on read).
    let check = cell(
        app,
        &format!("SELECT judgement_check FROM pipelines WHERE id = '{id}'"),
    )
    .await
    .expect("the entity refers to its check");
    assert_eq!(
        cell(
            app,
            &format!("SELECT compliance FROM pipelines WHERE id = '{id}'")
        )
        .await,
        Some(String::new())
    );
    let stored = cell(
        app,
        &format!("SELECT violations FROM compliance_checks WHERE id = '{check}'"),
    )
    .await
    .unwrap();
    assert!(stored.contains("Named by convention") && !stored.contains("message"));
    let read = get(app, &alice, &org, &id).await;
    assert_eq!(read.compliance, created.compliance);
    let Answer(_, log) = app
        .by(&alice)
        .org(&org)
        .get(format!("/api/compliance/audit?entityId={id}"))
        .await;
    assert_eq!(log["entries"][0]["id"], check, "{log}");
    assert_eq!(
        log["entries"][0]["violations"],
        json!(read.compliance.violations)
    );

    // A scan that judges the same writes its results, not the entity's row: the
    // entity still refers to its door check.
    let xmin = format!("SELECT CAST(xmin AS TEXT) FROM pipelines WHERE id = '{id}'");
    let postgres = app.store.dialect() == adapters::storage::Dialect::Postgres;
    let version = if postgres {
        cell(app, &xmin).await
    } else {
        None
    };
    let first = scan(app, &alice, &org).await;
    sweep_all(&state).await;
    let Answer(status, results) = app
        .by(&alice)
        .org(&org)
        .get(format!("/api/compliance/scans/{first}/results"))
        .await;
    assert_eq!(status, StatusCode::OK, "{results}");
    assert_eq!(
        results["results"][0]["violations"][0]["message"], message,
        "{results}"
    );
    let read = get(app, &alice, &org, &id).await;
    assert_eq!(
        read.compliance, created.compliance,
        "no scanId: no scan set it"
    );
    assert_eq!(
        cell(
            app,
            &format!("SELECT judgement_check FROM pipelines WHERE id = '{id}'")
        )
        .await,
        Some(check.clone())
    );
    if postgres {
        assert_eq!(
            cell(app, &xmin).await,
            version,
            "an unchanged judgement rewrote the row"
        );
        // No index of the entity tables names a column that changes with a judgement.
        for table in ["pipelines", "plugins"] {
            assert_eq!(
                count(
                    app,
                    &format!("SELECT COUNT(*) FROM pg_indexes WHERE tablename = '{table}' AND indexdef LIKE '%judgement%'")
                )
                .await,
                0
            );
        }
    }

    // A judgement that says something else is referred to at once: a blocking rule,
    // whose scan sets the entity's result (and says which scan did).
    rule(
        app,
        &alice,
        &org,
        json!({"name": "Public only", "target": "pipeline", "severity": "error",
               "field": "accessModifier", "operator": "eq", "value": "public"}),
    )
    .await;
    scan(app, &alice, &org).await;
    // A state of its own: this one's rule cache follows no change signal.
    let state = state_of(app);
    sweep_all(&state).await;
    let read = get(app, &alice, &org, &id).await;
    assert_eq!(read.compliance.result, EntityResult::Block, "{read:?}");
    assert_eq!(read.compliance.violations.len(), 2);
    let by = read.compliance.scan_id.clone().unwrap();
    assert_eq!(
        read.updated_at, created.updated_at,
        "a judgement is no edit"
    );
    // Once more over the unchanged inventory: the entity keeps that scan's judgement.
    scan(app, &alice, &org).await;
    sweep_all(&state).await;
    assert_eq!(
        get(app, &alice, &org, &id).await.compliance.scan_id,
        Some(by)
    );
    // The posture reads the violations through the judgements.
    let posture: CompliancePosture = app
        .by(&alice)
        .org(&org)
        .get("/api/compliance/posture?target=pipeline")
        .await
        .expect(StatusCode::OK)
        .data();
    assert!(
        posture
            .top_failing_rules
            .iter()
            .any(|r| r.rule_name == "Public only"),
        "{posture:?}"
    );
}

async fn retention_keeps_every_judgement_an_entity_refers_to(app: &TestApp) {
    let (org, alice) = setup(app).await;
    // One entity judged by a scan (a rule added after it), one at the door only
    // (after that rule), then checks that no entity refers to.
    let door = create(app, &alice, &org, "scanned0", "private").await;
    rule(
        app,
        &alice,
        &org,
        json!({"name": "Public only", "target": "pipeline", "severity": "warning",
               "field": "accessModifier", "operator": "eq", "value": "public"}),
    )
    .await;
    scan(app, &alice, &org).await;
    // A state of its own: this one's rule cache follows no change signal.
    let state = state_of(app);
    sweep_all(&state).await;
    let scanned = create(app, &alice, &org, "door-only", "private").await;
    let also = create(app, &alice, &org, "door-too", "private").await;
    let last = scan(app, &alice, &org).await;
    sweep_all(&state).await;
    for body in [
        json!({"attributes": {"pipelineName": "x1"}, "entityId": door.id}),
        json!({"attributes": {"pipelineName": "x2"}}),
    ] {
        let Answer(status, answer) = app
            .by(&alice)
            .org(&org)
            .post("/api/compliance/validate/pipeline")
            .json(body)
            .await;
        assert!(
            status.is_success() || status == StatusCode::FORBIDDEN,
            "{answer}"
        );
    }
    let ids: Vec<String> = [&door, &scanned, &also]
        .iter()
        .map(|e| e.id.clone())
        .collect();
    let mut before = Vec::new();
    for id in &ids {
        before.push(get(app, &alice, &org, id).await.compliance);
    }
    // Everything is past retention.
    app.sql("UPDATE compliance_checks SET created_at = '2000-01-01T00:00:00.000000Z'")
        .await;
    app.sql("UPDATE scans SET ended_at = '2000-01-01T00:00:00.000000Z'")
        .await;
    let cutoff = Utc::now();
    let pruned = app.store.prune_checks(cutoff).await.unwrap();
    assert!(pruned >= 2, "the unreferenced checks go ({pruned})");
    app.store.prune_history(cutoff).await.unwrap();
    // What the entities refer to stays, so each reads as before; nothing dangles.
    for (id, compliance) in ids.iter().zip(&before) {
        assert_eq!(&get(app, &alice, &org, id).await.compliance, compliance);
    }
    assert_eq!(
        count(
            app,
            "SELECT COUNT(*) FROM pipelines p WHERE (p.judgement_check IS NOT NULL AND NOT EXISTS \
             (SELECT 1 FROM compliance_checks c WHERE c.id = p.judgement_check)) OR (p.judgement_scan IS NOT NULL \
             AND NOT EXISTS (SELECT 1 FROM scan_results r WHERE r.scan_id = p.judgement_scan AND r.entity_id = p.id))"
        )
        .await,
        0
    );
    // Only the referred-to judgements are left: the door checks of the two entities
    // created after the rule (the last scan said the same of them) and the rule's
    // scan result of the first.
    assert_eq!(
        count(app, "SELECT COUNT(*) FROM compliance_checks").await,
        2
    );
    assert_eq!(count(app, "SELECT COUNT(*) FROM scan_results").await, 1);
    assert_eq!(
        count(
            app,
            &format!("SELECT COUNT(*) FROM scan_results WHERE scan_id = '{last}'")
        )
        .await,
        0,
        "nothing refers to the last scan's results"
    );
}

async fn copies_held_before_are_moved_resumably_and_read_the_same(app: &TestApp) {
    let (org, alice) = setup(app).await;
    let state = state_of(app);
    let a = create(app, &alice, &org, "copy-a", "private").await;
    let b = create(app, &alice, &org, "copy-b", "private").await;
    let c = create(app, &alice, &org, "copyc", "private").await;
    let scanned = scan(app, &alice, &org).await;
    sweep_all(&state).await;
    let ids: Vec<String> = [&a, &b, &c].iter().map(|e| e.id.clone()).collect();
    let (a_id, b_id, c_id) = (&ids[0], &ids[1], &ids[2]);
    // As an earlier release kept them: a copy of the compliance (with the messages),
    // no reference. One set by a scan whose results exist, one by a scan pruned since,
    // one at the door.
    let c_violations = json!(get(app, &alice, &org, c_id).await.compliance.violations).to_string();
    let legacy = [
        (
            a_id,
            format!(r#"{{"result":"pass","scanId":"{scanned}","violations":[]}}"#),
        ),
        (
            b_id,
            r#"{"result":"pass","scanId":"scan-pruned-long-ago","violations":[]}"#.to_owned(),
        ),
        (
            c_id,
            format!(r#"{{"result":"warn","violations":{c_violations}}}"#),
        ),
    ];
    for (id, copy) in &legacy {
        let result = if id == &c_id { "warn" } else { "pass" };
        app.sql(&format!(
            "UPDATE pipelines SET compliance = '{}', compliance_result = '{result}', judgement_check = NULL, \
             judgement_scan = NULL, judgement_digest = NULL WHERE id = '{id}'",
            copy.replace('\'', "''")
        ))
        .await;
    }
    let mut before = Vec::new();
    for id in &ids {
        before.push(get(app, &alice, &org, id).await.compliance);
    }
    assert_eq!(before[0].scan_id.as_deref(), Some(scanned.as_str()));
    assert_eq!(before[1].scan_id.as_deref(), Some("scan-pruned-long-ago"));
    assert_eq!(app.store.judgement_copies("pipeline").await.unwrap(), 3);
    let Answer(_, log) = app.by(&alice).org(&org).get("/api/compliance/audit").await;
    let listed = pagination(&log).total;

    // One batch of one, then a stop; the next pass resumes from the start.
    let mut sorted = ids.clone();
    sorted.sort();
    let move_copies = adapters::workers::judgements::move_copies;
    let first = move_copies(&app.store, "pipeline", "", 1).await.unwrap();
    assert_eq!(first.as_ref(), sorted.first());
    assert_eq!(app.store.judgement_copies("pipeline").await.unwrap(), 2);
    let mut after = String::new();
    while let Some(last) = move_copies(&app.store, "pipeline", &after, 1)
        .await
        .unwrap()
    {
        after = last;
    }
    assert_eq!(app.store.judgement_copies("pipeline").await.unwrap(), 0);
    for (id, compliance) in ids.iter().zip(&before) {
        assert_eq!(&get(app, &alice, &org, id).await.compliance, compliance);
    }
    // The pruned scan's result row is written back; the door's copy is an unlisted
    // check, no entry of the log.
    assert_eq!(
        cell(
            app,
            &format!("SELECT judgement_scan FROM pipelines WHERE id = '{b_id}'")
        )
        .await,
        Some("scan-pruned-long-ago".to_owned())
    );
    assert!(cell(
        app,
        &format!("SELECT judgement_check FROM pipelines WHERE id = '{c_id}'")
    )
    .await
    .is_some());
    let Answer(_, log) = app.by(&alice).org(&org).get("/api/compliance/audit").await;
    assert_eq!(pagination(&log).total, listed, "{log}");
    // A later judgement that says the same leaves the moved entity alone.
    let digest = cell(
        app,
        &format!("SELECT judgement_digest FROM pipelines WHERE id = '{c_id}'"),
    )
    .await;
    scan(app, &alice, &org).await;
    sweep_all(&state).await;
    assert_eq!(
        cell(
            app,
            &format!("SELECT judgement_digest FROM pipelines WHERE id = '{c_id}'")
        )
        .await,
        digest
    );
    assert_eq!(get(app, &alice, &org, c_id).await.compliance, before[2]);
}

async fn an_entity_whose_judgement_is_missing_reads_as_an_error(app: &TestApp) {
    let (org, alice) = setup(app).await;
    let created = create(app, &alice, &org, "web-app", "private").await;
    let id = created.id.as_str();
    app.sql(&format!(
        "UPDATE pipelines SET judgement_check = 'gone' WHERE id = '{id}'"
    ))
    .await;
    let Answer(status, body) = app
        .by(&alice)
        .org(&org)
        .get(format!("/api/pipelines/{id}"))
        .await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    assert_eq!(code(status, &body), ErrorCode::InternalError);
}

on_both_backends!(
    an_entity_refers_to_its_latest_judgement_stored_once,
    retention_keeps_every_judgement_an_entity_refers_to,
    copies_held_before_are_moved_resumably_and_read_the_same,
    an_entity_whose_judgement_is_missing_reads_as_an_error,
);
