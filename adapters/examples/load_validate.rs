//! Load, as ratios to the same server's bare `GET /health` measured first in the same
//! run, against the server on loopback over a real database: `GET /api/organization`
//! with a user's token (an authenticated read of one organization: the gate and the
//! account's apiCalls count), and live validations (a service token, the check of 100
//! active rules of which 30 fail with their severities so that every check blocks and
//! notifies, the check log's row, the entity's snapshot and the notification), with
//! the same check as a dry run beside them (what recording costs).
//!
//! ```sh
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/load \
//!   cargo run --release -p adapters --example load_validate -- 4000 32
//! ```
//!
//! Arguments: how many requests of each kind (4000), how many in flight (32). The
//! database is migrated; use a scratch one.

mod support;

use std::sync::Arc;

use serde_json::json;
use support::load::{measure, serve, status};

#[tokio::main]
async fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let total: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(4000);
    let in_flight: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(32);
    let server = serve(&[]).await?;
    let base = server.base.clone();
    let user = server.user_token("load")?;
    let service = server.service_token("load")?;
    let http = reqwest::Client::new();
    let name = format!("load-{}", &adapters::new_id()[..8]);
    let org = server
        .organization(&user, json!({ "name": name }), None)
        .await?;
    // 100 rules over the plugin's attributes: 30 fail (10 of them with a blocking
    // severity), 70 pass.
    for i in 0..100 {
        let (severity, value) = match i % 10 {
            0 => ("error", "^never$"),
            1 | 2 => ("warning", "^never$"),
            _ => ("error", "^eslint$"),
        };
        let rule = json!({"name": format!("rule-{i}"), "target": "plugin", "severity": severity,
                          "field": "name", "operator": "regex", "value": value});
        let status = http
            .post(format!("{base}/api/compliance/rules"))
            .bearer_auth(&user)
            .header("x-org-id", &org)
            .json(&rule)
            .send()
            .await
            .map_err(|e| e.to_string())?
            .status();
        if status != 201 {
            return Err(format!("rule {i}: {status}"));
        }
    }

    let shared = Arc::new((http, base, org, user, service));
    let health = server.health(total, in_flight).await?;
    let read = {
        let shared = shared.clone();
        measure(total, in_flight, move |_| {
            let shared = shared.clone();
            async move {
                let (http, base, org, user, _) = &*shared;
                let request = http
                    .get(format!("{base}/api/organization"))
                    .bearer_auth(user)
                    .header("x-org-id", org);
                status(request.send().await)
            }
        })
        .await?
        .all(200)?
    };
    let check = |path: &'static str| {
        let shared = shared.clone();
        move |i: usize| {
            let shared = shared.clone();
            async move {
                let (http, base, org, _, service) = &*shared;
                let body = json!({"attributes": {"name": "eslint", "version": "8.1.0"},
                                  "entityId": format!("plugin-{}", i % 500)});
                let request = http
                    .post(format!("{base}{path}"))
                    .bearer_auth(service)
                    .header("x-org-id", org)
                    .json(&body);
                status(request.send().await)
            }
        }
    };
    let dry_run = measure(
        total,
        in_flight,
        check("/api/compliance/validate/plugin/dry-run"),
    )
    .await?
    .all(200)?;
    let validate = measure(total, in_flight, check("/api/compliance/validate/plugin"))
        .await?
        .all(200)?;
    println!("GET /health: {}", health.line(None));
    println!(
        "GET /api/organization, a user's token: {}",
        read.line(Some(&health))
    );
    println!(
        "the same check as a dry run (nothing recorded): {}",
        dry_run.line(Some(&health))
    );
    println!(
        "live validation, 100 rules, 30 failing (blocked, notified): {}",
        validate.line(Some(&health))
    );
    server.stop().await;
    Ok(())
}
