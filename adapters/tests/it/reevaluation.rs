//! The re-evaluation worker: a mutation's events judged again under their own
//! tenant, a burst coalesced, a failure retried and then dead with its error; a rule
//! or subscription change queued once per organization and target, as a scan.

use crate::api::{pagination, Answer};
use std::time::Duration;

use adapters::config::ReevaluationSettings;
use adapters::http::wire::{Pipeline, Scan};
use adapters::inventory::{EntityCompliance, EntityResult};
use adapters::storage::ClaimedEntity;

use super::fixtures::pipeline;
use super::*;

fn settings() -> ReevaluationSettings {
    ReevaluationSettings {
        max_attempts: 2,
        retry_delay: Duration::ZERO,
        poll: Duration::from_millis(10),
    }
}

fn state_of(app: &TestApp) -> AppState {
    AppState::new(
        test_config(&[]),
        app.store.clone(),
        Arc::new(adapters::audit::AuditCounters::default()),
    )
}

/// Runs the worker's steps until the queue has nothing due; how many entities it
/// claimed (an entity claimed twice counts twice).
async fn drain(state: &AppState) -> usize {
    let mut claims = 0;
    loop {
        let claimed = adapters::workers::reevaluation::step(state, &settings())
            .await
            .unwrap();
        if claimed == 0 {
            return claims;
        }
        claims += claimed;
    }
}

/// Drains the queue and sweeps the scans it started, on a fresh state (each process's
/// rule cache is its own; the changes went through the router's).
async fn settle(app: &TestApp) -> usize {
    let state = state_of(app);
    let claims = drain(&state).await;
    super::scans::sweep_all(&state).await;
    claims
}

async fn mutations_are_judged_again_once_per_burst(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let id = create_pipeline(app, &alice, &org, pipeline("ci")).await;
    // A burst of 30 edits: 31 events for one pipeline.
    for i in 0..30 {
        let mut body = pipeline("ci");
        body["props"] = json!({"revision": i});
        app.by(&alice)
            .org(&org)
            .put(format!("/api/pipelines/{id}"))
            .json(body)
            .await
            .expect(StatusCode::OK);
    }
    assert_eq!(app.store.pending_reevaluations(&org).await.unwrap(), 31);
    // A rule arrives after the edits (queued in its transaction for the entities it
    // can affect); the stored result is stale until re-evaluated.
    let rule_id = app
        .by(&alice)
        .org(&org)
        .post("/api/compliance/rules")
        .json(
            json!({"name": "Named by convention", "target": "pipeline", "severity": "warning",
                        "field": "pipelineName", "operator": "regex", "value": "^[a-z]+-[a-z]+$"}),
        )
        .await
        .expect(StatusCode::CREATED)
        .id();
    assert_eq!(app.store.pending_reevaluations(&org).await.unwrap(), 32);
    let Answer(_, before) = app
        .by(&alice)
        .org(&org)
        .get(format!("/api/compliance/audit?entityId={id}"))
        .await;
    let state = state_of(app);
    let claims = drain(&state).await;
    assert_eq!(
        claims, 2,
        "31 events of one entity judged once; the rule's one event starts a scan"
    );
    let scans = app.by(&alice).org(&org).get("/api/compliance/scans").await;
    assert_eq!(scans.pagination().total, 1);
    let scan = &scans.items::<Scan>("scans")[0];
    assert_eq!(
        (
            scan.origin.as_str(),
            scan.requested_by.as_str(),
            scan.counts.total
        ),
        ("rule-change", "system:reevaluation", 1)
    );
    assert_eq!(app.store.pending_reevaluations(&org).await.unwrap(), 0);
    let compliance = compliance_of(app, &alice, &org, &id).await;
    assert_eq!(compliance.result, EntityResult::Warn);
    assert_eq!(
        compliance.violations.first().map(|v| v.rule_name()),
        Some("Named by convention")
    );
    let Answer(_, after) = app
        .by(&alice)
        .org(&org)
        .get(format!("/api/compliance/audit?entityId={id}"))
        .await;
    assert_eq!(
        pagination(&after).total,
        pagination(&before).total + 1,
        "one check recorded for the burst"
    );
    // Deleting the rule queues the pipeline again: it passes once more.
    app.by(&alice)
        .org(&org)
        .delete(format!("/api/compliance/rules/{rule_id}"))
        .await
        .expect(StatusCode::OK);
    assert_eq!(app.store.pending_reevaluations(&org).await.unwrap(), 1);
    let state = state_of(app);
    assert_eq!(drain(&state).await, 1);
    super::scans::sweep_all(&state).await;
    assert_eq!(
        compliance_of(app, &alice, &org, &id).await.result,
        EntityResult::Pass
    );
    // A deleted entity's events are dropped without a judgement.
    app.by(&alice)
        .org(&org)
        .delete(format!("/api/pipelines/{id}"))
        .await
        .expect(StatusCode::OK);
    assert_eq!(drain(&state).await, 1);
    assert_eq!(app.store.pending_reevaluations(&org).await.unwrap(), 0);
}

async fn a_failing_judgement_is_retried_then_dead(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    create_pipeline(app, &alice, &org, pipeline("ci")).await;
    let Answer(status, body) = app
        .by(&alice)
        .org(&org)
        .post("/api/compliance/rules")
        .json(
            json!({"name": "r", "target": "pipeline", "severity": "warning",
                        "field": "pipelineName", "operator": "eq", "value": "ci"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // A stored rule that no longer reads: the judgement fails closed.
    app.sql("UPDATE rules SET body = '{' ").await;
    let state = state_of(app);
    assert_eq!(
        drain(&state).await,
        3,
        "the pipeline's attempt and its retry; the rule's event (a scan started)"
    );
    let depth = app.store.reevaluation_depth().await.unwrap();
    assert_eq!((depth.waiting, depth.dead), (0, 1));
    let text = state.infra.metrics.render();
    assert!(text.contains("reevaluation_retried_total 1"), "{text}");
    assert!(text.contains("reevaluation_dead_total 1"), "{text}");
    let request = Request::get("/metrics").body(Body::empty()).unwrap();
    let (_, body) = app.send(request).await;
    let text = body.as_str().unwrap();
    assert!(text.contains("reevaluation_queue_dead 1"), "{text}");
    assert!(text.contains("reevaluation_queue_depth 0"), "{text}");
}

async fn a_subscription_change_judges_the_organizations_entities_again(app: &TestApp) {
    let (system, root) = app.system().await;
    let rule_id = app
        .by(&root)
        .org(&system)
        .post("/api/compliance/rules")
        .json(
            json!({"name": "Private only", "target": "pipeline", "severity": "warning",
                        "field": "accessModifier", "operator": "eq", "value": "private",
                        "scope": "published"}),
        )
        .await
        .expect(StatusCode::CREATED)
        .id();
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let mut id = String::new();
    for name in ["one", "two"] {
        let mut body = pipeline(name);
        body["accessModifier"] = json!("public");
        id = app
            .by(&alice)
            .org(&org)
            .post("/api/pipelines")
            .json(body)
            .await
            .expect(StatusCode::CREATED)
            .id();
    }
    drain(&state_of(app)).await;
    // Subscribing (inactive) changes nothing; activating queues the organization's
    // pipelines, as one event.
    app.by(&alice)
        .org(&org)
        .post("/api/compliance/subscriptions")
        .json(json!({"ruleId": rule_id}))
        .await
        .expect(StatusCode::CREATED);
    assert_eq!(app.store.pending_reevaluations(&org).await.unwrap(), 0);
    app.by(&alice)
        .org(&org)
        .patch(format!("/api/compliance/subscriptions/{rule_id}"))
        .json(json!({"isActive": true}))
        .await
        .expect(StatusCode::OK);
    assert_eq!(app.store.pending_reevaluations(&org).await.unwrap(), 1);
    assert_eq!(settle(app).await, 1);
    assert_eq!(
        compliance_of(app, &alice, &org, &id).await.result,
        EntityResult::Warn
    );
    // Unsubscribing queues them again: the result no longer names the rule.
    app.by(&alice)
        .org(&org)
        .delete(format!("/api/compliance/subscriptions/{rule_id}"))
        .await
        .expect(StatusCode::OK);
    assert_eq!(app.store.pending_reevaluations(&org).await.unwrap(), 1);
    settle(app).await;
    assert_eq!(
        compliance_of(app, &alice, &org, &id).await.result,
        EntityResult::Pass
    );
}

async fn a_rule_moved_to_another_target_judges_its_old_target_again(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let id = create_pipeline(app, &alice, &org, pipeline("ci")).await;
    let rule = json!({"name": "r", "target": "pipeline", "severity": "warning",
                      "field": "pipelineName", "operator": "eq", "value": "cd"});
    let rule_id = app
        .by(&alice)
        .org(&org)
        .post("/api/compliance/rules")
        .json(rule.clone())
        .await
        .expect(StatusCode::CREATED)
        .id();
    // Each drain on a fresh state: a state's rule cache is its process's, which the
    // change made through the router's state does not reach here.
    drain(&state_of(app)).await;
    assert_eq!(
        compliance_of(app, &alice, &org, &id).await.result,
        EntityResult::Warn
    );
    let mut moved = rule;
    moved["target"] = json!("plugin");
    moved["field"] = json!("name");
    app.by(&alice)
        .org(&org)
        .put(format!("/api/compliance/rules/{rule_id}"))
        .json(moved)
        .await
        .expect(StatusCode::OK);
    assert_eq!(
        app.store.pending_reevaluations(&org).await.unwrap(),
        1,
        "the pipelines, judged by the rule before (no plugins: nothing for them)"
    );
    assert_eq!(settle(app).await, 1);
    assert_eq!(
        compliance_of(app, &alice, &org, &id).await.result,
        EntityResult::Pass
    );
}

/// Two claims never judge one entity at once: while an entity's events are claimed,
/// an event that arrives for it waits for that claim to end, and other entities are
/// claimed meanwhile.
async fn an_entity_being_judged_is_not_claimed_again(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let mut ids = Vec::new();
    for name in ["ci", "cd"] {
        ids.push(create_pipeline(app, &alice, &org, pipeline(name)).await);
    }
    let (first, claimed) = claim(app, 1).await;
    assert_eq!(claimed, [(ids[0].clone(), 1)], "the first pipeline's event");
    // A new edit of the claimed pipeline while it is judged.
    let mut body = pipeline("ci");
    body["props"] = json!({"revision": 1});
    app.by(&alice)
        .org(&org)
        .put(format!("/api/pipelines/{}", ids[0]))
        .json(body)
        .await
        .expect(StatusCode::OK);
    let (_, claimed) = claim(app, 1).await;
    assert_eq!(
        claimed,
        [(ids[1].clone(), 1)],
        "not the pipeline being judged"
    );
    assert!(claim(app, 1).await.0.is_empty());
    app.store.finish_reevaluations(&first).await.unwrap();
    let (_, claimed) = claim(app, 1).await;
    assert_eq!(
        claimed,
        [(ids[0].clone(), 1)],
        "the edit, once the claim ended"
    );
}

/// Creates a pipeline through the API: its id.
async fn create_pipeline(app: &TestApp, token: &str, org: &str, body: Value) -> String {
    app.by(token)
        .org(org)
        .post("/api/pipelines")
        .json(body)
        .await
        .expect(StatusCode::CREATED)
        .id()
}

/// Queues `events` events for each of `entities` pipelines of `org` (the entities'
/// events interleaved, as concurrent edits write them).
async fn queue_events(app: &TestApp, org: &str, entities: usize, events: usize) {
    for round in 0..events {
        for entity in 0..entities {
            app.sql(&format!(
                "INSERT INTO reevaluation_queue (org_id, target, entity_id, reason, created_at) \
                 VALUES ('{org}', 'pipeline', 'p-{entity:03}', 'edit-{round}', '2026-01-01T00:00:00.000000Z')"
            ))
            .await;
        }
    }
}

/// One claim of up to `limit` entities: the claim, and each entity with its number
/// of events.
async fn claim(app: &TestApp, limit: u32) -> (Vec<ClaimedEntity>, Vec<(String, usize)>) {
    let lease = Utc::now() + chrono::Duration::seconds(60);
    let claimed = app
        .store
        .claim_reevaluations(Utc::now(), lease, limit)
        .await
        .unwrap();
    let entities = claimed
        .iter()
        .map(|c| (c.entity_id.clone(), c.ids.len()))
        .collect();
    (claimed, entities)
}

fn entities(names: &[&str], events: usize) -> Vec<(String, usize)> {
    names.iter().map(|n| ((*n).to_owned(), events)).collect()
}

async fn a_batch_claims_whole_entities_once(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    queue_events(app, &org, 5, 3).await;
    let (first, claimed) = claim(app, 3).await;
    assert_eq!(
        claimed,
        entities(&["p-000", "p-001", "p-002"], 3),
        "the oldest entities, each with every due event"
    );
    let (second, claimed) = claim(app, 64).await;
    assert_eq!(
        claimed,
        entities(&["p-003", "p-004"], 3),
        "never a claimed one"
    );
    assert!(claim(app, 64).await.0.is_empty());
    app.store.finish_reevaluations(&first).await.unwrap();
    app.store.finish_reevaluations(&second).await.unwrap();
    assert_eq!(app.store.pending_reevaluations(&org).await.unwrap(), 0);
}

async fn concurrent_batches_never_share_an_entity(app: &TestApp) {
    let org = app.org("alice", "acme").await;
    queue_events(app, &org, 60, 2).await;
    let lease = Utc::now() + chrono::Duration::seconds(60);
    let mut claimers = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let store = app.store.clone();
        claimers.spawn(async move {
            let mut mine = Vec::new();
            loop {
                let claimed = store
                    .claim_reevaluations(Utc::now(), lease, 5)
                    .await
                    .unwrap();
                if claimed.is_empty() {
                    return mine;
                }
                mine.extend(claimed);
            }
        });
    }
    let claims = claimers.join_all().await;
    let mut seen: Vec<(String, usize)> = claims
        .into_iter()
        .flatten()
        .map(|c| (c.entity_id, c.ids.len()))
        .collect();
    seen.sort();
    let expected: Vec<(String, usize)> = (0..60).map(|e| (format!("p-{e:03}"), 2)).collect();
    assert_eq!(seen, expected, "each entity claimed once, with both events");
}

/// Inserts `n` pipelines of `org` named `ok-{i}` (even) or `bad-{i}` (odd), their
/// stored result `block` (none is), and one queued event each, as a mutation writes it.
async fn queued_pipelines(app: &TestApp, org: &str, n: usize) {
    let rows: Vec<String> = (0..n)
        .map(|i| {
            let name = if i % 2 == 0 { "ok" } else { "bad" };
            format!(
                "('{org}-{i:03}', '{org}', 'web', 'acme', '{name}-{i}', 'private', '{{}}', \
                 '{{\"result\":\"block\",\"violations\":[]}}', 'block', 'seed', \
                 '2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:00.000000Z')"
            )
        })
        .collect();
    app.sql(&format!(
        "INSERT INTO pipelines (id, org_id, project, organization, pipeline_name, access_modifier, \
         props, compliance, compliance_result, created_by, created_at, updated_at) VALUES {}",
        rows.join(", ")
    ))
    .await;
    app.sql(&format!(
        "INSERT INTO reevaluation_queue (org_id, target, entity_id, reason, created_at) \
         SELECT org_id, 'pipeline', id, 'pipeline.update', '2026-01-01T00:00:00.000000Z' \
         FROM pipelines WHERE org_id = '{org}'"
    ))
    .await;
}

async fn full_batches_at_once_are_all_judged_and_kept(app: &TestApp) {
    // Two organizations, one with a warning rule; 130 entities: the two loops' full
    // batches at once (up to 128 judgements, more than the CPU pool's queue holds) are all
    // judged, none refused and retried, each kept under its own organization.
    let acme = app.org("alice", "acme").await;
    let beta = app.org("bob", "beta").await;
    let alice = app.token("alice", "alice@example.com");
    app.rule(
        &alice,
        &acme,
        json!({"name": "named", "target": "pipeline", "severity": "warning",
               "field": "pipelineName", "operator": "regex", "value": "^ok-"}),
    )
    .await;
    // The rule's own event (a scan) is not what is tested here.
    app.sql("DELETE FROM reevaluation_queue").await;
    queued_pipelines(app, &acme, 70).await;
    queued_pipelines(app, &beta, 60).await;
    let (state, settings) = (state_of(app), settings());
    // Both evaluation threads busy (requests' jobs) while the batches are claimed: the
    // judgements queue up, far more than the pool's queue holds.
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let gate = Arc::new(std::sync::Mutex::new(gate));
    let busy: Vec<_> = (0..2)
        .map(|_| {
            let (cpu, gate) = (state.infra.cpu.clone(), gate.clone());
            tokio::spawn(async move { cpu.run(move || gate.lock().unwrap().recv()).await })
        })
        .collect();
    while state.infra.cpu.in_flight() < 2 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let (one, two, ()) = tokio::join!(
        adapters::workers::reevaluation::step(&state, &settings),
        adapters::workers::reevaluation::step(&state, &settings),
        async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            release.send(()).unwrap();
            release.send(()).unwrap();
        }
    );
    for job in busy {
        job.await.unwrap().unwrap().unwrap();
    }
    // Two claims at once may split the due entities between them unevenly.
    let claimed = one.unwrap() + two.unwrap();
    assert!(claimed >= 64, "{claimed}");
    let retried: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM reevaluation_queue WHERE attempts > 0")
            .fetch_one(adapters::storage::pool_for_tests(&app.store))
            .await
            .unwrap();
    assert_eq!(retried, 0, "no judgement was refused");
    assert_eq!(
        claimed + drain(&state).await,
        130,
        "each entity claimed once: none judged again"
    );
    assert_eq!(app.store.reevaluation_depth().await.unwrap().waiting, 0);
    let results: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT org_id, pipeline_name, compliance_result FROM pipelines ORDER BY org_id, id",
    )
    .fetch_all(adapters::storage::pool_for_tests(&app.store))
    .await
    .unwrap();
    assert_eq!(results.len(), 130);
    for (org, name, result) in &results {
        let expected = if *org == acme && name.starts_with("bad-") {
            "warn"
        } else {
            "pass"
        };
        assert_eq!(result, expected, "{org} {name}");
    }
    let logged: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM compliance_checks")
        .fetch_one(adapters::storage::pool_for_tests(&app.store))
        .await
        .unwrap();
    assert_eq!(logged, 130, "each judgement in the check log");
}

on_both_backends!(
    full_batches_at_once_are_all_judged_and_kept,
    a_batch_claims_whole_entities_once,
    concurrent_batches_never_share_an_entity,
    an_entity_being_judged_is_not_claimed_again,
    a_rule_moved_to_another_target_judges_its_old_target_again,
    a_subscription_change_judges_the_organizations_entities_again,
    mutations_are_judged_again_once_per_burst,
    a_failing_judgement_is_retried_then_dead,
);

/// A pipeline's stored compliance, as the API answers it.
async fn compliance_of(app: &TestApp, token: &str, org: &str, id: &str) -> EntityCompliance {
    app.by(token)
        .org(org)
        .get(format!("/api/pipelines/{id}"))
        .await
        .expect(StatusCode::OK)
        .data::<Pipeline>()
        .compliance
}
