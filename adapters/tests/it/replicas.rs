//! Several server processes on one PostgreSQL database.

use std::time::{Duration, Instant};

use super::crash::{create_org, free_port, start_with, user_token, wait_healthy};
use super::fixtures;
use super::*;
use crate::api::data_of;
use adapters::http::wire::{
    Account, Conversation, Organization, Pipeline, Plugin, Scan, ScanCounts, ScanSchedule, Session,
    Verdict,
};
use adapters::inventory::BuildStatus;
use adapters::services::admin::impersonation::Started;
use adapters::services::alerts::Destination;

/// A rule changed through one replica is enforced by the other within a second,
/// although its cache would keep the old set for ten minutes.
#[tokio::test]
async fn a_rule_changed_on_one_replica_is_enforced_by_the_other_at_once() {
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let client = reqwest::Client::new();
    let (servers, bases) =
        two_servers(&client, &url, &[("CACHE_TTL_COMPLIANCE_RULES", "600")]).await;
    let [a, b] = bases;
    let token = user_token("alice");
    let org = create_org(&client, &a, &token, "replicated").await;
    let blocked = |base: String| {
        let client = client.clone();
        let token = token.clone();
        let org = org.clone();
        async move {
            let verdict: Verdict = data_of(
                client
                    .post(format!("{base}/api/compliance/validate/plugin/dry-run"))
                    .bearer_auth(&token)
                    .header("x-org-id", &org)
                    .json(&json!({"attributes": {"version": "latest"}}))
                    .send()
                    .await
                    .unwrap(),
            )
            .await;
            verdict.blocked
        }
    };
    // B caches the organization's (empty) rule set.
    assert!(!blocked(b.clone()).await);
    // A rule is added through A.
    let response = client
        .post(format!("{a}/api/compliance/rules"))
        .bearer_auth(&token)
        .header("x-org-id", &org)
        .json(
            &json!({"name": "pinned", "target": "plugin", "severity": "error",
                      "field": "version", "operator": "neq", "value": "latest"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let changed = Instant::now();
    let mut enforced_after = None;
    while changed.elapsed() < Duration::from_secs(1) {
        if blocked(b.clone()).await {
            enforced_after = Some(changed.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop(servers);
    drop_postgres(&admin_url, &name).await;
    let after = enforced_after.expect("replica B still served the old rule set after a second");
    eprintln!("replica B enforced the new rule after {after:?}");
}

/// Two replicas' build workers on one queue: every build runs once and ends once.
#[tokio::test]
async fn two_replicas_build_each_plugin_exactly_once() {
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let dir = std::env::temp_dir().join(format!(
        "compliance-replica-builds-{}",
        uuid::Uuid::new_v4()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("builds.log");
    let command = format!("echo \"$PLUGIN_NAME\" >> {} && sleep 0.05", log.display());
    let client = reqwest::Client::new();
    let (servers, bases) = two_servers(
        &client,
        &url,
        &[
            ("PLUGIN_BUILD_COMMAND", command.as_str()),
            ("PLUGIN_BUILD_POLL_MS", "10"),
            ("QUOTA_TIER_DEVELOPER_PLUGINS", "-1"),
        ],
    )
    .await;
    let token = user_token("alice");
    let org = create_org(&client, &bases[0], &token, "builders").await;
    let mut ids = Vec::new();
    for i in 0..30 {
        let archive = super::plugins::plugin_zip(&format!("p{i}"), "1.0.0");
        let boundary = "replica-boundary";
        let mut body = format!("--{boundary}\r\nContent-Disposition: form-data; name=\"plugin\"; filename=\"p.zip\"\r\n\r\n").into_bytes();
        body.extend_from_slice(&archive);
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        let answer: Plugin = data_of(
            client
                .post(format!("{}/api/plugins", bases[i % 2]))
                .bearer_auth(&token)
                .header("x-org-id", &org)
                .header(
                    "content-type",
                    format!("multipart/form-data; boundary={boundary}"),
                )
                .body(body)
                .send()
                .await
                .unwrap(),
        )
        .await;
        ids.push(answer.id);
    }
    let started = Instant::now();
    for id in &ids {
        loop {
            let answer: Plugin = data_of(
                client
                    .get(format!("{}/api/plugins/{id}", bases[1]))
                    .bearer_auth(&token)
                    .header("x-org-id", &org)
                    .send()
                    .await
                    .unwrap(),
            )
            .await;
            if answer.build_status == BuildStatus::Completed {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "builds stalled"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // Each builder ran once per plugin, whichever replica claimed it.
    let text = std::fs::read_to_string(&log).unwrap();
    let mut names: Vec<&str> = text.lines().collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!((before, names.len()), (30, 30), "{text}");
    // One terminal outcome each, once the replicas' relays have chained them.
    let store = Store::connect(&url).await.unwrap();
    let mut completed = Vec::new();
    for _ in 0..1500 {
        let filter = adapters::storage::AuditFilter {
            action: Some("plugin.build.completed".to_owned()),
            ..Default::default()
        };
        completed = store.audit_events(&filter, 1000, 0, true).await.unwrap().0;
        if completed.len() >= 30 && store.outbox_depth().await.unwrap().rows == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut targets: Vec<_> = completed
        .iter()
        .filter_map(|e| e.target_id.clone())
        .collect();
    targets.sort();
    let mut expected = ids.clone();
    expected.sort();
    let depth = store.outbox_depth().await.unwrap();
    assert_eq!(
        targets,
        expected,
        "{} completion events chained, {} events still in the outbox",
        completed.len(),
        depth.rows
    );
    store.close().await;
    stop(servers);
    drop_postgres(&admin_url, &name).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two servers on the database `url` with `vars`, once both answer: (the servers,
/// their base URLs).
async fn two_servers(
    client: &reqwest::Client,
    url: &str,
    vars: &[(&str, &str)],
) -> (Vec<super::crash::Running>, [String; 2]) {
    let ports = super::crash::two_free_ports();
    let mut servers = Vec::new();
    for port in ports {
        servers.push(start_with(url, port, vars));
        wait_healthy(client, &format!("http://127.0.0.1:{port}")).await;
    }
    (
        servers,
        ports.map(|port| format!("http://127.0.0.1:{port}")),
    )
}

/// Stops servers with SIGTERM and waits for each.
fn stop(servers: Vec<super::crash::Running>) {
    for server in &servers {
        super::crash::terminate(server);
    }
    for mut server in servers {
        let _ = server.wait();
    }
}

/// Runs `statement` on the test database.
async fn execute(store: &Store, statement: &str) {
    sqlx::query(statement)
        .execute(adapters::storage::pool_for_tests(store))
        .await
        .unwrap();
}

/// A number from the test database.
async fn number(store: &Store, query: &str) -> i64 {
    use sqlx::Row;
    sqlx::query(query)
        .fetch_one(adapters::storage::pool_for_tests(store))
        .await
        .unwrap()
        .try_get::<i64, _>(0)
        .unwrap()
}

/// Twenty schedules due at once, two schedulers whose lease lapses at every tick (so
/// they overlap): each due run starts exactly one scan.
#[tokio::test]
async fn two_replicas_start_each_due_schedule_exactly_once() {
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let client = reqwest::Client::new();
    let (servers, bases) = two_servers(
        &client,
        &url,
        &[
            ("SCAN_SCHEDULER_INTERVAL_MS", "20"),
            ("SCAN_LOCK_TTL_MS", "1"),
            ("COMPLIANCE_SCAN_POLL_MS", "50"),
        ],
    )
    .await;
    let token = user_token("alice");
    let org = create_org(&client, &bases[0], &token, "scheduled").await;
    let mut schedules = Vec::new();
    for i in 0..20 {
        let answer: ScanSchedule = data_of(
            client
                .post(format!("{}/api/compliance/scan-schedules", bases[i % 2]))
                .bearer_auth(&token)
                .header("x-org-id", &org)
                .json(&json!({"target": "all", "cronExpression": "0 0 1 1 *"}))
                .send()
                .await
                .unwrap(),
        )
        .await;
        schedules.push(answer.id);
    }
    let store = Store::connect(&url).await.unwrap();
    execute(
        &store,
        "UPDATE scan_schedules SET next_run_at = '2000-01-01T00:00:00.000000Z'",
    )
    .await;
    let started = Instant::now();
    while number(
        &store,
        "SELECT COUNT(*) FROM scan_schedules WHERE last_scan_id IS NULL",
    )
    .await
        > 0
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "schedules stalled"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Both schedulers keep ticking for a while: nothing more starts.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(number(&store, "SELECT COUNT(*) FROM scans").await, 20);
    assert_eq!(
        number(&store, "SELECT COUNT(DISTINCT schedule_id) FROM scans").await,
        20
    );
    // And the sweepers end every scan.
    while number(
        &store,
        "SELECT COUNT(*) FROM scans WHERE status <> 'completed'",
    )
    .await
        > 0
    {
        assert!(started.elapsed() < Duration::from_secs(60), "scans stalled");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let next = number(
        &store,
        "SELECT COUNT(*) FROM scan_schedules WHERE next_run_at > '2026-01-01'",
    )
    .await;
    assert_eq!(next, 20, "each moved to its next run");
    store.close().await;
    stop(servers);
    drop_postgres(&admin_url, &name).await;
}

/// A replica killed in the middle of a sweep: another replica resumes the scan once
/// its lease lapses, and the counts come out exact (nothing judged twice or missed).
#[tokio::test]
async fn a_killed_sweepers_scan_is_finished_by_another_replica() {
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let client = reqwest::Client::new();
    let vars = [
        ("COMPLIANCE_SCAN_LEASE_MS", "1000"),
        ("COMPLIANCE_SCAN_PROGRESS_BATCH_SIZE", "1"),
        ("COMPLIANCE_SCAN_CONCURRENCY", "1"),
        ("COMPLIANCE_SCAN_POLL_MS", "50"),
    ];
    let first = free_port();
    let mut a = start_with(&url, first, &vars);
    let base_a = format!("http://127.0.0.1:{first}");
    wait_healthy(&client, &base_a).await;
    let token = user_token("alice");
    let org = create_org(&client, &base_a, &token, "swept").await;
    let store = Store::connect(&url).await.unwrap();
    // 2,000 pipelines, every other one public.
    execute(
        &store,
        &format!(
            "INSERT INTO pipelines (id, org_id, project, organization, pipeline_name, access_modifier, \
             props, compliance, compliance_result, created_by, created_at, updated_at) \
             SELECT 'p' || lpad(i::text, 5, '0'), '{org}', 'web', 'acme', 'pipe' || i, \
             CASE WHEN i % 2 = 0 THEN 'public' ELSE 'private' END, '{{}}', \
             '{{\"result\":\"pass\",\"violations\":[]}}', 'pass', 'alice', \
             '2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:00.000000Z' \
             FROM generate_series(1, 2000) AS i"
        ),
    )
    .await;
    let rule = client
        .post(format!("{base_a}/api/compliance/rules"))
        .bearer_auth(&token)
        .header("x-org-id", &org)
        .json(
            &json!({"name": "Private only", "target": "pipeline", "severity": "error",
                      "field": "accessModifier", "operator": "eq", "value": "private"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(rule.status(), StatusCode::CREATED);
    let scan: Scan = data_of(
        client
            .post(format!("{base_a}/api/compliance/scans"))
            .bearer_auth(&token)
            .header("x-org-id", &org)
            .json(&json!({"target": "pipeline"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let id = scan.id;
    assert_eq!(scan.counts.total, 2000);
    let scanned = format!("SELECT scanned FROM scans WHERE id = '{id}'");
    let started = Instant::now();
    while number(&store, &scanned).await < 20 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the sweep did not start"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // SIGKILL: no graceful stop, the claim is left to lapse.
    a.kill().unwrap();
    let _ = a.wait();
    let at_kill = number(&store, &scanned).await;
    assert!(at_kill < 2000, "killed mid-sweep ({at_kill} scanned)");
    let second = free_port();
    let mut b = start_with(&url, second, &vars);
    let base_b = format!("http://127.0.0.1:{second}");
    wait_healthy(&client, &base_b).await;
    let status = format!("SELECT COUNT(*) FROM scans WHERE id = '{id}' AND status = 'completed'");
    while number(&store, &status).await == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the scan stayed stuck"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let done: Scan = data_of(
        client
            .get(format!("{base_b}/api/compliance/scans/{id}"))
            .bearer_auth(&token)
            .header("x-org-id", &org)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        done.counts,
        ScanCounts {
            total: 2000,
            scanned: 2000,
            passed: 1000,
            warned: 0,
            blocked: 1000,
            errors: 0
        }
    );
    assert_eq!(
        number(
            &store,
            &format!("SELECT COUNT(DISTINCT entity_id) FROM scan_results WHERE scan_id = '{id}'")
        )
        .await,
        2000
    );
    // Taken over once at least (again if the new sweeper's own one-second lease
    // lapsed on a loaded machine).
    assert!(
        number(
            &store,
            &format!("SELECT takeovers::bigint FROM scans WHERE id = '{id}'")
        )
        .await
            >= 1
    );
    store.close().await;
    super::crash::terminate(&b);
    let _ = b.wait();
    drop_postgres(&admin_url, &name).await;
}

/// A server killed between a blocked check and its delivery: the notification is in
/// the database, and the next server delivers it.
#[tokio::test]
async fn a_notification_survives_a_kill_before_its_delivery() {
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let seen = std::sync::Arc::new(super::notifications::Seen::default());
    let hook = super::notifications::webhook_receiver(seen.clone()).await;
    let client = reqwest::Client::new();
    // The first server's delivery worker sleeps for ten minutes after its first look.
    let port = free_port();
    let mut first = start_with(
        &url,
        port,
        &[
            ("WEBHOOK_ALLOW_PRIVATE", "true"),
            ("NOTIFY_POLL_MS", "600000"),
        ],
    );
    let base = format!("http://127.0.0.1:{port}");
    wait_healthy(&client, &base).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let token = user_token("alice");
    let org = create_org(&client, &base, &token, "noisy").await;
    let send = |method: reqwest::Method, path: &str, body: Value| {
        client
            .request(method, format!("{base}{path}"))
            .bearer_auth(&token)
            .header("x-org-id", &org)
            .json(&body)
            .send()
    };
    let rule = send(
        reqwest::Method::POST,
        "/api/compliance/rules",
        json!({"name": "Private only", "target": "pipeline", "severity": "error",
               "field": "accessModifier", "operator": "eq", "value": "private"}),
    )
    .await
    .unwrap();
    assert_eq!(rule.status(), StatusCode::CREATED);
    let saved = send(
        reqwest::Method::PUT,
        "/api/compliance/notification-preferences",
        json!({"webhookUrl": hook, "webhookSecret": "s3cret"}),
    )
    .await
    .unwrap();
    assert_eq!(saved.status(), StatusCode::OK);
    let blocked = send(
        reqwest::Method::POST,
        "/api/pipelines",
        fixtures::pipeline_as("deploy", "public"),
    )
    .await
    .unwrap();
    assert_eq!(blocked.status(), StatusCode::FORBIDDEN);
    first.kill().unwrap();
    let _ = first.wait();
    assert!(
        seen.requests.lock().unwrap().is_empty(),
        "not delivered before the kill"
    );
    let port = free_port();
    let second = start_with(
        &url,
        port,
        &[("WEBHOOK_ALLOW_PRIVATE", "true"), ("NOTIFY_POLL_MS", "50")],
    );
    wait_healthy(&client, &format!("http://127.0.0.1:{port}")).await;
    let started = Instant::now();
    while seen.requests.lock().unwrap().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never delivered"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let requests = seen.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    super::notifications::verify(&requests[0].0, &requests[0].1, "s3cret");
    let sent: Value = serde_json::from_slice(&requests[0].1).unwrap();
    assert_eq!(sent["type"], "check.block");
    super::crash::terminate(&second);
    drop(second);
    drop_postgres(&admin_url, &name).await;
}

/// Two servers whose digest schedulers overlap (their lease lapses at every tick): a
/// window of held notifications becomes exactly one digest.
#[tokio::test]
async fn two_replicas_send_one_daily_digest() {
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let seen = std::sync::Arc::new(super::notifications::Seen::default());
    let hook = super::notifications::webhook_receiver(seen.clone()).await;
    let client = reqwest::Client::new();
    let vars = [
        ("WEBHOOK_ALLOW_PRIVATE", "true"),
        ("NOTIFY_POLL_MS", "20"),
        ("DIGEST_SCHEDULER_INTERVAL_MS", "20"),
        ("DIGEST_LOCK_TTL_MS", "1"),
    ];
    let (servers, bases) = two_servers(&client, &url, &vars).await;
    let token = user_token("alice");
    let org = create_org(&client, &bases[0], &token, "digested").await;
    let send = |base: &str, method: reqwest::Method, path: &str, body: Value| {
        client
            .request(method, format!("{base}{path}"))
            .bearer_auth(&token)
            .header("x-org-id", &org)
            .json(&body)
            .send()
    };
    let rule = send(
        &bases[0],
        reqwest::Method::POST,
        "/api/compliance/rules",
        json!({"name": "Private only", "target": "pipeline", "severity": "error",
               "field": "accessModifier", "operator": "eq", "value": "private"}),
    )
    .await
    .unwrap();
    assert_eq!(rule.status(), StatusCode::CREATED);
    let saved = send(
        &bases[1],
        reqwest::Method::PUT,
        "/api/compliance/notification-preferences",
        json!({"webhookUrl": hook, "digestMode": "daily"}),
    )
    .await
    .unwrap();
    assert_eq!(saved.status(), StatusCode::OK);
    for i in 0..4 {
        let blocked = send(
            &bases[i % 2],
            reqwest::Method::POST,
            "/api/pipelines",
            fixtures::pipeline_as(&format!("p{i}"), "public"),
        )
        .await
        .unwrap();
        assert_eq!(blocked.status(), StatusCode::FORBIDDEN);
    }
    let store = Store::connect(&url).await.unwrap();
    assert_eq!(
        number(
            &store,
            "SELECT COUNT(*) FROM deliveries WHERE status = 'held'"
        )
        .await,
        4
    );
    // The window ends (moved to a day long past).
    execute(
        &store,
        "UPDATE deliveries SET digest_window = 'daily:2000-01-01' WHERE status = 'held'",
    )
    .await;
    let started = Instant::now();
    while seen.requests.lock().unwrap().is_empty() {
        assert!(started.elapsed() < Duration::from_secs(30), "no digest");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let requests = seen.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1, "one digest");
    let digest: Value = serde_json::from_slice(&requests[0].1).unwrap();
    assert_eq!(digest["type"], "digest");
    assert_eq!(digest["data"]["count"], 4);
    assert_eq!(digest["data"]["window"], "daily:2000-01-01");
    assert_eq!(number(&store, "SELECT COUNT(*) FROM digests").await, 1);
    store.close().await;
    stop(servers);
    drop_postgres(&admin_url, &name).await;
}

/// A service's token for the servers these tests start.
fn service_token(service: &str) -> String {
    let mut claims = Claims::user(service, None, Utc::now(), Duration::from_secs(3600));
    claims.service = Some(service.to_owned());
    TokenKeys::hs256(SECRET).sign(&claims).unwrap()
}

/// Two servers on one database count one account's pool exactly: 64 concurrent
/// increments of 10 against a limit of 500, spread over both servers, a root and its
/// team, count 500 and refuse the rest; 12 concurrent member adds against 3 free
/// seats add exactly 3.
#[tokio::test]
async fn two_replicas_count_one_pool_exactly() {
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let client = reqwest::Client::new();
    let (servers, bases) = two_servers(
        &client,
        &url,
        &[
            ("BOOTSTRAP_SUPERADMIN_EMAILS", "root@example.com"),
            ("QUOTA_TIER_DEVELOPER_SEATS", "1"),
        ],
    )
    .await;
    let root = user_token("root");
    create_org(&client, &bases[0], &root, "system").await;
    let alice = user_token("alice");
    let acme = create_org(&client, &bases[0], &alice, "acme").await;
    let team: Organization = data_of(
        client
            .post(format!("{}/api/organization", bases[1]))
            .bearer_auth(&alice)
            .header("x-org-id", &acme)
            .json(&json!({"name": "platform", "parentOrgId": acme}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let team = team.id;
    let reply = client
        .put(format!("{}/api/quotas/{acme}", bases[1]))
        .bearer_auth(&root)
        .json(&json!({"limits": {"aiCalls": 500}}))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);

    let service = service_token("generator");
    let mut calls = Vec::new();
    for i in 0..64 {
        let base = bases[i % 2].clone();
        let org = if i % 4 < 2 {
            acme.clone()
        } else {
            team.clone()
        };
        let (client, service) = (client.clone(), service.clone());
        calls.push(tokio::spawn(async move {
            client
                .post(format!("{base}/api/quotas/{org}/increment"))
                .bearer_auth(&service)
                .json(&json!({"type": "aiCalls", "amount": 10}))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }));
    }
    let mut statuses = Vec::new();
    for call in calls {
        statuses.push(call.await.unwrap());
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        50,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        14,
        "{statuses:?}"
    );
    let store = Store::connect(&url).await.unwrap();
    assert_eq!(
        number(
            &store,
            &format!(
                "SELECT used FROM quota_pool WHERE root_id = '{acme}' AND dimension = 'aiCalls'"
            )
        )
        .await,
        500
    );
    let own = number(
        &store,
        &format!(
            "SELECT COALESCE(SUM(used), 0)::BIGINT FROM quota_usage WHERE dimension = 'aiCalls' AND org_id IN ('{acme}', '{team}')"
        ),
    )
    .await;
    assert_eq!(
        own, 500,
        "the root's and the team's own rows add up to the pool"
    );

    // Seats: 4 for the account, the owner holds one; 12 adds race for the other 3.
    let reply = client
        .put(format!("{}/api/organization/{acme}/seat-limit", bases[0]))
        .bearer_auth(&root)
        .json(&json!({"seats": 4}))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    let mut adds = Vec::new();
    for i in 0..12 {
        let base = bases[i % 2].clone();
        // Half to the root, half to the team: one account, one seat count.
        let org = if i % 4 < 2 {
            acme.clone()
        } else {
            team.clone()
        };
        let (client, alice) = (client.clone(), alice.clone());
        adds.push(tokio::spawn(async move {
            client
                .post(format!("{base}/api/organization/{org}/members"))
                .bearer_auth(&alice)
                .json(&json!({"userId": format!("user-{i}")}))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }));
    }
    let mut statuses = Vec::new();
    for add in adds {
        statuses.push(add.await.unwrap());
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        3,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        9,
        "{statuses:?}"
    );
    assert_eq!(
        number(
            &store,
            &format!(
                "SELECT COUNT(DISTINCT m.user_id) FROM memberships m JOIN organizations o ON o.id = m.org_id
                 WHERE (o.id = '{acme}' OR o.parent_org_id = '{acme}') AND m.active = 1"
            )
        )
        .await,
        4
    );
    store.close().await;
    stop(servers);
    drop_postgres(&admin_url, &name).await;
}

/// Two replicas keep the gate's facts and spend apiCalls from blocks of their own: a
/// member removed through one is refused by the other within a second although it
/// had kept their facts; 400 concurrent reads over both against 300 units never pass
/// the limit and are refused only within the stated bound (63 unspent units per
/// other replica); once the idle blocks come back, the account gets exactly 300.
#[tokio::test]
async fn two_replicas_follow_the_gate_and_spend_api_calls_exactly() {
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let client = reqwest::Client::new();
    let (servers, bases) = two_servers(
        &client,
        &url,
        &[("BOOTSTRAP_SUPERADMIN_EMAILS", "root@example.com")],
    )
    .await;
    let [a, b] = bases.clone();
    let root = user_token("root");
    create_org(&client, &a, &root, "system").await;
    let alice = user_token("alice");
    let acme = create_org(&client, &a, &alice, "acme").await;
    let status_of = |base: String, token: String| {
        let (client, acme) = (client.clone(), acme.clone());
        async move {
            client
                .get(format!("{base}/api/organization"))
                .bearer_auth(&token)
                .header("x-org-id", &acme)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    let added = client
        .post(format!("{a}/api/organization/{acme}/members"))
        .bearer_auth(&alice)
        .json(&json!({"userId": "bob"}))
        .send()
        .await
        .unwrap();
    assert_eq!(added.status(), StatusCode::CREATED);
    let bob = user_token("bob");
    for _ in 0..2 {
        assert_eq!(status_of(b.clone(), bob.clone()).await, 200);
    }
    let removed = client
        .delete(format!("{a}/api/organization/{acme}/members/bob"))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), StatusCode::OK);
    let changed = Instant::now();
    let mut refused_after = None;
    while changed.elapsed() < Duration::from_secs(1) {
        if status_of(b.clone(), bob.clone()).await == 403 {
            refused_after = Some(changed.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let after = refused_after.expect("replica B still let a removed member in after a second");
    eprintln!("replica B refused the removed member after {after:?}");

    // Both replicas give back what they hold once idle; then 300 more units.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let store = Store::connect(&url).await.unwrap();
    let pool_used =
        format!("SELECT used FROM quota_pool WHERE root_id = '{acme}' AND dimension = 'apiCalls'");
    let used = number(&store, &pool_used).await;
    let limit = used + 300;
    let reply = client
        .put(format!("{b}/api/quotas/{acme}"))
        .bearer_auth(&root)
        .json(&json!({"limits": {"apiCalls": limit}}))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    let gate = Arc::new(tokio::sync::Semaphore::new(32));
    let mut calls = Vec::new();
    for i in 0..400 {
        let permit = gate.clone().acquire_owned().await.unwrap();
        let call = status_of(bases[i % 2].clone(), alice.clone());
        calls.push(tokio::spawn(async move {
            let status = call.await;
            drop(permit);
            status
        }));
    }
    let mut statuses = Vec::new();
    for call in calls {
        statuses.push(call.await.unwrap());
    }
    let served = statuses.iter().filter(|s| **s == 200).count();
    let refused = statuses.iter().filter(|s| **s == 429).count();
    assert_eq!(served + refused, 400, "{statuses:?}");
    assert!(
        (300 - 2 * 63..=300).contains(&served),
        "{served} served against 300 units"
    );
    assert!(number(&store, &pool_used).await <= limit);
    // The other replica's rest comes back when it is idle; one replica then gets it.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let mut more = 0;
    while status_of(a.clone(), alice.clone()).await == 200 {
        more += 1;
        assert!(more <= 300, "more than the limit");
    }
    assert_eq!(served + more, 300, "{served} then {more}");
    assert_eq!(status_of(b.clone(), alice.clone()).await, 429);
    assert_eq!(number(&store, &pool_used).await, limit);
    store.close().await;
    stop(servers);
    drop_postgres(&admin_url, &name).await;
}

/// What other replicas hear is sent by the change's own transaction: a rule created
/// tells its organization's sets are stale, a membership change tells the gate, and
/// a change that is refused or rolled back tells nothing.
#[tokio::test]
async fn changes_are_heard_from_their_own_transaction() {
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let client = reqwest::Client::new();
    let (servers, bases) = two_servers(&client, &url, &[]).await;
    let a = bases[0].clone();
    let mut listener = sqlx::postgres::PgListener::connect(&url).await.unwrap();
    listener
        .listen_all(["compliance_rule_cache", "compliance_facts"])
        .await
        .unwrap();
    let alice = user_token("alice");
    let acme = create_org(&client, &a, &alice, "acme").await;
    let mut heard = Vec::new();
    let next = async |listener: &mut sqlx::postgres::PgListener| {
        tokio::time::timeout(Duration::from_millis(500), listener.recv())
            .await
            .ok()
            .map(|n| {
                let n = n.unwrap();
                (n.channel().to_owned(), n.payload().to_owned())
            })
    };
    while let Some(notice) = next(&mut listener).await {
        heard.push(notice);
    }
    assert!(
        heard
            .iter()
            .any(|(channel, _)| channel == "compliance_facts"),
        "creating an organization changes the gate's facts: {heard:?}"
    );
    let rule = |name: &str, operator: &str| {
        json!({"name": name, "target": "plugin", "severity": "error",
               "field": "version", "operator": operator, "value": "latest"})
    };
    let created = client
        .post(format!("{a}/api/compliance/rules"))
        .bearer_auth(&alice)
        .header("x-org-id", &acme)
        .json(&rule("pinned", "neq"))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    // (The organization's first counted request also synchronized its limits: the
    // gate hears of that.)
    let mut heard = Vec::new();
    while let Some(notice) = next(&mut listener).await {
        heard.push(notice);
    }
    assert!(
        heard.contains(&(
            "compliance_rule_cache".to_owned(),
            json!([acme]).to_string()
        )),
        "{heard:?}"
    );
    let refused = client
        .post(format!("{a}/api/compliance/rules"))
        .bearer_auth(&alice)
        .header("x-org-id", &acme)
        .json(&rule("other", "no-such-operator"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let store = Store::connect(&url).await.unwrap();
    let mut tx = adapters::storage::pool_for_tests(&store)
        .begin()
        .await
        .unwrap();
    sqlx::query(&format!(
        "UPDATE rules SET version = version + 1 WHERE org_id = '{acme}'"
    ))
    .execute(&mut *tx)
    .await
    .unwrap();
    sqlx::query(&format!("DELETE FROM memberships WHERE org_id = '{acme}'"))
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(next(&mut listener).await, None, "nothing was changed");
    store.close().await;
    stop(servers);
    drop_postgres(&admin_url, &name).await;
}

/// 64 writers over two replicas append to one chain at once: the appends sealed
/// together on each replica never fork it (every seq once, each row after the one
/// before), and the chain verifies.
#[tokio::test]
async fn sixty_four_writers_on_two_replicas_never_fork_a_chain() {
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let client = reqwest::Client::new();
    let (servers, bases) = two_servers(&client, &url, &[]).await;
    let token = service_token("plugin");
    let mut writers = Vec::new();
    for w in 0..64 {
        let (client, token, base) = (client.clone(), token.clone(), bases[w % 2].clone());
        writers.push(tokio::spawn(async move {
            let mut statuses = Vec::new();
            for i in 0..4 {
                let status = client
                    .post(format!("{base}/api/audit/events"))
                    .bearer_auth(&token)
                    .header("idempotency-key", format!("w{w}-e{i}"))
                    .json(&json!({"action": "plugin.upload", "actorId": "user-1",
                                  "orgId": "org-busy", "targetId": format!("p-{w}-{i}")}))
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16();
                statuses.push(status);
            }
            statuses
        }));
    }
    for writer in writers {
        assert_eq!(writer.await.unwrap(), vec![201; 4]);
    }
    let store = Store::connect(&url).await.unwrap();
    let rows = store.chain_batch("org-busy", 0, 1000).await.unwrap();
    assert_eq!(rows.len(), 256);
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row.seq, i as u64 + 1, "every seq once");
        if i > 0 {
            assert_eq!(row.prev_hash, rows[i - 1].hash, "no fork");
        }
    }
    let mut verifier = audit_chain::ChainVerifier::new();
    for row in &rows {
        verifier.push(row);
    }
    assert!(verifier.finish().ok, "the chain verifies");
    store.close().await;
    stop(servers);
    drop_postgres(&admin_url, &name).await;
}

/// Sign-in across two server processes on one database, driven as users drive it:
/// `compliance provision` and `compliance login` from the command line, the
/// verification link through a real SMTP exchange, sessions on both replicas. A
/// revoke-all on one replica refuses the old access token on the other within a
/// second; afterwards neither server's log (at debug, statements included) holds a
/// password, a token or a hash.
#[tokio::test]
async fn sign_in_across_replicas_and_a_revoke_all_seen_by_the_other_within_a_second() {
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let mailbox = super::notifications::Mailbox::default();
    let smtp = super::notifications::smtp_receiver(mailbox.clone()).await;
    let vars = [
        ("SMTP_URL", smtp.as_str()),
        ("NOTIFY_POLL_MS", "50"),
        ("BOOTSTRAP_SUPERADMIN_EMAILS", ROOT_EMAIL),
    ];
    let dir = std::env::temp_dir().join(format!("compliance-signin-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let logs = [dir.join("a.log"), dir.join("b.log")];
    let client = reqwest::Client::new();
    let ports = super::crash::two_free_ports();
    let mut servers = Vec::new();
    for (port, log) in ports.iter().zip(&logs) {
        servers.push(super::crash::start_logged(&url, *port, &vars, log));
        wait_healthy(&client, &format!("http://127.0.0.1:{port}")).await;
    }
    let [a, b] = ports.map(|port| format!("http://127.0.0.1:{port}"));
    let root_password = "provisioned passphrase";
    let password = "correct horse battery";
    let cli = |args: &[&str], env: &[(&str, &str)]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_compliance"))
            .args(args)
            .env("DATABASE_URL", &url)
            .env("JWT_SECRET", SECRET)
            .env("BOOTSTRAP_SUPERADMIN_EMAILS", ROOT_EMAIL)
            .env_remove("PLATFORM_IDENTIFIER")
            .env_remove("PLATFORM_PASSWORD")
            .envs(env.iter().copied())
            .output()
            .unwrap()
    };
    // Provisioning refuses the development defaults, then makes the super-admin.
    let refused = cli(&["provision"], &[]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let made = cli(
        &["provision"],
        &[
            ("PLATFORM_IDENTIFIER", ROOT_EMAIL),
            ("PLATFORM_PASSWORD", root_password),
        ],
    );
    assert!(made.status.success(), "{made:?}");
    let unlisted = cli(
        &["provision"],
        &[
            ("PLATFORM_IDENTIFIER", "eve@example.com"),
            ("PLATFORM_PASSWORD", root_password),
        ],
    );
    assert_eq!(unlisted.status.code(), Some(2), "{unlisted:?}");

    // Registration on A; the link arrives by mail and is followed on B.
    let registered: Value = client
        .post(format!("{a}/api/auth/register"))
        .json(&json!({"email": "ana@example.com", "password": password}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(registered["statusCode"], 201, "{registered}");
    let mut mail = None;
    for _ in 0..100 {
        if let Some((to, data)) = mailbox.lock().unwrap().first().cloned() {
            mail = Some((to, data));
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (to, data) = mail.expect("no verification mail arrived");
    assert_eq!(to, vec!["ana@example.com".to_owned()]);
    // Undo quoted-printable soft breaks and escapes.
    let data = data.replace("=\n", "").replace("=3D", "=");
    let start = data.find("token=").unwrap() + "token=".len();
    let link: String = data[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .collect();
    let verified = client
        .post(format!("{b}/api/auth/verify-email"))
        .json(&json!({"token": link}))
        .send()
        .await
        .unwrap();
    assert_eq!(verified.status(), StatusCode::OK);

    // `compliance login` prints an access token (PLATFORM_TOKEN for the other verbs).
    let login = cli(
        &["login", "--url", &a],
        &[
            ("PLATFORM_IDENTIFIER", "ana@example.com"),
            ("PLATFORM_PASSWORD", password),
        ],
    );
    assert!(login.status.success(), "{login:?}");
    let cli_token = String::from_utf8(login.stdout).unwrap().trim().to_owned();
    let wrong = cli(
        &["login", "--url", &a],
        &[
            ("PLATFORM_IDENTIFIER", "ana@example.com"),
            ("PLATFORM_PASSWORD", "nope nope nope"),
        ],
    );
    assert_eq!(wrong.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("INVALID_CREDENTIALS"));

    // A second session, on B; refreshed on A.
    let session: Session = data_of(
        client
            .post(format!("{b}/api/auth/login"))
            .json(&json!({"identifier": "ana@example.com", "password": password}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let refresh_token = session.refresh_token;
    let renewed: Session = data_of(
        client
            .post(format!("{a}/api/auth/refresh"))
            .json(&json!({"refreshToken": refresh_token}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let access = renewed.access_token;
    let me = |base: String, token: String| {
        let client = client.clone();
        async move {
            client
                .get(format!("{base}/api/me"))
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    // B keeps what the session stands on.
    assert_eq!(me(b.clone(), access.clone()).await, StatusCode::OK);
    assert_eq!(me(b.clone(), cli_token.clone()).await, StatusCode::OK);
    // Revoke-all through A with the command line's token.
    let revoked = client
        .post(format!("{a}/api/me/tokens/revoke-all"))
        .bearer_auth(&cli_token)
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), StatusCode::OK);
    let changed = Instant::now();
    let mut refused_after = None;
    while changed.elapsed() < Duration::from_secs(1) {
        if me(b.clone(), access.clone()).await == StatusCode::UNAUTHORIZED {
            refused_after = Some(changed.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The super-admin signs in too.
    let root = client
        .post(format!("{b}/api/auth/login"))
        .json(&json!({"identifier": ROOT_EMAIL, "password": root_password}))
        .send()
        .await
        .unwrap();
    assert_eq!(root.status(), StatusCode::OK);
    stop(servers);
    drop_postgres(&admin_url, &name).await;
    let after = refused_after.expect("replica B still accepted the revoked token after a second");
    eprintln!("replica B refused the revoked token after {after:?}");
    for log in &logs {
        let text = std::fs::read_to_string(log).unwrap();
        assert!(
            text.contains("listening"),
            "the log is empty: {}",
            log.display()
        );
        for secret in [
            password,
            root_password,
            &link,
            &refresh_token,
            &access,
            &cli_token,
            "$argon2id$",
        ] {
            assert!(!text.contains(secret), "{} holds a secret", log.display());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The per-minute message limit on two server processes (issue 51): 24 messages of
/// one author posted at once, half through each replica, with MESSAGES_PER_MINUTE 5
/// and one written before: exactly four more are written, the rest are 429.
#[tokio::test]
async fn two_replicas_keep_one_authors_minute_exactly() {
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let client = reqwest::Client::new();
    let (servers, bases) = two_servers(&client, &url, &[("MESSAGES_PER_MINUTE", "5")]).await;
    let [a, b] = bases;
    let alice = user_token("alice");
    let org = create_org(&client, &a, &alice, "chatty").await;
    let added = client
        .post(format!("{a}/api/organization/{org}/members"))
        .bearer_auth(&alice)
        .json(&json!({"userId": "bob", "role": "member"}))
        .send()
        .await
        .unwrap();
    assert_eq!(added.status(), StatusCode::CREATED);
    let started: Conversation = data_of(
        client
            .post(format!("{a}/api/messages/conversations"))
            .bearer_auth(&alice)
            .header("x-org-id", &org)
            .json(&json!({"participants": ["bob"], "body": "0"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let id = started.id;
    let posts = (0..24).map(|i| {
        let base = if i % 2 == 0 { a.clone() } else { b.clone() };
        let (client, alice, org, id) = (client.clone(), alice.clone(), org.clone(), id.clone());
        async move {
            client
                .post(format!("{base}/api/messages/conversations/{id}/messages"))
                .bearer_auth(&alice)
                .header("x-org-id", &org)
                .json(&json!({"body": i.to_string()}))
                .send()
                .await
                .unwrap()
                .status()
        }
    });
    let statuses = futures_util::future::join_all(posts).await;
    let written = statuses
        .iter()
        .filter(|s| **s == StatusCode::CREATED)
        .count();
    let limited = statuses
        .iter()
        .filter(|s| **s == StatusCode::TOO_MANY_REQUESTS)
        .count();
    stop(servers);
    drop_postgres(&admin_url, &name).await;
    assert_eq!((written, limited), (4, 20), "{statuses:?}");
}

/// An impersonation started through one replica works on the other; ended on the
/// first, its token is refused by the second within a second.
#[tokio::test]
async fn an_impersonation_ended_on_one_replica_is_refused_by_the_other_within_a_second() {
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let client = reqwest::Client::new();
    let (servers, [a, b]) = two_servers(
        &client,
        &url,
        &[("BOOTSTRAP_SUPERADMIN_EMAILS", ROOT_EMAIL)],
    )
    .await;
    let keys = TokenKeys::hs256(SECRET);
    let root = keys
        .sign(&Claims::user(
            "root",
            Some(ROOT_EMAIL),
            Utc::now(),
            Duration::from_secs(3600),
        ))
        .unwrap();
    let mut step = Claims::user("root", None, Utc::now(), Duration::from_secs(600));
    step.step_up = true;
    let step = keys.sign(&step).unwrap();
    create_org(&client, &a, &root, "system").await;
    let registered: Account = data_of(
        client
            .post(format!("{a}/api/auth/register"))
            .json(&json!({"email": "ada@example.com", "password": "correct horse battery"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let ada = registered.user_id;
    let response = client
        .post(format!("{a}/api/admin/impersonations"))
        .bearer_auth(&root)
        .header("x-step-up-token", &step)
        .json(&json!({"userId": ada, "reason": "checking her view of the rules", "minutes": 10}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let started: Started = data_of(response).await;
    let (id, seen) = (started.id, started.access_token);
    let me = |base: &str| {
        client
            .get(format!("{base}/api/me"))
            .bearer_auth(&seen)
            .send()
    };
    // Both replicas honour it (and keep it).
    for base in [&a, &b, &b] {
        assert_eq!(me(base).await.unwrap().status().as_u16(), 200);
    }
    let ended = client
        .delete(format!("{a}/api/admin/impersonations/{id}"))
        .bearer_auth(&root)
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status().as_u16(), 200);
    let at = Instant::now();
    loop {
        let status = me(&b).await.unwrap().status().as_u16();
        if status == 401 {
            break;
        }
        assert_eq!(status, 200);
        assert!(
            at.elapsed() < Duration::from_secs(1),
            "the other replica still honours the ended impersonation"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("refused by the other replica after {:?}", at.elapsed());
    stop(servers);
    drop_postgres(&admin_url, &name).await;
}

/// Two servers evaluate alert rules every second on one database: a pipeline that
/// starts failing pages its webhook once, and its resolve once, whichever replica
/// holds the evaluation's lease and whichever delivers.
#[tokio::test]
async fn two_replicas_page_once_and_resolve_once() {
    use super::alerts::{execution, ARN};
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let seen = std::sync::Arc::new(super::notifications::Seen::default());
    let hook = super::notifications::webhook_receiver(seen.clone()).await;
    let client = reqwest::Client::new();
    let vars = [
        ("WEBHOOK_ALLOW_PRIVATE", "true"),
        ("NOTIFY_POLL_MS", "20"),
        ("ALERT_EVALUATION_INTERVAL_SECONDS", "1"),
    ];
    let (servers, bases) = two_servers(&client, &url, &vars).await;
    let token = user_token("alice");
    let org = create_org(&client, &bases[0], &token, "paged").await;
    let send = |base: &str, path: &str, body: Value| {
        client
            .post(format!("{base}{path}"))
            .bearer_auth(&token)
            .header("x-org-id", &org)
            .json(&body)
            .send()
    };
    let made: Pipeline = data_of(
        send(
            &bases[0],
            "/api/pipelines",
            fixtures::staged_pipeline("web"),
        )
        .await
        .unwrap(),
    )
    .await;
    let pipeline = made.id;
    let registered = send(
        &bases[1],
        "/api/pipelines/registry",
        json!({"arn": ARN, "pipelineId": pipeline}),
    )
    .await
    .unwrap();
    assert_eq!(registered.status(), StatusCode::OK);
    let dest: Destination = data_of(
        send(
            &bases[1],
            "/api/alerts/destinations",
            json!({"name": "hook", "kind": "slack", "url": hook}),
        )
        .await
        .unwrap(),
    )
    .await;
    let rule = send(
        &bases[0],
        "/api/alerts/rules",
        json!({
        "name": "web failing", "metric": "failure_rate", "params": {"pipelineId": pipeline},
        "comparison": "gt", "threshold": 0.5, "window": "1h", "destinations": [dest.id]}),
    )
    .await
    .unwrap();
    assert_eq!(rule.status(), StatusCode::CREATED);
    let ingest = |events: Vec<Value>| {
        client
            .post(format!("{}/api/reports/events", bases[0]))
            .bearer_auth(service_token("eventbridge"))
            .json(&events)
            .send()
    };
    let now = Utc::now();
    let mut events = execution("f1", now - chrono::Duration::minutes(5), 10, "FAILED");
    events.extend(execution(
        "f2",
        now - chrono::Duration::minutes(4),
        10,
        "FAILED",
    ));
    assert_eq!(ingest(events).await.unwrap().status(), StatusCode::OK);
    let wait_for = |n: usize| {
        let seen = seen.clone();
        async move {
            let started = Instant::now();
            while seen.requests.lock().unwrap().len() < n {
                assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "no notification {n}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            // Several more evaluations and polls by both replicas: nothing else.
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
    };
    wait_for(1).await;
    assert_eq!(seen.requests.lock().unwrap().len(), 1, "one page");
    let mut events = Vec::new();
    for i in 0..4 {
        events.extend(execution(
            &format!("ok{i}"),
            Utc::now() - chrono::Duration::minutes(3),
            10,
            "SUCCEEDED",
        ));
    }
    assert_eq!(ingest(events).await.unwrap().status(), StatusCode::OK);
    wait_for(2).await;
    let requests = seen.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2, "one resolve");
    let texts: Vec<String> = requests
        .iter()
        .map(|(_, body)| {
            serde_json::from_slice::<Value>(body).unwrap()["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert!(
        texts[0].contains("[FIRING]") && texts[1].contains("[RESOLVED]"),
        "{texts:?}"
    );
    let store = Store::connect(&url).await.unwrap();
    assert_eq!(
        number(&store, "SELECT COUNT(*) FROM alert_history").await,
        2
    );
    store.close().await;
    stop(servers);
    drop_postgres(&admin_url, &name).await;
}
