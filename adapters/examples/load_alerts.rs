//! Load: the alert evaluation. `RULES` rules (the ten metrics in turn, over 20
//! pipelines, windows of an hour, a day and a week) in one organization whose
//! `EXECUTIONS` executions (two stages each; one in ten failed in Build) are seeded
//! by SQL over 90 days; then three evaluation cycles (each rule due once a cycle,
//! the clock moved by the interval between them) timed, the median cycle reported,
//! beside the yardstick measured in the same run: the same number of sequential
//! `GET /health` requests.
//!
//! ```sh
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/load \
//!   cargo run --release -p adapters --example load_alerts -- 1000 100000
//! ```
//!
//! Arguments: rules (1000), executions to seed (100000). The database is
//! migrated; use a scratch one.

// A measurement program: its own tables and JSON, indexed by their own lengths.
#![allow(clippy::indexing_slicing)]

mod support;

use std::time::Instant;

use chrono::{SecondsFormat, Utc};
use serde_json::json;
use support::load::{health, serve};

const METRICS: [&str; 10] = [
    "failure_rate",
    "success_rate",
    "run_count",
    "failure_count",
    "p95_duration_ms",
    "consecutive_failures",
    "stage_failure_count",
    "error_category_count",
    "plugin_build_failure_rate",
    "blocked_entities",
];

#[tokio::main]
async fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let rules: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let seeded: i64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let server = serve(&[]).await?;
    let user = server.user_token("load")?;
    let name = format!("alerts-{}", &adapters::new_id()[..8]);
    let org = server
        .organization(&user, json!({ "name": name }), None)
        .await?;
    let postgres = server.state.infra.store.dialect() == adapters::storage::Dialect::Postgres;
    support::load::seed_executions(&server.state.infra.store, &org, seeded).await?;
    let windows = ["1h", "1d", "7d"];
    for i in 0..rules {
        let metric = METRICS[i % METRICS.len()];
        let mut params = json!({});
        match metric {
            "plugin_build_failure_rate" | "blocked_entities" => {}
            _ => params["pipelineId"] = json!(format!("p{}", i % 20)),
        }
        if metric == "stage_failure_count" {
            params["stage"] = json!("Build");
        }
        if metric == "error_category_count" {
            params["errorCategory"] = json!("build");
        }
        let threshold = if metric.ends_with("rate") { 0.5 } else { 5.0 };
        support::call(
            &server.base,
            reqwest::Method::POST,
            "/api/alerts/rules",
            &user,
            Some(&org),
            json!({"name": format!("rule {i}"), "metric": metric, "params": params,
                       "comparison": "gt", "threshold": threshold, "window": windows[i % 3]}),
        )
        .await?;
    }
    let mut cycles = Vec::new();
    let mut at = Utc::now();
    for _ in 0..3 {
        at += chrono::Duration::seconds(61);
        let started = Instant::now();
        let round = adapters::services::alerts::evaluate_due(
            &server.state.infra.store,
            &server.state.config,
            &server.state.infra.reporting,
            at,
        )
        .await
        .map_err(|e| e.to_string())?;
        let seconds = started.elapsed().as_secs_f64();
        if round.evaluated != rules {
            return Err(format!("{} of {rules} rules evaluated", round.evaluated));
        }
        cycles.push(seconds);
    }
    cycles.sort_by(f64::total_cmp);
    let median = cycles[1];
    let started = Instant::now();
    health(&server.base, rules, 1).await?;
    let yardstick = started.elapsed().as_secs_f64();
    println!(
        "alert evaluation ({}): {rules} rules over {seeded} executions: a cycle takes {median:.2} s (median of 3: {:.2}, {:.2}, {:.2}), {:.2} ms a rule; {rules} sequential GET /health take {yardstick:.2} s: the cycle is {:.1} times that ({})",
        if postgres { "PostgreSQL" } else { "SQLite" },
        cycles[0],
        cycles[1],
        cycles[2],
        median * 1000.0 / rules as f64,
        median / yardstick,
        Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true),
    );
    server.stop().await;
    Ok(())
}
