//! Load: reporting, against the server on loopback over a real database. First the
//! ingest: execution events (five per execution: the pipeline and one stage started
//! and succeeded, one action) posted by a service in batches of 500, several
//! batches in flight, each stored once and its executions derived. Then each
//! execution report over `EXECUTIONS` stored executions of one organization spread
//! over 90 days (two stages each; seeded by SQL), asked for the whole 90 days: the
//! median of five runs.
//!
//! ```sh
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/load \
//!   cargo run --release -p adapters --example load_reports -- 50000 4 1000000
//! ```
//!
//! Arguments: events to ingest (50000), batches in flight (4), executions to seed
//! (1000000). The database is migrated; use a scratch one.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{SecondsFormat, Utc};
use serde_json::{json, Value};
use support::load::{measure, serve, status};

const ARN: &str = "arn:aws:codepipeline:us-east-1:123456789012:load";

fn event(
    id: usize,
    execution: usize,
    (kind, stage, state): (&str, Option<&str>, &str),
    at: chrono::DateTime<Utc>,
) -> Value {
    let mut detail = serde_json::Map::new();
    detail.insert("pipeline".into(), json!("load"));
    detail.insert("execution-id".into(), json!(format!("x{execution}")));
    detail.insert("state".into(), json!(state));
    detail.insert("version".into(), json!(1));
    if let Some(stage) = stage {
        detail.insert("stage".into(), json!(stage));
    }
    if kind == "Action" {
        detail.insert("action".into(), json!("Compile"));
        detail.insert("type".into(), json!({"category": "Build"}));
    }
    json!({
        "id": format!("load-{id}"),
        "detail-type": format!("CodePipeline {kind} Execution State Change"),
        "source": "aws.codepipeline",
        "time": at.to_rfc3339_opts(SecondsFormat::Secs, true),
        "resources": [ARN],
        "detail": detail,
    })
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let events: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(50_000);
    let in_flight: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(4);
    let seeded: i64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let server = serve(&[]).await?;
    let base = server.base.clone();
    let user = server.user_token("load")?;
    let service = server.service_token("eventbridge")?;
    let name = format!("load-{}", &adapters::new_id()[..8]);
    let org = server
        .organization(&user, json!({ "name": name }), None)
        .await?;
    let pool = adapters::storage::pool_for_tests(&server.state.infra.store);
    let now = Utc::now();
    let stamp = |t: chrono::DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Micros, true);
    let postgres = server.state.infra.store.dialect() == adapters::storage::Dialect::Postgres;
    let sql = |text: &str| {
        if postgres {
            text.to_owned()
        } else {
            text.replace('$', "?")
        }
    };
    sqlx::query(&sql(
        "INSERT INTO pipeline_registry (org_id, arn, pipeline_id, created_at, updated_at) VALUES ($1, $2, 'p-load', $3, $3)",
    ))
    .bind(&org)
    .bind(ARN)
    .bind(stamp(now))
    .execute(pool)
    .await
    .map_err(|e| e.to_string())?;

    // The ingest.
    let executions = events.div_ceil(5);
    let mut all = Vec::with_capacity(executions * 5);
    for x in 0..executions {
        let at = now - chrono::Duration::minutes(i64::try_from(x).unwrap_or(0) % 100_000);
        let later = at + chrono::Duration::seconds(90);
        all.push(event(x * 5, x, ("Pipeline", None, "STARTED"), at));
        all.push(event(x * 5 + 1, x, ("Stage", Some("Build"), "STARTED"), at));
        all.push(event(
            x * 5 + 2,
            x,
            ("Action", Some("Build"), "SUCCEEDED"),
            later,
        ));
        all.push(event(
            x * 5 + 3,
            x,
            ("Stage", Some("Build"), "SUCCEEDED"),
            later,
        ));
        all.push(event(x * 5 + 4, x, ("Pipeline", None, "SUCCEEDED"), later));
    }
    let batches: Arc<Vec<Value>> = Arc::new(all.chunks(500).map(|c| json!(c)).collect());
    let http = reqwest::Client::new();
    let shared = Arc::new((http.clone(), base.clone(), service.clone(), batches.clone()));
    let started = Instant::now();
    let figures = measure(batches.len(), in_flight, move |i| {
        let shared = shared.clone();
        async move {
            let (http, base, service, batches) = &*shared;
            let Some(batch) = batches.get(i) else {
                return 0;
            };
            status(
                http.post(format!("{base}/api/reports/events"))
                    .bearer_auth(service)
                    .json(batch)
                    .send()
                    .await,
            )
        }
    })
    .await?
    .all(200)?;
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "ingest: {} events ({} executions) in {:.1} s: {:.0} events/s (batches of 500, {in_flight} in flight; median batch {:.0} ms)",
        all.len(),
        executions,
        seconds,
        all.len() as f64 / seconds,
        figures.median_ms
    );

    // The reports over `seeded` executions of one organization over 90 days.
    let seed_started = Instant::now();
    support::load::seed_executions(&server.state.infra.store, &org, seeded).await?;
    println!(
        "seeded {seeded} executions in {:.1} s",
        seed_started.elapsed().as_secs_f64()
    );
    let from = stamp(now - chrono::Duration::days(90));
    let to = stamp(now + chrono::Duration::seconds(1));
    for report in [
        "count",
        "success-rate",
        "duration",
        "stage-failures",
        "stage-bottlenecks",
        "errors",
    ] {
        let mut times = Vec::new();
        for _ in 0..5 {
            let at = Instant::now();
            let answer: Value = http
                .get(format!("{base}/api/reports/execution/{report}"))
                .query(&[("from", from.as_str()), ("to", to.as_str())])
                .bearer_auth(&user)
                .header("x-org-id", &org)
                .send()
                .await
                .map_err(|e| e.to_string())?
                .json()
                .await
                .map_err(|e| e.to_string())?;
            if answer.get("success") != Some(&json!(true)) {
                return Err(format!("{report}: {answer}"));
            }
            times.push(at.elapsed());
        }
        times.sort();
        let median = times.get(2).copied().unwrap_or(Duration::ZERO);
        println!(
            "report {report} over {seeded} executions: median {:.0} ms",
            median.as_secs_f64() * 1000.0
        );
    }
    server.stop().await;
    Ok(())
}
