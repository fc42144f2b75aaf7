//! Load: a scan of a large inventory, and the re-evaluation queue's throughput, on the
//! real `compliance serve` process (release build) over a real database.
//!
//! Seeds N pipelines straight into the database (every other one public), adds 100
//! rules through the API (50 that fail on every pipeline: warnings; 50 that pass:
//! errors that never trigger; one error rule that blocks the public half), starts a
//! scan through the API and waits for it; reports the seconds, entities per second
//! and the server's peak resident memory (VmHWM). Then one re-evaluation event per
//! pipeline of a second organization of M pipelines (as mutations write them) and the
//! events per second the worker drains. Both rates are also given as ratios to the
//! same server's bare `GET /health` (4,000 requests, 32 in flight, the median of three
//! rounds), measured right before each.
//!
//! ```sh
//! cargo build --release -p adapters
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/load \
//!   cargo run --release -p adapters --example load_scan -- 100000 5000
//! ```
//!
//! The database is migrated; use a scratch one (PostgreSQL: the seeding uses
//! `generate_series`). The server binary is `target/release/compliance` unless
//! `COMPLIANCE_BIN` names another.

// `Value["key"]` answers `Null` for a missing key; it never panics.
#![allow(clippy::indexing_slicing)]

mod support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use adapters::auth::{Claims, TokenKeys};
use adapters::storage::Store;
use chrono::Utc;
use serde_json::{json, Value};

const SECRET: &str = "load-secret-0123456789abcdef";

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

/// The process's peak resident memory, in MiB (Linux).
fn peak_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Where PostgreSQL's write-ahead log stands, in bytes (`None` elsewhere).
async fn wal_position(store: &Store) -> Option<f64> {
    sqlx::query_scalar::<_, i64>(
        "SELECT CAST(pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0') AS BIGINT)",
    )
    .fetch_one(adapters::storage::pool_for_tests(store))
    .await
    .ok()
    .map(|n| n as f64)
}

async fn seed(store: &Store, org: &str, n: u64) -> Result<(), String> {
    sqlx::query(&format!(
        "INSERT INTO pipelines (id, org_id, project, organization, pipeline_name, access_modifier, \
         props, compliance, compliance_result, created_by, created_at, updated_at) \
         SELECT '{org}-' || lpad(i::text, 7, '0'), '{org}', 'web', 'acme', 'pipeline' || i, \
         CASE WHEN i % 2 = 0 THEN 'public' ELSE 'private' END, \
         '{{\"synth\":{{\"plugin\":{{\"name\":\"build\",\"version\":\"1.0.0\"}}}},\"stages\":[{{\"name\":\"test\",\"steps\":[{{\"plugin\":{{\"name\":\"jest\",\"version\":\"29.0.0\"}}}}]}}]}}', \
         '{{\"result\":\"pass\",\"violations\":[]}}', 'pass', 'load', \
         '2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:00.000000Z' \
         FROM generate_series(1, {n}) AS i"
    ))
    .execute(adapters::storage::pool_for_tests(store))
    .await
    .map_err(|e| e.to_string())?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let total: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let queued: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(5_000);
    let url = std::env::var("DATABASE_URL").map_err(|_| "set DATABASE_URL".to_owned())?;
    let bin =
        std::env::var("COMPLIANCE_BIN").unwrap_or_else(|_| "target/release/compliance".to_owned());
    let store = Store::connect(&url).await.map_err(|e| e.to_string())?;
    adapters::services::operations::migrate(&store)
        .await
        .map_err(|e| e.to_string())?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let server = Server(
        Command::new(&bin)
            .arg("serve")
            .env("DATABASE_URL", &url)
            .env("JWT_SECRET", SECRET)
            .env("COMPLIANCE_SERVICE_PORT", port.to_string())
            .env("COMPLIANCE_SCAN_POLL_MS", "100")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {bin}: {e}"))?,
    );
    let pid = server.0.id();
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    for _ in 0..200 {
        if http.get(format!("{base}/health")).send().await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The yardstick, measured right before each part (the median of three rounds:
    // on a shared machine `/health` moves by half within minutes).
    let yardstick = || async {
        let (median, rates) = support::load::health_median(&base, 4000, 32).await?;
        let rounds: Vec<String> = rates.iter().map(|r| format!("{r:.0}")).collect();
        println!(
            "GET /health: {median:.0}/s (median of {})",
            rounds.join(", ")
        );
        Ok::<f64, String>(median)
    };
    let ratio = |rate: f64, health: f64| rate / health.max(f64::MIN_POSITIVE);
    let token = TokenKeys::hs256(SECRET)
        .sign(&Claims::user(
            "load",
            Some("load@example.com"),
            Utc::now(),
            Duration::from_secs(7200),
        ))
        .map_err(|e| e.to_string())?;
    let call = |method: reqwest::Method, path: String, org: Option<String>, body: Option<Value>| {
        let mut request = http
            .request(method, format!("{base}{path}"))
            .bearer_auth(&token);
        if let Some(org) = org {
            request = request.header("x-org-id", org);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        async move {
            let response = request.send().await.map_err(|e| e.to_string())?;
            let status = response.status();
            let body: Value = response.json().await.map_err(|e| e.to_string())?;
            if !status.is_success() {
                return Err(format!("{status}: {body}"));
            }
            Ok::<Value, String>(body)
        }
    };
    let org_of = |body: Value| body["data"]["id"].as_str().unwrap_or_default().to_owned();
    let scanned_org = org_of(
        call(
            reqwest::Method::POST,
            "/api/organization".into(),
            None,
            Some(json!({"name": format!("scan-{}", Utc::now().timestamp())})),
        )
        .await?,
    );
    let queued_org = org_of(
        call(
            reqwest::Method::POST,
            "/api/organization".into(),
            None,
            Some(json!({"name": format!("queue-{}", Utc::now().timestamp())})),
        )
        .await?,
    );
    let seeding = Instant::now();
    seed(&store, &scanned_org, total).await?;
    seed(&store, &queued_org, queued).await?;
    println!(
        "seeded {total} + {queued} pipelines in {:.1} s",
        seeding.elapsed().as_secs_f64()
    );

    for i in 0..50 {
        // Fails on every pipeline (a warning: reported, never blocks).
        call(
            reqwest::Method::POST,
            "/api/compliance/rules".into(),
            Some(scanned_org.clone()),
            Some(json!({
            "name": format!("fails-{i}"), "target": "pipeline", "severity": "warning",
            "field": "pipelineName", "operator": "regex", "value": format!("^team-{i}-[a-z]+$")})),
        )
        .await?;
        // Passes on every pipeline.
        call(
            reqwest::Method::POST,
            "/api/compliance/rules".into(),
            Some(scanned_org.clone()),
            Some(json!({
            "name": format!("passes-{i}"), "target": "pipeline", "severity": "error",
            "field": "props.stages", "operator": "countLt", "value": 100 + i})),
        )
        .await?;
    }
    call(
        reqwest::Method::POST,
        "/api/compliance/rules".into(),
        Some(scanned_org.clone()),
        Some(json!({
        "name": "private-only", "target": "pipeline", "severity": "error",
        "field": "accessModifier", "operator": "eq", "value": "private"})),
    )
    .await?;
    // The queued organization's rule, made now: the scan its creation starts is
    // cancelled below with the others, so that the queue is measured alone.
    call(
        reqwest::Method::POST,
        "/api/compliance/rules".into(),
        Some(queued_org.clone()),
        Some(json!({
        "name": "named", "target": "pipeline", "severity": "warning",
        "field": "pipelineName", "operator": "regex", "value": "^[a-z]+-[a-z]+$"})),
    )
    .await?;
    // The rules' own re-evaluation (a scan per change, each superseding the last) is
    // not what is measured here.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for statement in [
        "DELETE FROM reevaluation_queue",
        "UPDATE scans SET status = 'cancelled' WHERE status = 'running'",
    ] {
        sqlx::query(statement)
            .execute(adapters::storage::pool_for_tests(&store))
            .await
            .map_err(|e| e.to_string())?;
    }
    let before = peak_mib(pid).unwrap_or(0.0);

    // The copies the seeding wrote the way entities held them before judgements were
    // stored once (issue 59), moved as the server's mover moves them: its rate.
    if std::env::var("MOVE_COPIES").is_ok_and(|v| v == "1") {
        let moving = Instant::now();
        for target in ["pipeline"] {
            let mut after = String::new();
            let batch = adapters::workers::judgements::BATCH;
            while let Some(last) =
                adapters::workers::judgements::move_copies(&store, target, &after, batch)
                    .await
                    .map_err(|e| e.to_string())?
            {
                after = last;
            }
        }
        let seconds = moving.elapsed().as_secs_f64();
        println!(
            "moved {} entities' compliance copies into judgements in {seconds:.1} s, {:.0} entities/s",
            total + queued,
            (total + queued) as f64 / seconds
        );
    }

    // A scan, then the same scan again over the unchanged inventory (judgements
    // written, entity rows left alone), each with the WAL it wrote per entity.
    let scan_once = async |what: &str| -> Result<(), String> {
        let health = yardstick().await?;
        let wal_before = wal_position(&store).await;
        let started = Instant::now();
        let scan = call(
            reqwest::Method::POST,
            "/api/compliance/scans".into(),
            Some(scanned_org.clone()),
            Some(json!({"target": "pipeline"})),
        )
        .await?;
        let id = scan["data"]["id"].as_str().unwrap_or_default().to_owned();
        let done = loop {
            let got = call(
                reqwest::Method::GET,
                format!("/api/compliance/scans/{id}"),
                Some(scanned_org.clone()),
                None,
            )
            .await?;
            if got["data"]["status"] != "running" {
                break got;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let seconds = started.elapsed().as_secs_f64();
        let counts = &done["data"]["counts"];
        let scanned = counts["scanned"].as_f64().unwrap_or(0.0);
        let rate = scanned / seconds;
        let wal = match (wal_before, wal_position(&store).await) {
            (Some(a), Some(b)) => {
                format!(", WAL {:.0} bytes per entity", (b - a) / scanned.max(1.0))
            }
            _ => String::new(),
        };
        println!(
            "{what} of {total} pipelines against 101 rules: {} in {seconds:.1} s, {rate:.0} entities/s, ratio to /health {:.3}{wal}; counts {counts}",
            done["data"]["status"],
            ratio(rate, health),
        );
        Ok(())
    };
    scan_once("scan").await?;
    if std::env::var("RESCAN").is_ok_and(|v| v == "1") {
        scan_once("re-scan").await?;
    }
    println!(
        "server peak RSS: {:.1} MiB before the scan, {:.1} MiB after",
        before,
        peak_mib(pid).unwrap_or(0.0)
    );
    let results: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM scan_results")
        .fetch_one(adapters::storage::pool_for_tests(&store))
        .await
        .map_err(|e| e.to_string())?;
    println!("results stored: {results}");

    // The queue: one event per pipeline of the second organization, as mutations
    // write them (a rule change is one event per organization: a scan, measured above).
    let health = yardstick().await?;
    sqlx::query(&format!(
        "INSERT INTO reevaluation_queue (org_id, target, entity_id, reason, created_at) \
         SELECT org_id, 'pipeline', id, 'pipeline.update', '2026-01-01T00:00:00.000000Z' FROM pipelines WHERE org_id = '{queued_org}'"
    ))
    .execute(adapters::storage::pool_for_tests(&store))
    .await
    .map_err(|e| e.to_string())?;
    let draining = Instant::now();
    loop {
        let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM reevaluation_queue")
            .fetch_one(adapters::storage::pool_for_tests(&store))
            .await
            .map_err(|e| e.to_string())?;
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let seconds = draining.elapsed().as_secs_f64();
    let rate = queued as f64 / seconds;
    println!(
        "re-evaluation queue: {queued} events drained in {seconds:.1} s, {rate:.0} events/s (one replica), ratio to /health {:.3}",
        ratio(rate, health)
    );
    drop(server);
    Ok(())
}
