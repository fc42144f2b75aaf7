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

mod support;

use std::sync::Arc;

use serde_json::{json, Value};
use support::load::{measure, serve};

#[tokio::main]
async fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let total: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let in_flight: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(32);
    let server = serve(&[("QUOTA_TIER_DEVELOPER_PIPELINES", "-1")]).await?;
    let base = server.base.clone();
    let token = server.user_token("load")?;
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
    let name: String = format!("load-{}", adapters::new_id())
        .chars()
        .take(30)
        .collect();
    let org = server
        .organization(&token, json!({ "name": name }), None)
        .await?;
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

    let shared = Arc::new((http, base, token, org));
    let figures = measure(total, in_flight, move |i| {
        let shared = shared.clone();
        async move {
            let (http, base, token, org) = &*shared;
            let body = json!({"project": "load", "organization": "load", "pipelineName": format!("p-{i}"),
                "accessModifier": "private", "props": {"stages": [{"stageName": "build", "steps": [
                    {"name": "lint", "plugin": {"name": "eslint", "version": "8.1.0"}}]}]}});
            http.post(format!("{base}/api/pipelines"))
                .bearer_auth(token)
                .header("x-org-id", org)
                .json(&body)
                .send()
                .await
                .map(|r| r.status().as_u16())
                .unwrap_or(0)
        }
    })
    .await?
    .all(201)?;
    println!(
        "{total} pipeline creates, {in_flight} in flight, 100 active rules (50 failing as warnings): {:.0} creates/s; latency median {:.1} ms, p99 {:.1} ms",
        figures.rate, figures.median_ms, figures.p99_ms
    );
    server.stop().await;
    Ok(())
}
