//! Beyond one database server: several hosts in `DATABASE_URL`, a server that refuses
//! writes, the stop on SIGTERM, the migrations' own lease. (The failover of a real
//! pg_auto_failover pair is `scripts/test-ha`.)

use crate::api::{pagination, Answer};
use adapters::code::ErrorCode;
use adapters::http::wire::{AuditEvent, Pipeline};
use std::time::{Duration, Instant};

use super::crash::{create_org, free_port, start_with, terminate, user_token, wait_healthy};
use super::*;

/// `postgres://...@127.0.0.1:5432/db` with a host that answers nothing named first.
fn behind_a_dead_host(url: &str) -> String {
    let dead = free_port();
    let (head, rest) = url.split_once('@').expect("a user in TEST_DATABASE_URL");
    format!("{head}@127.0.0.1:{dead},{rest}?target_session_attrs=read-write")
}

async fn execute(url: &str, statement: &str) {
    let store = Store::connect(url).await.unwrap();
    sqlx::query(statement)
        .execute(adapters::storage::pool_for_tests(&store))
        .await
        .unwrap();
    store.close().await;
}

/// Closes every other session on the database `name` (a primary demoted, a
/// restart): the server's pooled connections die under it.
async fn drop_sessions(admin_url: &str, name: &str) {
    execute(
        admin_url,
        &format!("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}' AND pid <> pg_backend_pid()"),
    )
    .await;
}

/// The database `name` refuses writes (`on`, a primary turned standby) or takes them
/// again, for every session from now on: the server's pooled sessions are closed.
async fn read_only(admin_url: &str, name: &str, on: bool) {
    let change = if on {
        "SET default_transaction_read_only = on"
    } else {
        "RESET default_transaction_read_only"
    };
    execute(admin_url, &format!("ALTER DATABASE {name} {change}")).await;
    drop_sessions(admin_url, name).await;
}

/// Sends `request` until it is answered `expected` (a 503 is sent again; anything
/// else fails), within 10 s: its body.
async fn until_answered<T, F, Fut>(expected: StatusCode, request: F) -> T
where
    T: serde::de::DeserializeOwned,
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = reqwest::Result<reqwest::Response>>,
{
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        let response = request().await.unwrap();
        match response.status() {
            status if status == expected => return crate::api::data_of(response).await,
            StatusCode::SERVICE_UNAVAILABLE => tokio::time::sleep(Duration::from_millis(100)).await,
            other => panic!("{other}: {}", response.text().await.unwrap()),
        }
    }
    panic!("never answered {expected} after the database came back");
}

/// A URL naming several hosts: the store opens on the one that is the primary (the
/// first does not answer), says so, and keeps its pool there.
#[tokio::test]
async fn a_url_naming_several_hosts_opens_on_the_primary() {
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let hosts = behind_a_dead_host(&url);
    let store = Store::connect(&hosts).await.unwrap();
    assert!(store.follows_primary());
    adapters::services::operations::migrate(&store)
        .await
        .unwrap();
    // Its pool's host is the primary: nothing moves.
    assert!(!store.keep_primary().await.unwrap());
    assert!(store.session_url(&hosts).ends_with(&format!("/{name}")));
    assert!(!store.session_url(&hosts).contains(','));
    store.close().await;

    // A server process on that URL writes and reads.
    let client = reqwest::Client::new();
    let port = free_port();
    let server = start_with(&hosts, port, &[]);
    let base = format!("http://127.0.0.1:{port}");
    wait_healthy(&client, &base).await;
    let token = user_token("alice");
    let org = create_org(&client, &base, &token, "several-hosts").await;
    assert!(!org.is_empty());
    drop(server);

    // No host is a primary: the store says so instead of opening on nothing.
    let dead = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/{name}",
        free_port(),
        free_port()
    );
    let refused = Store::connect(&dead).await.unwrap_err();
    assert!(refused.to_string().contains("no primary"), "{refused}");
    drop_postgres(&admin_url, &name).await;
}

/// The database refuses writes (a primary turned standby: 25006) and then comes
/// back: the writes in between answer 503 SERVICE_UNAVAILABLE with `Retry-After`,
/// never 500; nothing is half-written; each write sent again is applied once (a
/// pipeline by its unique name, an audit event by its `Idempotency-Key`).
#[tokio::test]
async fn a_database_that_refuses_writes_answers_503_with_retry_after() {
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let client = reqwest::Client::new();
    let port = free_port();
    let _server = start_with(&url, port, &[]);
    let base = format!("http://127.0.0.1:{port}");
    wait_healthy(&client, &base).await;
    let token = user_token("alice");
    let org = create_org(&client, &base, &token, "refused").await;
    let create = |key: &str| {
        client
            .post(format!("{base}/api/pipelines"))
            .bearer_auth(&token)
            .header("x-org-id", &org)
            .header("idempotency-key", key)
            .json(
                &json!({"project": "web", "organization": "acme", "pipelineName": "kept-once",
                          "accessModifier": "private", "props": {}}),
            )
            .send()
    };

    read_only(&admin_url, &name, true).await;
    let mut refused = 0;
    for _ in 0..3 {
        let response = create("the-key").await.unwrap();
        let status = response.status();
        let retry_after = response.headers().get("retry-after").cloned();
        let body: Value = response.json().await.unwrap();
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_eq!(code(status, &body), ErrorCode::ServiceUnavailable);
        assert_eq!(retry_after.unwrap(), "1");
        refused += 1;
    }
    assert_eq!(refused, 3);

    read_only(&admin_url, &name, false).await;
    // The first try after may meet a connection that died under the pool: 503 too.
    let created: Pipeline = until_answered(StatusCode::CREATED, || create("the-key")).await;
    assert!(!created.id.is_empty(), "{created:?}");
    // It was written once: the same write again is a conflict, and there is one.
    let again = create("the-key").await.unwrap();
    assert_eq!(again.status(), StatusCode::CONFLICT);
    let list: Value = client
        .get(format!("{base}/api/pipelines"))
        .bearer_auth(&token)
        .header("x-org-id", &org)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(pagination(&list).total, 1, "{list}");

    // An event refused while the database refused writes, sent again with its
    // `Idempotency-Key` once it is back, is recorded once.
    let mut claims = Claims::user("audit-writer", None, Utc::now(), Duration::from_secs(600));
    claims.service = Some("audit-writer".to_owned());
    let service = TokenKeys::hs256(SECRET).sign(&claims).unwrap();
    let ingest = || {
        client
            .post(format!("{base}/api/audit/events"))
            .bearer_auth(&service)
            .header("idempotency-key", "event-1")
            .json(
                &json!({"action": "plugin.upload", "actorId": "writer", "orgId": org,
                          "targetType": "plugin", "targetId": "p-1"}),
            )
            .send()
    };
    read_only(&admin_url, &name, true).await;
    assert_eq!(
        ingest().await.unwrap().status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    read_only(&admin_url, &name, false).await;
    let first: AuditEvent = until_answered(StatusCode::CREATED, ingest).await;
    let again = ingest().await.unwrap();
    assert_eq!(again.status(), StatusCode::OK);
    let again: AuditEvent = crate::api::data_of(again).await;
    assert_eq!(again.id, first.id);
    let store = Store::connect(&url).await.unwrap();
    let rows: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM audit_events WHERE actor_id = 'writer'")
            .fetch_one(adapters::storage::pool_for_tests(&store))
            .await
            .unwrap();
    assert_eq!(rows, 1);
    store.close().await;
    drop_postgres(&admin_url, &name).await;
}

/// A unit of work PostgreSQL rolls back for a deadlock (40P01, injected by a trigger
/// the first time) and then a serialization failure (40001, the second time) is run
/// again by the server: the request succeeds once, on the third run. One that keeps
/// being rolled back runs `ATTEMPTS` times, then answers 503 with `Retry-After` (not
/// 500) and leaves nothing behind.
#[tokio::test]
async fn a_unit_rolled_back_for_a_conflict_runs_again_a_bounded_number_of_times() {
    let Some(app) = TestApp::postgres().await else {
        return;
    };
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    // A sequence is not rolled back with the transaction: it counts the runs.
    app.sql("CREATE SEQUENCE runs").await;
    app.sql(
        "CREATE FUNCTION abort_twice() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
           IF nextval('runs') = 1 THEN RAISE EXCEPTION 'deadlock injected' USING ERRCODE = '40P01'; END IF; \
           IF currval('runs') = 2 THEN RAISE EXCEPTION 'conflict injected' USING ERRCODE = '40001'; END IF; \
           IF NEW.name LIKE 'doomed%' THEN RAISE EXCEPTION 'conflict injected' USING ERRCODE = '40001'; END IF; \
           RETURN NEW; END $$",
    )
    .await;
    app.sql("CREATE TRIGGER abort_twice BEFORE INSERT ON policies FOR EACH ROW EXECUTE FUNCTION abort_twice()")
        .await;
    let runs = || app.number("SELECT last_value FROM runs");
    let create = |name: &str| {
        app.by(&alice)
            .org(&org)
            .post("/api/compliance/policies")
            .json(json!({"name": name, "ruleIds": []}))
            .request()
    };
    let response = app
        .router
        .clone()
        .oneshot(create("baseline"))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    assert_eq!(runs().await, 3, "two runs rolled back, the third committed");
    let Answer(status, body) = app
        .by(&alice)
        .org(&org)
        .get("/api/compliance/policies")
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(pagination(&body).total, 1, "{body}");
    // The audit event of the unit was written once, with the policy.
    assert_eq!(app.audited("compliance.policy.create").await.len(), 1);

    let response = app.router.clone().oneshot(create("doomed")).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()["retry-after"], "1");
    let body: Value =
        serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(
        code(StatusCode::SERVICE_UNAVAILABLE, &body),
        ErrorCode::ServiceUnavailable
    );
    assert_eq!(
        runs().await,
        3 + i64::from(adapters::storage::ATTEMPTS),
        "the unit ran ATTEMPTS times, no more"
    );
    let Answer(_, body) = app
        .by(&alice)
        .org(&org)
        .get("/api/compliance/policies")
        .await;
    assert_eq!(
        pagination(&body).total,
        1,
        "nothing of the doomed unit: {body}"
    );
    assert_eq!(
        app.audited("compliance.policy.create").await.len(),
        1,
        "nothing of the doomed unit is written"
    );

    // A unit storage runs (an organization with its Roles, membership and events)
    // is run again the same way: a deadlock on its first run, then it commits once.
    app.sql("CREATE SEQUENCE org_runs").await;
    app.sql(
        "CREATE FUNCTION abort_org_once() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
           IF nextval('org_runs') = 1 THEN RAISE EXCEPTION 'deadlock injected' USING ERRCODE = '40P01'; END IF; \
           RETURN NEW; END $$",
    )
    .await;
    app.sql("CREATE TRIGGER abort_org_once BEFORE INSERT ON organizations FOR EACH ROW EXECUTE FUNCTION abort_org_once()")
        .await;
    app.by(&alice)
        .post("/api/organization")
        .json(json!({"name": "globex"}))
        .await
        .expect(StatusCode::CREATED);
    assert_eq!(app.number("SELECT last_value FROM org_runs").await, 2);
    assert_eq!(
        app.number("SELECT COUNT(*) FROM organizations WHERE name = 'globex'")
            .await,
        1
    );
    assert_eq!(
        app.number(
            "SELECT COUNT(*) FROM memberships m JOIN organizations o ON o.id = m.org_id WHERE o.name = 'globex'"
        )
        .await,
        1
    );
    app.finish().await;
}

/// `/ready` fails as soon as the process starts stopping, with `Retry-After`.
async fn ready_fails_once_draining(app: &TestApp) {
    let Answer(status, body) = app.by("").get("/ready").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    app.state.start_draining();
    let response = app
        .router
        .clone()
        .oneshot(Request::get("/ready").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()["retry-after"], "1");
    let Answer(status, body) = app.by("").get("/ready").await;
    assert_eq!(code(status, &body), ErrorCode::ServiceUnavailable);
    assert_eq!(body["message"], "the server is stopping");
    // The process is up all the same.
    app.by("").get("/health").await.expect(StatusCode::OK);
}

on_both_backends!(ready_fails_once_draining);

/// SIGTERM: the process stops within SHUTDOWN_GRACE_SECONDS even with a request
/// that never ends (a message stream), and hands back every lease it held, so that
/// another replica takes the singleton work over at once.
#[tokio::test]
async fn sigterm_stops_within_the_grace_and_hands_back_leases() {
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let client = reqwest::Client::new();
    let port = free_port();
    let mut server = start_with(&url, port, &[("SHUTDOWN_GRACE_SECONDS", "2")]);
    let base = format!("http://127.0.0.1:{port}");
    wait_healthy(&client, &base).await;
    let store = Store::connect(&url).await.unwrap();
    let leases = || async {
        sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM leases")
            .fetch_one(adapters::storage::pool_for_tests(&store))
            .await
            .unwrap()
    };
    let started = Instant::now();
    while leases().await == 0 && started.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(leases().await > 0, "the server took no lease");
    // A request in flight that never ends.
    let token = user_token("alice");
    let org = create_org(&client, &base, &token, "draining").await;
    let stream = client
        .get(format!("{base}/api/messages/stream"))
        .bearer_auth(&token)
        .header("x-org-id", &org)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);

    terminate(&server);
    let stopping = Instant::now();
    let exited = loop {
        if let Some(status) = server.try_wait().unwrap() {
            break status;
        }
        assert!(
            stopping.elapsed() < Duration::from_secs(20),
            "the server did not stop after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(exited.success(), "{exited:?}");
    // It waited for the stream up to the grace, not for ever.
    assert!(stopping.elapsed() >= Duration::from_secs(2));
    assert_eq!(leases().await, 0, "a lease was left behind");
    drop(stream);
    store.close().await;
    drop_postgres(&admin_url, &name).await;
}

/// Migrations take a lease of their own: two processes migrating one new database
/// at once both succeed (one applies, the other finds nothing left), no advisory
/// lock is involved, and a process waits while another holds the lease.
#[tokio::test]
async fn migrations_take_a_lease_of_their_own() {
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let (a, b) = (
        Store::connect(&url).await.unwrap(),
        Store::connect(&url).await.unwrap(),
    );
    let (first, second) = tokio::join!(
        adapters::services::operations::migrate(&a),
        adapters::services::operations::migrate(&b)
    );
    first.unwrap();
    second.unwrap();
    let pool = adapters::storage::pool_for_tests(&a);
    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM migration_lease")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(left, 0, "the lease is handed back after migrating");

    // Another process holds the lease for two more seconds: a third waits for it.
    let until = (chrono::Utc::now() + chrono::Duration::seconds(2))
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    sqlx::query(
        "INSERT INTO migration_lease (name, holder, expires_at) VALUES ('migrate', 'another', $1)",
    )
    .bind(until)
    .execute(pool)
    .await
    .unwrap();
    let c = Store::connect(&url).await.unwrap();
    let waiting = tokio::spawn(async move { adapters::services::operations::migrate(&c).await });
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(
        !waiting.is_finished(),
        "it migrated while another process held the lease"
    );
    waiting.await.unwrap().unwrap();
    let advisory: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory'")
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!(advisory, 0);
    a.close().await;
    b.close().await;
    drop_postgres(&admin_url, &name).await;
}

/// The organization, its rules and its pipelines, as `token` reads them.
async fn read_back(app: &TestApp, token: &str, org: &str) -> Vec<Value> {
    let mut answers = Vec::new();
    for path in [
        "/api/organization",
        "/api/compliance/rules",
        "/api/pipelines",
    ] {
        let Answer(status, body) = app.by(token).org(org).get(path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        answers.push(body);
    }
    answers
}

/// Backup and restore: `pg_dump` of the database of a running server, restored into
/// an empty database; a server on it answers the same organizations, rules and
/// inventory, and `compliance audit verify` accepts every chain exported from it,
/// with its signed checkpoint.
#[tokio::test]
async fn a_dump_of_a_running_server_restores_to_the_same_answers_and_chains() {
    let Some(app) = TestApp::postgres().await else {
        return;
    };
    let (admin_url, name) = app.cleanup.clone().expect("a PostgreSQL test database");
    let base = admin_url.rsplit_once('/').unwrap().0.to_owned();
    let source_url = format!("{base}/{name}");
    let org = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    app.by(&alice)
        .org(&org)
        .post("/api/compliance/rules")
        .json(json!({
            "name": "named", "target": "pipeline", "severity": "warning",
            "field": "pipelineName", "operator": "regex", "value": "^[a-z-]+$"}))
        .await
        .expect(StatusCode::CREATED);
    for pipeline in ["web-app", "Api_Service"] {
        app.by(&alice)
            .org(&org)
            .post("/api/pipelines")
            .json(json!({
                "project": "web", "organization": "acme", "pipelineName": pipeline,
                "accessModifier": "private", "props": {}}))
            .await
            .expect(StatusCode::CREATED);
    }
    let service = app.service_token("plugin");
    for n in 0..5 {
        let (status, body) = app
            .post_event(&service, Some(&format!("backup-{n}")), json!({"action": "plugin.upload",
                "actorId": "u", "orgId": "org-backup", "targetType": "plugin", "targetId": format!("p{n}")}))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    app.relay().await;
    let settings = test_config(&[]).checkpoints.unwrap();
    assert!(
        adapters::workers::checkpoints::round(&app.store, &settings, Utc::now())
            .await
            .unwrap()
            >= 1
    );
    let before = read_back(&app, &alice, &org).await;

    // The dump is taken while the server runs (a consistent snapshot).
    let dir = std::env::temp_dir().join(format!("compliance-backup-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let dump = dir.join("backup.dump");
    let dumped = std::process::Command::new("pg_dump")
        .args(["--format=custom", "--no-owner", "--file"])
        .arg(&dump)
        .arg(&source_url)
        .output()
        .unwrap();
    assert!(
        dumped.status.success(),
        "{}",
        String::from_utf8_lossy(&dumped.stderr)
    );
    let (restored_url, _, restored_name) = fresh_postgres().await.unwrap();
    let restored = std::process::Command::new("pg_restore")
        .args(["--no-owner", "--exit-on-error", "--dbname", &restored_url])
        .arg(&dump)
        .output()
        .unwrap();
    assert!(
        restored.status.success(),
        "{}",
        String::from_utf8_lossy(&restored.stderr)
    );

    let restored_app = TestApp::with_store(
        Store::connect(&restored_url).await.unwrap(),
        Some((admin_url.clone(), restored_name)),
    )
    .await;
    assert_eq!(read_back(&restored_app, &alice, &org).await, before);
    // Every chain exported from the restored database verifies, with its checkpoint.
    let key = settings.signer.verifier_key().to_string();
    for chain in [org.as_str(), "org-backup"] {
        let exported = std::process::Command::new(env!("CARGO_BIN_EXE_compliance"))
            .args(["audit", "export", "--checkpoint", "--org", chain])
            .env("DATABASE_URL", &restored_url)
            .output()
            .unwrap();
        assert!(
            exported.status.success(),
            "{}",
            String::from_utf8_lossy(&exported.stderr)
        );
        let file = dir.join(format!("{chain}.jsonl"));
        std::fs::write(&file, &exported.stdout).unwrap();
        let (code, out, err) = super::cli::compliance(&[
            "audit",
            "verify",
            &file.display().to_string(),
            "--key",
            &key,
        ]);
        assert_eq!(code, 0, "{chain}: {out} {err}");
        let verdict: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(verdict["ok"], true, "{verdict}");
        assert!(verdict["count"].as_u64().unwrap() >= 1, "{verdict}");
        if chain == "org-backup" {
            assert_eq!(verdict["count"], 5, "{verdict}");
            assert_eq!(verdict["checkpoints"]["checked"], 1, "{verdict}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    restored_app.finish().await;
    app.finish().await;
}

/// Behind a pooler in transaction mode (`DATABASE_URL` at the pooler,
/// `DATABASE_DIRECT_URL` at the database): every statement runs in a transaction
/// begun before it and committed before it answers, and no prepared statement
/// outlives its transaction. Here the "pooler" is the database itself (the client's
/// side is the same); `scripts/test-ha pooler` runs the API through pgbouncer.
#[tokio::test]
async fn behind_a_pooler_each_statement_is_a_committed_transaction_keeping_no_statement() {
    let Some((url, _admin_url, _name)) = fresh_postgres().await else {
        return;
    };
    let pooled = Store::connect_pooled(&url, &url).await.unwrap();
    let direct = Store::connect(&url).await.unwrap();
    assert!(pooled.pooled() && !direct.pooled());
    // Sessions of their own (LISTEN) connect to the database itself.
    assert_eq!(pooled.session_url("postgres://elsewhere/db"), url);
    adapters::services::operations::migrate(&pooled)
        .await
        .unwrap();
    use adapters::storage::statements_for_tests as statements;

    // The statement runs inside a transaction block (a savepoint needs one); without
    // a pooler a statement is its own implicit transaction.
    sqlx::query("SAVEPOINT inside")
        .execute(statements(&pooled))
        .await
        .unwrap();
    let outside = sqlx::query("SAVEPOINT inside")
        .execute(statements(&direct))
        .await
        .unwrap_err();
    assert!(
        outside.to_string().contains("transaction block"),
        "{outside}"
    );

    // A write is committed when it answers: another session sees it at once.
    sqlx::query("CREATE TABLE pooled_writes (n BIGINT)")
        .execute(statements(&pooled))
        .await
        .unwrap();
    for n in 1..=20_i64 {
        sqlx::query("INSERT INTO pooled_writes (n) VALUES ($1)")
            .bind(n)
            .execute(statements(&pooled))
            .await
            .unwrap();
        let seen: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM pooled_writes")
            .fetch_one(adapters::storage::pool_for_tests(&direct))
            .await
            .unwrap();
        assert_eq!(seen, n);
    }
    // Rows come whole; a failed statement rolls back alone and the pool goes on.
    let rows: Vec<i64> = sqlx::query_scalar("SELECT n FROM pooled_writes WHERE n <= $1 ORDER BY n")
        .bind(3_i64)
        .fetch_all(statements(&pooled))
        .await
        .unwrap();
    assert_eq!(rows, [1, 2, 3]);
    let refused = sqlx::query("INSERT INTO pooled_writes (n) VALUES ($1::text::bigint)")
        .bind("not a number")
        .execute(statements(&pooled))
        .await;
    assert!(refused.is_err());
    // No prepared statement outlives its transaction: each begins by dropping those
    // an earlier client left on the server's connection, so only this one is there
    // (without a pooler sqlx keeps each statement it prepared, on its connection: the
    // direct side uses one, so that the count below reads the connection that
    // prepared them).
    let mut one = adapters::storage::pool_for_tests(&direct)
        .acquire()
        .await
        .unwrap();
    for distinct in 0..10 {
        sqlx::query(&format!("SELECT {distinct} AS n"))
            .execute(statements(&pooled))
            .await
            .unwrap();
        sqlx::query(&format!("SELECT {distinct} AS n"))
            .execute(&mut *one)
            .await
            .unwrap();
    }
    let kept: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM pg_prepared_statements")
        .fetch_one(statements(&pooled))
        .await
        .unwrap();
    assert_eq!(kept, 1);
    let kept: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM pg_prepared_statements")
        .fetch_one(&mut *one)
        .await
        .unwrap();
    assert!(kept > 1, "{kept}");
    drop(one);
    // The store's own reads and units of work run the same way.
    pooled.ping().await.unwrap();
    pooled.close().await;
    direct.close().await;
}
