//! Alerts and dashboards end to end, with a clock the tests move: a rule on a
//! pipeline that starts failing fires once after `for` on PagerDuty (Events v2),
//! Slack, a webhook verified with the Standard Webhooks library and e-mail, then
//! resolves once with the same `dedup_key`; a restart and a second replica send
//! nothing twice; 500 retried, 400 not; the test action; the rule's value against
//! the report over generated event streams; backtests; bad input refused with
//! nothing stored; dashboards with their versions, clones and data.

use crate::api::{pagination, Answer};
use adapters::code::ErrorCode;
use adapters::http::wire::{History, RuleList};
use adapters::services::alerts::{self, AlertRule, Backtest, Destination, TestResult};
use adapters::services::dashboards::{Dashboard, DashboardData};
use adapters::services::posture::PostureTrendReport;
use adapters::services::reports::SuccessRateReport;
use adapters::workers::delivery;
use base64::Engine as _;
use chrono::{DateTime, Duration, DurationRound};
use proptest::strategy::{Strategy, ValueTree};
use reporting::alert::AlertState;
use serde::de::DeserializeOwned;

use super::fixtures::staged_pipeline;
use super::notifications::{smtp_receiver, webhook_receiver, Mailbox, Seen};
use super::*;

pub(super) const ARN: &str = "arn:aws:codepipeline:us-east-1:111111111111:web";

/// A pipeline execution as EventBridge delivers it: started at `at`, ended
/// `seconds` later in `state` (with a failed stage and action when it failed).
pub(super) fn execution(id: &str, at: DateTime<Utc>, seconds: i64, state: &str) -> Vec<Value> {
    let one = |n: &str, when: DateTime<Utc>, kind: &str, state: &str, extra: Value| {
        let mut detail =
            json!({"pipeline": "web", "execution-id": id, "state": state, "version": 1});
        if let Value::Object(more) = extra {
            for (k, v) in more {
                detail[k] = v;
            }
        }
        json!({
            "version": "0",
            "id": format!("{id}-{n}"),
            "detail-type": format!("CodePipeline {kind} Execution State Change"),
            "source": "aws.codepipeline",
            "account": "111111111111",
            "time": when.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "region": "us-east-1",
            "resources": [ARN],
            "detail": detail,
        })
    };
    let end = at + Duration::seconds(seconds);
    let mut events = vec![
        one("p0", at, "Pipeline", "STARTED", json!({})),
        one("s0", at, "Stage", "STARTED", json!({"stage": "Build"})),
        one(
            "s1",
            end,
            "Stage",
            if state == "FAILED" {
                "FAILED"
            } else {
                "SUCCEEDED"
            },
            json!({"stage": "Build"}),
        ),
        one("p1", end, "Pipeline", state, json!({})),
    ];
    if state == "FAILED" {
        events.push(one(
            "a1",
            end,
            "Action",
            "FAILED",
            json!({"stage": "Build", "action": "Compile",
                   "type": {"owner": "AWS", "provider": "CodeBuild", "category": "Build", "version": "1"}}),
        ));
    }
    events
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

pub(super) async fn ingest(app: &TestApp, events: Vec<Value>) {
    app.by(&service(app))
        .post("/api/reports/events")
        .json(json!(events))
        .await
        .expect(StatusCode::OK);
}

/// alice's organization with the pipeline `web` registered under [`ARN`].
async fn watched_org(app: &TestApp) -> (String, String, String) {
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    let id = app
        .by(&alice)
        .org(&org)
        .post("/api/pipelines")
        .json(staged_pipeline("web"))
        .await
        .expect(StatusCode::CREATED)
        .id();
    app.by(&alice)
        .org(&org)
        .post("/api/pipelines/registry")
        .json(json!({"arn": ARN, "pipelineId": id}))
        .await
        .expect(StatusCode::OK);
    (org, alice, id)
}

/// What a create at `path` answered, as the wire type `T`.
async fn created<T: DeserializeOwned>(
    app: &TestApp,
    token: &str,
    org: &str,
    path: &str,
    body: Value,
) -> T {
    app.by(token)
        .org(org)
        .post(path)
        .json(body)
        .await
        .expect(StatusCode::CREATED)
        .data()
}

async fn deliver(state: &AppState) -> usize {
    let mut n = 0;
    while delivery::step(state).await.unwrap() {
        n += 1;
    }
    n
}

fn minute(now: DateTime<Utc>) -> DateTime<Utc> {
    now.duration_trunc(Duration::minutes(1)).unwrap() + Duration::minutes(1)
}

fn bodies(seen: &Seen) -> Vec<(axum::http::HeaderMap, Value)> {
    seen.requests
        .lock()
        .unwrap()
        .iter()
        .map(|(h, b)| (h.clone(), serde_json::from_slice(b).unwrap()))
        .collect()
}

async fn a_failing_pipeline_fires_once_and_resolves_once_everywhere(base_app: &TestApp) {
    let pagerduty = Arc::new(Seen::default());
    let slack = Arc::new(Seen::default());
    let hook = Arc::new(Seen::default());
    let mailbox: Mailbox = Default::default();
    let pd_url = webhook_receiver(pagerduty.clone()).await;
    let slack_url = webhook_receiver(slack.clone()).await;
    let hook_url = webhook_receiver(hook.clone()).await;
    let smtp = smtp_receiver(mailbox.clone()).await;
    let key = base64::engine::general_purpose::STANDARD.encode([9u8; 32]);
    let config = [
        ("SECRETS_ENCRYPTION_KEY", key.as_str()),
        ("SMTP_URL", smtp.as_str()),
        ("WEBHOOK_ALLOW_PRIVATE", "true"),
        ("PAGERDUTY_EVENTS_URL", pd_url.as_str()),
    ];
    let app = base_app.beside(&config).await;
    let (org, alice, pipeline_id) = watched_org(&app).await;
    let t0 = minute(Utc::now());
    // Two successes in the hour before.
    let mut events = execution("ok1", t0 - Duration::minutes(50), 60, "SUCCEEDED");
    events.extend(execution(
        "ok2",
        t0 - Duration::minutes(40),
        60,
        "SUCCEEDED",
    ));
    ingest(&app, events).await;

    let pd: Destination = created(&app, &alice, &org, "/api/alerts/destinations",
        json!({"name": "on-call", "kind": "pagerduty", "routingKey": "R0UT1NGKEY0123456789abcdefABCDEF"})).await;
    let sl: Destination = created(&app, &alice, &org, "/api/alerts/destinations",
        json!({"name": "team channel", "kind": "slack", "url": format!("{slack_url}?token=xoxb-secret-9876")})).await;
    let wh: Destination = created(
        &app,
        &alice,
        &org,
        "/api/alerts/destinations",
        json!({"name": "hook", "kind": "webhook", "url": hook_url}),
    )
    .await;
    let em: Destination = created(&app, &alice, &org, "/api/alerts/destinations",
        json!({"name": "mail", "kind": "email", "addresses": ["ops@example.com", "lead@example.com"]})).await;
    // Secrets are never answered back: a hint.
    assert_eq!(pd.hint.as_deref(), Some("…CDEF"));
    let listed = app
        .by(&alice)
        .org(&org)
        .get("/api/alerts/destinations")
        .await
        .1;
    let text = listed.to_string();
    assert!(
        !text.contains("R0UT1NGKEY") && !text.contains("xoxb-secret") && !text.contains("whsec_"),
        "{text}"
    );
    let secret = wh
        .signing_secret
        .clone()
        .expect("answered once, at creation");
    assert!(secret.starts_with("whsec_"));
    let again: Destination = app
        .by(&alice)
        .org(&org)
        .get(format!("/api/alerts/destinations/{}", wh.id))
        .await
        .data();
    assert!(again.signing_secret.is_none());
    // Sealed at rest.
    let stored: Vec<String> =
        sqlx::query_scalar("SELECT secret FROM alert_destinations WHERE secret IS NOT NULL")
            .fetch_all(adapters::storage::pool_for_tests(&app.store))
            .await
            .unwrap();
    assert_eq!(stored.len(), 3);
    assert!(
        stored
            .iter()
            .all(|s| s.starts_with("enc:v2:") && !s.contains("R0UT1NG") && !s.contains("xoxb")),
        "{stored:?}"
    );

    let ids: Vec<&str> = [&pd, &sl, &wh, &em].iter().map(|d| d.id.as_str()).collect();
    let rule: AlertRule = created(
        &app,
        &alice,
        &org,
        "/api/alerts/rules",
        json!({
            "name": "web failing", "metric": "failure_rate", "params": {"pipelineId": pipeline_id},
            "comparison": "gt", "threshold": 0.5, "window": "1h", "for": "2m", "minSamples": 2,
            "severity": "critical", "labels": {"team": "web"}, "destinations": ids,
        }),
    )
    .await;
    let rule_id = rule.id.clone();
    assert_eq!(rule.state, AlertState::Ok);
    assert_eq!(rule.dedup_key, format!("alert-{rule_id}"));
    let evaluate = |state: AppState, at: DateTime<Utc>| async move {
        alerts::evaluate_due(
            &state.infra.store,
            &state.config,
            &state.infra.reporting,
            at,
        )
        .await
        .unwrap()
    };

    let round = evaluate(app.state.clone(), t0).await;
    assert_eq!(
        (round.evaluated, round.transitions, round.notices),
        (1, 0, 0)
    );
    // Evaluated at the same instant again: not due, nothing written.
    assert_eq!(evaluate(app.state.clone(), t0).await.evaluated, 0);
    // Three failures: 3 of 5 failed.
    let mut events = Vec::new();
    for (i, s) in [10, 20, 30].iter().enumerate() {
        events.extend(execution(
            &format!("bad{i}"),
            t0 + Duration::seconds(*s),
            5,
            "FAILED",
        ));
    }
    ingest(&app, events).await;
    let round = evaluate(app.state.clone(), t0 + Duration::minutes(1)).await;
    assert_eq!((round.transitions, round.notices), (1, 0), "ok -> pending");
    let round = evaluate(app.state.clone(), t0 + Duration::minutes(2)).await;
    assert_eq!((round.transitions, round.notices), (0, 0), "still pending");
    let fire_at = t0 + Duration::minutes(3);
    let round = evaluate(app.state.clone(), fire_at).await;
    assert_eq!(
        (round.transitions, round.notices),
        (1, 1),
        "pending -> firing"
    );
    // The rule's value is the report's number for the same window.
    let report: SuccessRateReport = app
        .by(&alice)
        .org(&org)
        .get(format!(
            "/api/reports/execution/success-rate?pipelineId={pipeline_id}&from={}&to={}",
            (fire_at - Duration::hours(1)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            fire_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ))
        .await
        .data();
    let overall = &report.overall;
    let expected = overall.failed as f64 / (overall.failed + overall.succeeded) as f64;
    let now: AlertRule = app
        .by(&alice)
        .org(&org)
        .get(format!("/api/alerts/rules/{rule_id}"))
        .await
        .data();
    assert_eq!(now.state, AlertState::Firing);
    assert_eq!(now.last_value, Some(expected));
    assert_eq!(expected, 0.6);
    let firing: RuleList = app
        .by(&alice)
        .org(&org)
        .get("/api/alerts/firing")
        .await
        .data();
    assert_eq!(
        firing.rules.first().map(|r| r.id.as_str()),
        Some(rule_id.as_str())
    );

    // A second replica and this one evaluate the same instant: one writes.
    let other = app.beside(&config).await;
    let (a, b) = tokio::join!(
        evaluate(app.state.clone(), t0 + Duration::minutes(4)),
        evaluate(other.state.clone(), t0 + Duration::minutes(4)),
    );
    assert_eq!(a.evaluated + b.evaluated, 1, "{a:?} {b:?}");
    assert_eq!(a.notices + b.notices, 0);
    // A restart while firing: a new server carries on, sending nothing again.
    let restarted = app.beside(&config).await;
    let round = evaluate(restarted.state.clone(), t0 + Duration::minutes(5)).await;
    assert_eq!((round.evaluated, round.notices), (1, 0));

    // Delivered once per destination, retries by two replicas' workers included.
    let (x, y) = tokio::join!(deliver(&app.state), deliver(&other.state));
    assert_eq!(x + y, 4);
    assert_eq!(deliver(&restarted.state).await, 0);
    let pd_seen = bodies(&pagerduty);
    assert_eq!(pd_seen.len(), 1);
    let trigger = &pd_seen[0].1;
    assert_eq!(trigger["event_action"], "trigger");
    assert_eq!(trigger["routing_key"], "R0UT1NGKEY0123456789abcdefABCDEF");
    assert_eq!(trigger["dedup_key"], format!("alert-{rule_id}"));
    assert_eq!(trigger["payload"]["severity"], "critical");
    assert!(trigger["payload"]["summary"]
        .as_str()
        .unwrap()
        .contains("[FIRING] web failing"));
    assert!(trigger["payload"]["source"].is_string());
    let slack_seen = bodies(&slack);
    assert_eq!(slack_seen.len(), 1);
    assert!(slack_seen[0].1["text"]
        .as_str()
        .unwrap()
        .contains("[FIRING] web failing: failure_rate = 0.6"));
    let hooks = hook.requests.lock().unwrap().clone();
    assert_eq!(hooks.len(), 1);
    let verifier = standardwebhooks::Webhook::new(&secret).unwrap();
    verifier
        .verify(&hooks[0].1, &hooks[0].0)
        .expect("a Standard Webhooks signature");
    let fired: Value = serde_json::from_slice(&hooks[0].1).unwrap();
    assert_eq!(fired["type"], "alert.firing");
    assert_eq!(fired["data"]["labels"]["team"], "web");
    let fired_id = hooks[0].0["webhook-id"].to_str().unwrap().to_owned();
    assert!(
        fired_id.starts_with(&format!("alert-{rule_id}.")),
        "{fired_id}"
    );
    {
        let mails = mailbox.lock().unwrap();
        assert_eq!(mails.len(), 1);
        assert_eq!(mails[0].0, ["ops@example.com", "lead@example.com"]);
        assert!(mails[0].1.contains("[FIRING] web failing"));
    }

    // Four successes: 3 of 9 failed, clear: resolved once.
    let mut events = Vec::new();
    for i in 0..4 {
        events.extend(execution(
            &format!("fine{i}"),
            t0 + Duration::minutes(5) + Duration::seconds(i * 5),
            3,
            "SUCCEEDED",
        ));
    }
    ingest(&app, events).await;
    let round = evaluate(app.state.clone(), t0 + Duration::minutes(6)).await;
    assert_eq!(
        (round.transitions, round.notices),
        (1, 1),
        "firing -> ok, resolved"
    );
    assert_eq!(
        evaluate(app.state.clone(), t0 + Duration::minutes(7))
            .await
            .notices,
        0
    );
    assert_eq!(deliver(&app.state).await, 4);
    let pd_seen = bodies(&pagerduty);
    assert_eq!(pd_seen.len(), 2);
    assert_eq!(pd_seen[1].1["event_action"], "resolve");
    assert_eq!(pd_seen[1].1["dedup_key"], trigger["dedup_key"]);
    let hooks = hook.requests.lock().unwrap().clone();
    assert_eq!(hooks.len(), 2);
    verifier
        .verify(&hooks[1].1, &hooks[1].0)
        .expect("a Standard Webhooks signature");
    let resolved_id = hooks[1].0["webhook-id"].to_str().unwrap();
    assert_ne!(resolved_id, fired_id);
    assert_eq!(
        resolved_id.rsplit_once('.').unwrap().0,
        fired_id.rsplit_once('.').unwrap().0
    );
    assert_eq!(bodies(&slack).len(), 2);
    assert!(bodies(&slack)[1].1["text"]
        .as_str()
        .unwrap()
        .contains("[RESOLVED]"));
    assert_eq!(mailbox.lock().unwrap().len(), 2);

    // The history: every transition with its value, every delivery with its outcome.
    let history: History = app
        .by(&alice)
        .org(&org)
        .get(format!("/api/alerts/rules/{rule_id}/history"))
        .await
        .data();
    let transitions = &history.transitions;
    let moves: Vec<(&str, &str, Option<&str>)> = transitions
        .iter()
        .map(|t| (t.from.as_str(), t.to.as_str(), t.notice.as_deref()))
        .collect();
    assert_eq!(
        moves,
        [
            ("firing", "ok", Some("resolved")),
            ("pending", "firing", Some("firing")),
            ("ok", "pending", None)
        ]
    );
    for t in &transitions[..2] {
        let deliveries = &t.deliveries;
        assert_eq!(deliveries.len(), 4);
        assert!(
            deliveries
                .iter()
                .all(|d| d.status == "sent" && d.attempts == 1),
            "{deliveries:?}"
        );
    }
    assert_eq!(transitions[1].value, Some(0.6));
    let firing: RuleList = app
        .by(&alice)
        .org(&org)
        .get("/api/alerts/firing")
        .await
        .data();
    assert!(firing.rules.is_empty(), "{firing:?}");
    // The compliance notifications' log lists none of them (each is its rule's
    // history), and its answer keeps its documented channels.
    let Answer(status, log) = app
        .by(&alice)
        .org(&org)
        .get("/api/compliance/notifications")
        .await;
    assert_eq!(status, StatusCode::OK, "{log}");
    assert_eq!(pagination(&log).total, 0, "{log}");
    // Audited.
    app.relay().await;
    assert_eq!(app.audited("alert.rule.create").await.len(), 1);
    assert_eq!(app.audited("alert.destination.create").await.len(), 4);

    // A backtest of the same body over the same past replays the same story,
    // saving and sending nothing.
    let body = json!({"rule": {
        "name": "what if", "metric": "failure_rate", "params": {"pipelineId": pipeline_id},
        "comparison": "gt", "threshold": 0.5, "window": "1h", "for": "2m", "minSamples": 2,
    }, "from": t0.to_rfc3339(), "to": (t0 + Duration::minutes(7)).to_rfc3339()});
    let Answer(status, backtest) = app
        .by(&alice)
        .org(&org)
        .post("/api/alerts/rules/backtest")
        .json(body.clone())
        .await;
    // The test's clock runs ahead of the server's: through the API the range is in
    // the future and refused; the service replays it at the test's instant.
    assert!(t0 + Duration::minutes(7) > Utc::now());
    // The clock the test moved is ahead of the server's: a future range is refused.
    assert_eq!(code(status, &backtest), ErrorCode::ValidationError);
    let backtest = alerts::backtest(
        &app.state.infra.store,
        &app.state.config,
        &app.state.infra.reporting,
        &app.store.organization(&org).await.unwrap().unwrap(),
        &serde_json::from_value(body).unwrap(),
        false,
        t0 + Duration::minutes(8),
    )
    .await
    .unwrap();
    let notices: Vec<_> = backtest
        .transitions
        .iter()
        .filter_map(|t| t.notice)
        .map(|n| n.name())
        .collect();
    assert_eq!(notices, ["firing", "resolved"]);
    assert_eq!(backtest.evaluations, 8);
    assert_eq!(
        app.by(&alice)
            .org(&org)
            .get("/api/alerts/rules")
            .await
            .data::<RuleList>()
            .rules
            .len(),
        1
    );
    assert_eq!(deliver(&app.state).await, 0);
    for server in [other, restarted, app] {
        server.stop().await;
    }
}

async fn a_refusing_receiver_is_not_retried_and_a_failing_one_is(base_app: &TestApp) {
    let flaky = Arc::new(Seen::default());
    flaky.answers.lock().unwrap().extend([500, 503]);
    let refusing = Arc::new(Seen::default());
    refusing.answers.lock().unwrap().push(400);
    let flaky_url = webhook_receiver(flaky.clone()).await;
    let refusing_url = webhook_receiver(refusing.clone()).await;
    let app = base_app
        .beside(&[
            ("WEBHOOK_ALLOW_PRIVATE", "true"),
            ("NOTIFY_RETRY_SECONDS", "0"),
        ])
        .await;
    let (org, alice, pipeline_id) = watched_org(&app).await;
    let a: Destination = created(
        &app,
        &alice,
        &org,
        "/api/alerts/destinations",
        json!({"name": "flaky", "kind": "slack", "url": flaky_url}),
    )
    .await;
    let b: Destination = created(
        &app,
        &alice,
        &org,
        "/api/alerts/destinations",
        json!({"name": "refusing", "kind": "slack", "url": refusing_url}),
    )
    .await;
    let rule: AlertRule = created(&app, &alice, &org, "/api/alerts/rules", json!({
        "name": "any failure", "metric": "consecutive_failures", "params": {"pipelineId": pipeline_id},
        "comparison": "gte", "threshold": 2, "destinations": [a.id, b.id],
    })).await;
    let t0 = minute(Utc::now());
    let mut events = execution("f1", t0 - Duration::minutes(3), 5, "FAILED");
    events.extend(execution("f2", t0 - Duration::minutes(2), 5, "FAILED"));
    ingest(&app, events).await;
    let round = alerts::evaluate_due(
        &app.state.infra.store,
        &app.state.config,
        &app.state.infra.reporting,
        t0,
    )
    .await
    .unwrap();
    assert_eq!(round.notices, 1);
    // 500, 503, then 200 for the first; 400 once for the second.
    let mut attempts = 0;
    for _ in 0..10 {
        attempts += deliver(&app.state).await;
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(attempts, 4);
    assert_eq!(flaky.requests.lock().unwrap().len(), 3);
    assert_eq!(refusing.requests.lock().unwrap().len(), 1);
    let history: History = app
        .by(&alice)
        .org(&org)
        .get(format!("/api/alerts/rules/{}/history", rule.id))
        .await
        .data();
    let deliveries = &history.transitions[0].deliveries;
    let by = |id: &str| {
        deliveries
            .iter()
            .find(|d| d.destination_id == id)
            .unwrap()
            .clone()
    };
    assert_eq!((by(&a.id).status.as_str(), by(&a.id).attempts), ("sent", 3));
    assert_eq!(
        (by(&b.id).status.as_str(), by(&b.id).attempts),
        ("failed", 1)
    );
    assert!(by(&b.id).last_error.unwrap().contains("400"));
    app.stop().await;
}

async fn destinations_are_tested_refused_and_kept_while_used(base_app: &TestApp) {
    let ok = Arc::new(Seen::default());
    let refusing = Arc::new(Seen::default());
    refusing.answers.lock().unwrap().push(400);
    let pd = Arc::new(Seen::default());
    let mailbox: Mailbox = Default::default();
    let ok_url = webhook_receiver(ok.clone()).await;
    let refusing_url = webhook_receiver(refusing.clone()).await;
    let pd_url = webhook_receiver(pd.clone()).await;
    let smtp = smtp_receiver(mailbox.clone()).await;
    let app = base_app
        .beside(&[
            ("WEBHOOK_ALLOW_PRIVATE", "true"),
            ("SMTP_URL", smtp.as_str()),
            ("PAGERDUTY_EVENTS_URL", pd_url.as_str()),
            ("ALERT_TESTS_PER_MINUTE", "4"),
        ])
        .await;
    let (org, alice, pipeline_id) = watched_org(&app).await;
    let hook: Destination = created(
        &app,
        &alice,
        &org,
        "/api/alerts/destinations",
        json!({"name": "hook", "kind": "webhook", "url": ok_url}),
    )
    .await;
    let hook_id = hook.id.clone();
    let test = |path: String, body: Option<Value>| {
        let (app, alice, org) = (&app, &alice, &org);
        async move { app.by(alice).org(org).post(&path).json_opt(body).await }
    };
    let tested: TestResult = test(format!("/api/alerts/destinations/{hook_id}/test"), None)
        .await
        .expect(StatusCode::OK)
        .data();
    let target = &tested.targets[0];
    assert_eq!(
        (target.status.as_str(), target.http_status),
        ("sent", Some(200))
    );
    let seen = ok.requests.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    standardwebhooks::Webhook::new(hook.signing_secret.as_deref().unwrap())
        .unwrap()
        .verify(&seen[0].1, &seen[0].0)
        .unwrap();
    let sent: Value = serde_json::from_slice(&seen[0].1).unwrap();
    assert_eq!(
        (sent["type"].clone(), sent["data"]["test"].clone()),
        (json!("alert.test"), json!(true))
    );
    // An unsaved one: every address of an e-mail destination, then a refusing Slack.
    let tested: TestResult = test(
        "/api/alerts/destinations/test".to_owned(),
        Some(
            json!({"name": "x", "kind": "email", "addresses": ["a@example.com", "b@example.com"]}),
        ),
    )
    .await
    .data();
    assert_eq!(
        tested
            .targets
            .iter()
            .map(|t| (t.target.as_str(), t.status.as_str()))
            .collect::<Vec<_>>(),
        [("a@example.com", "sent"), ("b@example.com", "sent")]
    );
    assert!(tested.destination_id.is_none());
    assert_eq!(mailbox.lock().unwrap().len(), 2);
    let tested: TestResult = test(
        "/api/alerts/destinations/test".to_owned(),
        Some(json!({"name": "x", "kind": "slack", "url": refusing_url})),
    )
    .await
    .data();
    let target = &tested.targets[0];
    assert_eq!(
        (target.status.as_str(), target.http_status),
        ("failed", Some(400))
    );
    // PagerDuty: the test's trigger and its resolve.
    let tested: TestResult = test(
        "/api/alerts/destinations/test".to_owned(),
        Some(json!({"name": "x", "kind": "pagerduty", "routingKey": "abc123"})),
    )
    .await
    .data();
    assert_eq!(tested.targets[0].status, "sent");
    let events = bodies(&pd);
    assert_eq!(
        events
            .iter()
            .map(|(_, b)| b["event_action"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["trigger", "resolve"]
    );
    assert_eq!(events[0].1["dedup_key"], events[1].1["dedup_key"]);
    // The fifth test this minute: 429.
    let Answer(status, answer) =
        test(format!("/api/alerts/destinations/{hook_id}/test"), None).await;
    assert_eq!(code(status, &answer), ErrorCode::RateLimited, "{answer}");
    // Nothing in any history; audited.
    let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM alert_history")
        .fetch_one(adapters::storage::pool_for_tests(&app.store))
        .await
        .unwrap();
    assert_eq!(count, 0);
    app.relay().await;
    assert_eq!(app.audited("alert.destination.test").await.len(), 4);

    // A destination in use is kept (409 naming the rule); free, it goes.
    created::<AlertRule>(&app, &alice, &org, "/api/alerts/rules", json!({
        "name": "slow builds", "metric": "p95_duration_ms", "params": {"pipelineId": pipeline_id},
        "comparison": "gt", "threshold": 60000, "destinations": [hook_id],
    })).await;
    let Answer(status, answer) = app
        .by(&alice)
        .org(&org)
        .delete(format!("/api/alerts/destinations/{hook_id}"))
        .await;
    assert_eq!(code(status, &answer), ErrorCode::Conflict);
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("`slow builds`"),
        "{answer}"
    );
    // A change keeps the stored secret when none is sent; a stale version is 409.
    let change = json!({"version": 1, "name": "renamed hook", "kind": "webhook"});
    let renamed: Destination = app
        .by(&alice)
        .org(&org)
        .put(format!("/api/alerts/destinations/{hook_id}"))
        .json(change.clone())
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(
        (renamed.version, renamed.name.as_str()),
        (2, "renamed hook")
    );
    app.by(&alice)
        .org(&org)
        .put(format!("/api/alerts/destinations/{hook_id}"))
        .json(change)
        .await
        .refused(ErrorCode::Conflict);
    app.stop().await;
}

async fn bad_rules_and_panels_are_refused_naming_the_field(app: &TestApp) {
    let (org, alice, pipeline_id) = watched_org(app).await;
    let good = json!({"name": "r", "metric": "failure_rate", "params": {"pipelineId": pipeline_id},
                      "comparison": "gt", "threshold": 0.5});
    let with = |key: &str, value: Value| {
        let mut body = good.clone();
        body[key] = value;
        body
    };
    let many: Vec<String> = (0..11).map(|i| format!("d{i}")).collect();
    let cases = [
        (with("metric", json!("latency")), "metric"),
        (with("window", json!("91d")), "window"),
        (with("window", json!("soon")), "window"),
        (with("for", json!("10s")), "for"),
        (with("threshold", json!(1.5)), "threshold"),
        (with("recoveryThreshold", json!(0.9)), "recoveryThreshold"),
        (with("destinations", json!(many)), "destinations"),
        (with("destinations", json!(["nope"])), "destinations"),
        (with("params", json!({"stage": "Build"})), "params"),
        (with("name", json!("")), "name"),
        (with("repeatInterval", json!("5s")), "repeatInterval"),
        (with("unknown", json!(1)), "unknown"),
    ];
    for (body, field) in cases {
        let Answer(status, answer) = app
            .by(&alice)
            .org(&org)
            .post("/api/alerts/rules")
            .json(body.clone())
            .await;
        assert_eq!(
            code(status, &answer),
            ErrorCode::ValidationError,
            "{body}: {answer}"
        );
        assert_eq!(answer["details"]["field"], field, "{body}: {answer}");
    }
    let Answer(status, answer) = app
        .by(&alice)
        .org(&org)
        .post("/api/alerts/rules")
        .json(with(
            "params",
            json!({"pipelineId": pipeline_id, "includeTeams": true}),
        ))
        .await;
    // Alice holds every permission of her organization, rollup included.
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    // A Member reads, and may not write.
    let bob = app.token("bob", "bob@example.com");
    let Answer(status, answer) = app
        .by(&alice)
        .post(format!("/api/organization/{org}/members"))
        .json(json!({"userId": "bob"}))
        .await;
    assert!(status.is_success(), "{answer}");
    assert_eq!(
        app.by(&bob).org(&org).get("/api/alerts/rules").await.0,
        StatusCode::OK
    );
    app.by(&bob)
        .org(&org)
        .post("/api/alerts/rules")
        .json(good.clone())
        .await
        .refused(ErrorCode::Forbidden);
    app.by(&bob)
        .org(&org)
        .post("/api/dashboards")
        .json(json!({"title": "t"}))
        .await
        .refused(ErrorCode::Forbidden);

    let panel = json!({"kind": "timeseries", "report": "execution/success-rate", "params": {"granularity": "hour"},
                       "position": {"x": 0, "y": 0, "w": 12, "h": 6}});
    let dashboard = |panels: Vec<Value>| json!({"title": "Delivery", "panels": panels});
    let with_panel = |key: &str, value: Value| {
        let mut p = panel.clone();
        p[key] = value;
        dashboard(vec![p])
    };
    let cases = [
        (dashboard(vec![panel.clone(); 25]), "at most 24 panels"),
        (
            with_panel("report", json!("execution/latency")),
            "[0].report",
        ),
        (with_panel("kind", json!("pie")), "[0].kind"),
        (
            with_panel("params", json!({"granularity": "minute"})),
            "[0].params.granularity",
        ),
        (
            with_panel("params", json!({"limit": 500})),
            "[0].params.limit",
        ),
        (with_panel("params", json!({"color": "red"})), "[0].params"),
        (
            with_panel("position", json!({"x": 20, "y": 0, "w": 12, "h": 6})),
            "[0].position",
        ),
    ];
    for (body, says) in cases {
        let Answer(status, answer) = app
            .by(&alice)
            .org(&org)
            .post("/api/dashboards")
            .json(body.clone())
            .await;
        assert_eq!(
            code(status, &answer),
            ErrorCode::ValidationError,
            "{answer}"
        );
        assert_eq!(answer["details"]["field"], "panels", "{answer}");
        assert!(
            answer["message"].as_str().unwrap().contains(says),
            "{says}: {answer}"
        );
    }
    let pool = adapters::storage::pool_for_tests(&app.store);
    for table in ["dashboards", "alert_destinations"] {
        let n: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
            .fetch_one(pool)
            .await
            .unwrap();
        assert_eq!(n, 0, "{table}");
    }
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM alert_rules")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(n, 1, "only the rule that was good");
    // Bad destinations.
    for (body, field) in [
        (
            json!({"name": "m", "kind": "email", "addresses": []}),
            "addresses",
        ),
        (
            json!({"name": "m", "kind": "email", "addresses": ["not an address"]}),
            "addresses",
        ),
        (
            json!({"name": "s", "kind": "slack", "url": "http://127.0.0.1:9/hook"}),
            "url",
        ),
        (
            json!({"name": "w", "kind": "webhook", "url": "https://example.com/h", "signingSecret": "short"}),
            "signingSecret",
        ),
        (json!({"name": "p", "kind": "pagerduty"}), "routingKey"),
        (
            json!({"name": "p", "kind": "pagerduty", "routingKey": "k", "url": "https://example.com"}),
            "url",
        ),
    ] {
        let Answer(status, answer) = app
            .by(&alice)
            .org(&org)
            .post("/api/alerts/destinations")
            .json(body.clone())
            .await;
        assert_eq!(
            code(status, &answer),
            ErrorCode::ValidationError,
            "{body}: {answer}"
        );
        assert_eq!(answer["details"]["field"], field, "{body}: {answer}");
    }
    // An organization holds at most 100 destinations, decided under its lock.
    let makes: Vec<_> = (0..101)
        .map(|i| {
            app.by(&alice).org(&org).post("/api/alerts/destinations").json(json!({"name": format!("mail {i}"), "kind": "email", "addresses": ["ops@example.com"]})).request()
        })
        .collect();
    let answers = app.concurrently(makes).await;
    let made = answers
        .iter()
        .filter(|(s, _)| *s == StatusCode::CREATED)
        .count();
    assert_eq!(made, 100);
    let refused = answers
        .iter()
        .find(|(s, _)| *s != StatusCode::CREATED)
        .unwrap();
    assert_eq!(
        code(refused.0, &refused.1),
        ErrorCode::Conflict,
        "{}",
        refused.1
    );
}

async fn dashboards_keep_versions_clone_and_answer_the_reports_numbers(app: &TestApp) {
    let (org, alice, pipeline_id) = watched_org(app).await;
    let t0 = minute(Utc::now()) - Duration::hours(3);
    let mut events = execution("a", t0, 60, "SUCCEEDED");
    events.extend(execution("b", t0 + Duration::minutes(10), 30, "FAILED"));
    events.extend(execution("c", t0 + Duration::minutes(70), 90, "SUCCEEDED"));
    ingest(app, events).await;
    let panels = json!([
        {"title": "Success", "kind": "timeseries", "report": "execution/success-rate",
         "params": {"granularity": "hour", "pipelineId": pipeline_id}, "position": {"x": 0, "y": 0, "w": 12, "h": 6}},
        {"kind": "stat", "report": "execution/duration", "params": {}, "position": {"x": 12, "y": 0, "w": 6, "h": 3}},
        {"kind": "heatmap", "report": "execution/stage-failures", "params": {"granularity": "hour", "limit": 5}, "position": {"x": 0, "y": 6, "w": 24, "h": 6}},
        {"kind": "table", "report": "execution/errors", "params": {}, "position": {"x": 18, "y": 0, "w": 6, "h": 3}},
        {"kind": "timeseries", "report": "compliance/posture-trend", "params": {"granularity": "hour"}, "position": {"x": 0, "y": 12, "w": 24, "h": 6}},
    ]);
    let made: Dashboard = created(
        app,
        &alice,
        &org,
        "/api/dashboards",
        json!({"title": "Delivery", "panels": panels}),
    )
    .await;
    let id = made.id.clone();
    assert_eq!(made.version, 1);
    let range = format!(
        "from={}&to={}",
        (t0 - Duration::hours(1)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        (t0 + Duration::hours(3)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    );
    let data: DashboardData = app
        .by(&alice)
        .org(&org)
        .get(format!("/api/dashboards/{id}/data?{range}"))
        .await
        .expect(StatusCode::OK)
        .data();
    let panels: Vec<Value> = data
        .panels
        .iter()
        .map(|p| serde_json::to_value(p).unwrap())
        .collect();
    assert_eq!(panels.len(), 5);
    for (panel, path, query) in [
        (
            &panels[0],
            "execution/success-rate",
            format!("granularity=hour&pipelineId={pipeline_id}&"),
        ),
        (&panels[1], "execution/duration", String::new()),
        (
            &panels[2],
            "execution/stage-failures",
            "granularity=hour&limit=5&".to_owned(),
        ),
        (&panels[3], "execution/errors", String::new()),
        (
            &panels[4],
            "compliance/posture-trend",
            "granularity=hour&".to_owned(),
        ),
    ] {
        let report = app
            .by(&alice)
            .org(&org)
            .get(format!("/api/reports/{path}?{query}{range}"))
            .await
            .1;
        assert_eq!(panel["answer"]["report"], path);
        // The same numbers; each read at its own instant (`scope.asOf`).
        let (mut drawn, mut read) = (panel["answer"]["data"].clone(), report["data"].clone());
        for answer in [&mut drawn, &mut read] {
            if let Some(scope) = answer.get_mut("scope").and_then(Value::as_object_mut) {
                assert!(scope.get("asOf").is_some_and(Value::is_string), "{path}");
                scope.insert("asOf".to_owned(), json!("AS-OF"));
            }
        }
        assert_eq!(drawn, read, "{path}");
    }
    assert_eq!(panels[0]["answer"]["data"]["overall"]["failed"], 1);

    // A backtest over the same past, through the API: the rule would have fired
    // when the failure came and resolved when it left the window; nothing saved.
    let body = json!({"rule": {
        "name": "what if", "metric": "failure_rate", "params": {"pipelineId": pipeline_id},
        "comparison": "gt", "threshold": 0.4, "window": "1h",
    }, "from": t0.to_rfc3339(), "to": (t0 + Duration::hours(2)).to_rfc3339()});
    let backtest: Backtest = app
        .by(&alice)
        .org(&org)
        .post("/api/alerts/rules/backtest")
        .json(body)
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(backtest.evaluations, 121);
    let notices: Vec<(&str, DateTime<Utc>)> = backtest
        .transitions
        .iter()
        .filter_map(|t| t.notice.map(|n| (n.name(), t.at)))
        .collect();
    assert_eq!(
        notices,
        [
            ("firing", t0 + Duration::minutes(11)),
            ("resolved", t0 + Duration::minutes(71))
        ]
    );
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM alert_rules")
        .fetch_one(adapters::storage::pool_for_tests(&app.store))
        .await
        .unwrap();
    assert_eq!(n, 0);

    // A change carries the version it read: the second writer of version 1 loses.
    let change = json!({"title": "Delivery (hourly)", "panels": [], "version": 1});
    let changed: Dashboard = app
        .by(&alice)
        .org(&org)
        .put(format!("/api/dashboards/{id}"))
        .json(change.clone())
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(changed.version, 2);
    app.by(&alice)
        .org(&org)
        .put(format!("/api/dashboards/{id}"))
        .json(change)
        .await
        .refused(ErrorCode::Conflict);
    let Answer(status, answer) = app
        .by(&alice)
        .org(&org)
        .put(format!("/api/dashboards/{id}"))
        .json(json!({"title": "x"}))
        .await;
    assert_eq!(code(status, &answer), ErrorCode::ValidationError);
    assert_eq!(answer["details"]["field"], "version");

    // A clone into another organization of alice's, from this one.
    let other = app.org("alice", "acme-two").await;
    let copy: Dashboard = app
        .by(&alice)
        .org(&other)
        .post(format!("/api/dashboards/{id}/clone"))
        .json(json!({"sourceOrgId": org}))
        .await
        .expect(StatusCode::CREATED)
        .data();
    assert_eq!(
        (copy.org_id.as_str(), copy.title.as_str()),
        (other.as_str(), "Delivery (hourly) (copy)")
    );
    // Someone else's organization is not a source.
    let mallory = app.token("mallory", "mallory@example.com");
    let theirs = app.org("mallory", "evil").await;
    app.by(&mallory)
        .org(&theirs)
        .post(format!("/api/dashboards/{id}/clone"))
        .json(json!({"sourceOrgId": org}))
        .await
        .refused(ErrorCode::NotFound);
    app.relay().await;
    let clones = app.audited("dashboard.clone").await;
    assert_eq!(clones.len(), 1);
    assert_eq!(clones[0].details["sourceId"], id.as_str());
    app.by(&alice)
        .org(&org)
        .delete(format!("/api/dashboards/{id}"))
        .await
        .expect(StatusCode::OK);
    assert_eq!(
        app.by(&alice)
            .org(&org)
            .get(format!("/api/dashboards/{id}"))
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    let listed = app.by(&alice).org(&other).get("/api/dashboards").await.1;
    assert_eq!(pagination(&listed).total, 1);
}

/// The rule's value over a window equals the report's number for that window,
/// over generated event streams (proptest's generator, a deterministic runner).
async fn a_rules_value_is_the_reports_number(app: &TestApp) {
    let (org, alice, pipeline_id) = watched_org(app).await;
    let record = app.store.organization(&org).await.unwrap().unwrap();
    let end = minute(Utc::now());
    let strategy = proptest::collection::vec(
        (
            0i64..240,
            1i64..600,
            proptest::sample::select(vec!["SUCCEEDED", "FAILED", "STOPPED", "CANCELED"]),
        ),
        1..25,
    );
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    // Every execution ingested so far: (start, id, state).
    let mut all: Vec<(DateTime<Utc>, String, &str)> = Vec::new();
    for case in 0..4 {
        let stream = strategy.new_tree(&mut runner).unwrap().current();
        let mut events = Vec::new();
        for (i, (minutes_ago, seconds, state)) in stream.iter().enumerate() {
            let id = format!("c{case}-{i:02}");
            let start = end - Duration::minutes(*minutes_ago);
            events.extend(execution(&id, start, *seconds, state));
            all.push((start, id, state));
        }
        ingest(app, events).await;
        for (metric, window_minutes) in [
            ("failure_rate", 60),
            ("success_rate", 180),
            ("run_count", 120),
            ("failure_count", 240),
            ("p95_duration_ms", 90),
            ("error_category_count", 240),
            ("stage_failure_count", 240),
            ("consecutive_failures", 240),
        ] {
            let mut params = json!({"pipelineId": pipeline_id});
            if metric == "error_category_count" {
                params["errorCategory"] = json!("build");
            }
            if metric == "stage_failure_count" {
                params["stage"] = json!("Build");
            }
            let body: alerts::AlertRuleBody = serde_json::from_value(json!({
                "name": "p", "metric": metric, "params": params, "comparison": "gt", "threshold": 0,
                "window": format!("{window_minutes}m"), "minSamples": 0}))
            .unwrap();
            let (_, d) =
                alerts::check_rule(&body, std::time::Duration::from_secs(60), false).unwrap();
            let from = end - Duration::minutes(window_minutes);
            let value = alerts::metric_value(
                &app.state.infra.store,
                &app.state.config,
                &app.state.infra.reporting,
                &record,
                &d,
                (from, end),
            )
            .await
            .unwrap()
            .value;
            let range = format!(
                "pipelineId={pipeline_id}&from={}&to={}",
                from.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            );
            let get = |path: &'static str| {
                let range = range.clone();
                let (alice, org) = (alice.clone(), org.clone());
                async move {
                    app.by(&alice)
                        .org(&org)
                        .get(format!("/api/reports/execution/{path}?{range}&limit=100"))
                        .await
                        .1["data"]
                        .clone()
                }
            };
            let expected = match metric {
                "failure_rate" => {
                    let o = get("success-rate").await["overall"].clone();
                    let (f, s) = (
                        o["failed"].as_f64().unwrap(),
                        o["succeeded"].as_f64().unwrap(),
                    );
                    (f + s > 0.0).then(|| f / (f + s))
                }
                "success_rate" => get("success-rate").await["overall"]["rate"].as_f64(),
                "failure_count" => get("success-rate").await["overall"]["failed"].as_f64(),
                "run_count" => get("count").await["overall"]["total"].as_f64(),
                "p95_duration_ms" => get("duration").await["overall"]["p95"].as_f64(),
                "error_category_count" => Some(
                    get("errors").await["categories"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|c| c["category"] == "build")
                        .map_or(0.0, |c| c["count"].as_f64().unwrap()),
                ),
                "stage_failure_count" => Some(
                    get("stage-failures").await["stages"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|s| s["stage"] == "Build")
                        .map_or(0.0, |s| s["failures"].as_f64().unwrap()),
                ),
                _ => {
                    // Worked out from the streams themselves: failures in a row,
                    // newest first, among finished executions in the window.
                    let mut finished: Vec<&(DateTime<Utc>, String, &str)> = all
                        .iter()
                        .filter(|(at, _, state)| *at >= from && *at < end && *state != "CANCELED")
                        .collect();
                    finished.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
                    Some(
                        finished
                            .iter()
                            .take_while(|(_, _, state)| *state != "SUCCEEDED")
                            .count() as f64,
                    )
                }
            };
            assert_eq!(
                value, expected,
                "case {case}: {metric} over {window_minutes} minutes"
            );
        }
    }
}

async fn the_posture_trend_comes_from_hourly_snapshots(app: &TestApp) {
    let (org, alice, _) = watched_org(app).await;
    let hour = Utc::now().duration_trunc(Duration::hours(1)).unwrap();
    assert!(
        adapters::services::posture::snapshot_all(
            &app.state.infra.store,
            hour - Duration::hours(2)
        )
        .await
        .unwrap()
            >= 1
    );
    adapters::services::posture::snapshot_all(&app.state.infra.store, hour - Duration::hours(1))
        .await
        .unwrap();
    // A second round in the same hour writes nothing new.
    adapters::services::posture::snapshot_all(&app.state.infra.store, hour - Duration::hours(1))
        .await
        .unwrap();
    let range = format!(
        "granularity=hour&from={}&to={}",
        (hour - Duration::hours(3)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        hour.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    );
    let trend: PostureTrendReport = app
        .by(&alice)
        .org(&org)
        .get(format!("/api/reports/compliance/posture-trend?{range}"))
        .await
        .expect(StatusCode::OK)
        .data();
    let totals: Vec<Option<u64>> = trend.series.iter().map(|p| p.total).collect();
    assert_eq!(totals, [None, Some(1), Some(1)]);
    // A scan writes the trend's point when it ends.
    app.by(&alice)
        .org(&org)
        .post("/api/compliance/scans")
        .json(json!({"target": "pipeline"}))
        .await
        .expect(StatusCode::ACCEPTED);
    let state = AppState::new(
        test_config(&[]),
        app.store.clone(),
        Arc::new(adapters::audit::AuditCounters::default()),
    );
    assert_eq!(super::scans::sweep_all(&state).await.len(), 1);
    let scanned: i64 = sqlx::query_scalar(&format!(
        "SELECT COUNT(*) FROM posture_snapshots WHERE org_id = '{org}' AND cause = 'scan' AND total = 1"
    ))
    .fetch_one(adapters::storage::pool_for_tests(&app.store))
    .await
    .unwrap();
    assert_eq!(scanned, 1);
}

on_both_backends!(
    a_failing_pipeline_fires_once_and_resolves_once_everywhere,
    a_refusing_receiver_is_not_retried_and_a_failing_one_is,
    destinations_are_tested_refused_and_kept_while_used,
    bad_rules_and_panels_are_refused_naming_the_field,
    dashboards_keep_versions_clone_and_answer_the_reports_numbers,
    a_rules_value_is_the_reports_number,
    the_posture_trend_comes_from_hourly_snapshots,
);
