//! Load: pipeline creates per second through the whole door (the guard, the
//! compliance check of 100 active rules, the quota charge, the insert with its
//! re-evaluation and audit events), against the server on loopback over a real
//! database. Half the rules fail on every pipeline (warnings, so the creates are
//! stored with their violations), half pass (errors that never block).
//!
//! ```sh
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/load \
//!   cargo run --release -p adapters --example load_pipelines -- 2000 32
//! ```
//!
//! Arguments: how many creates (2000), how many in flight (32). The database is
//! migrated; use a scratch one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use adapters::auth::{Claims, TokenKeys};
use adapters::config::Config;
use adapters::http::{router, AppState};
use adapters::storage::Store;
use chrono::Utc;
use serde_json::{json, Value};

const SECRET: &str = "load-secret-0123456789abcdef";

#[tokio::main]
async fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let total: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let in_flight: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(32);
    let url = std::env::var("DATABASE_URL").map_err(|_| "set DATABASE_URL".to_owned())?;
    let config = Config::from_vars(vec![
        ("JWT_SECRET".to_owned(), SECRET.to_owned()),
        ("QUOTA_TIER_DEVELOPER_PIPELINES".to_owned(), "-1".to_owned()),
        ("DATABASE_URL".to_owned(), url.clone()),
    ])
    .map_err(|e| format!("{e:?}"))?;
    let store = Store::connect(&url).await.map_err(|e| e.to_string())?;
    store.migrate().await.map_err(|e| e.to_string())?;
    let state = AppState::new(
        config,
        store.clone(),
        Arc::new(adapters::audit::AuditCounters::default()),
    );
    let mut workers = adapters::workers::Workers::new();
    {
        let store = store.clone();
        workers.spawn("audit-relay", move |shutdown| {
            adapters::workers::relay::run(store, "load".to_owned(), shutdown)
        });
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let base = format!(
        "http://{}",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, router(state)).await;
    });

    let token = TokenKeys::hs256(SECRET)
        .sign(&Claims::user(
            "load",
            Some("load@example.com"),
            Utc::now(),
            Duration::from_secs(3600),
        ))
        .map_err(|e| e.to_string())?;
    let http = reqwest::Client::new();
    let post = |path: &str, org: Option<&str>, body: Value| {
        let mut request = http
            .post(format!("{base}{path}"))
            .bearer_auth(&token)
            .json(&body);
        if let Some(org) = org {
            request = request.header("x-org-id", org);
        }
        request.send()
    };
    let name = format!("load-{}", adapters::new_id());
    let org: Value = post(
        "/api/organization",
        None,
        json!({"name": name.chars().take(30).collect::<String>()}),
    )
    .await
    .map_err(|e| e.to_string())?
    .json()
    .await
    .map_err(|e| e.to_string())?;
    let org = org
        .pointer("/data/id")
        .and_then(Value::as_str)
        .ok_or("no organization")?
        .to_owned();
    for i in 0..100 {
        let rule = if i % 2 == 0 {
            json!({"name": format!("warn-{i}"), "target": "pipeline", "severity": "warning",
                   "field": "pipelineName", "operator": "regex", "value": format!("^never-{i}$")})
        } else {
            json!({"name": format!("pass-{i}"), "target": "pipeline", "severity": "error",
                   "field": "accessModifier", "operator": "in", "value": ["public", "private"]})
        };
        let status = post("/api/compliance/rules", Some(&org), rule)
            .await
            .map_err(|e| e.to_string())?
            .status();
        if status != 201 {
            return Err(format!("rule {i}: {status}"));
        }
    }

    let started = Instant::now();
    let mut latencies = Vec::with_capacity(total);
    let mut next = 0usize;
    let mut running = tokio::task::JoinSet::new();
    let (http, token, base, org) = (
        Arc::new(http.clone()),
        Arc::new(token.clone()),
        Arc::new(base),
        Arc::new(org),
    );
    while next < total || !running.is_empty() {
        while next < total && running.len() < in_flight {
            let (http, token, base, org) = (http.clone(), token.clone(), base.clone(), org.clone());
            let i = next;
            running.spawn(async move {
                let body = json!({"project": "load", "organization": "load", "pipelineName": format!("p-{i}"),
                    "accessModifier": "private", "props": {"stages": [{"stageName": "build", "steps": [
                        {"name": "lint", "plugin": {"name": "eslint", "version": "8.1.0"}}]}]}});
                let at = Instant::now();
                let status = http
                    .post(format!("{base}/api/pipelines"))
                    .bearer_auth(token.as_str())
                    .header("x-org-id", org.as_str())
                    .json(&body)
                    .send()
                    .await
                    .map(|r| r.status().as_u16())
                    .unwrap_or(0);
                (status, at.elapsed())
            });
            next += 1;
        }
        if let Some(done) = running.join_next().await {
            let (status, elapsed) = done.map_err(|e| e.to_string())?;
            if status != 201 {
                return Err(format!("a create answered {status}"));
            }
            latencies.push(elapsed);
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    latencies.sort();
    let at = |q: f64| {
        latencies
            .get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    println!(
        "{total} pipeline creates, {in_flight} in flight, 100 active rules (50 failing as warnings): {:.0} creates/s; latency median {:.1} ms, p99 {:.1} ms",
        total as f64 / seconds,
        at(0.5).as_secs_f64() * 1000.0,
        at(0.99).as_secs_f64() * 1000.0
    );
    workers.drain(Duration::from_secs(10)).await;
    Ok(())
}
