//! Audit ingest under load, as ratios to the same server's bare `GET /health`
//! measured first in the same run, against the server on loopback over a real
//! database: events of one service into one chain, then spread over 50 chains (each
//! with its own `Idempotency-Key`, so every one is appended).
//!
//! ```sh
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/load \
//!   cargo run --release -p adapters --example load_audit -- 4000 32
//! ```
//!
//! Arguments: how many events of each kind (4000), how many in flight (32). The
//! database is migrated; use a scratch one.

mod support;

use std::sync::Arc;

use serde_json::json;
use support::load::{measure, serve, status};

#[tokio::main]
async fn main() -> Result<(), String> {
    let (total, in_flight) = support::load::args();
    let server = serve(&[]).await?;
    let base = server.base.clone();
    let service = server.service_token("load")?;
    let run = adapters::new_id();
    let shared = Arc::new((reqwest::Client::new(), base, service, run));
    let health = server.health(total, in_flight).await?;
    let append = |chains: usize| {
        let shared = shared.clone();
        move |i: usize| {
            let shared = shared.clone();
            async move {
                let (http, base, service, run) = &*shared;
                let org = format!("org-{run}-{}", i % chains);
                let request = http
                    .post(format!("{base}/api/audit/events"))
                    .bearer_auth(service)
                    .header("idempotency-key", format!("{run}-{chains}-{i}"))
                    .json(
                        &json!({"action": "plugin.upload", "actorId": "user-1", "orgId": org,
                                  "targetType": "plugin", "targetId": format!("plugin-{i}"),
                                  "details": {"version": "1.0.0", "n": i}}),
                    );
                status(request.send().await)
            }
        }
    };
    let one = measure(total, in_flight, append(1)).await?.all(201)?;
    let fifty = measure(total, in_flight, append(50)).await?.all(201)?;
    println!("GET /health: {}", health.line(None));
    println!("audit ingest into one chain: {}", one.line(Some(&health)));
    println!("audit ingest over 50 chains: {}", fifty.line(Some(&health)));
    server.stop().await;
    Ok(())
}
