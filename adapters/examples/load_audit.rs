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
use support::load::{measure, paired, serve, status};

#[tokio::main]
async fn main() -> Result<(), String> {
    let (total, in_flight) = support::load::args();
    let server = serve(&[]).await?;
    let base = server.base.clone();
    let service = server.service_token("load")?;
    let run = adapters::new_id();
    let shared = Arc::new((reqwest::Client::new(), base, service, run));
    // Each round appends new events (its own idempotency keys).
    let rounds = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let append = |chains: usize| {
        let (shared, rounds) = (shared.clone(), rounds.clone());
        move || {
            let shared = shared.clone();
            let round = rounds.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            async move {
                measure(total, in_flight, move |i: usize| {
                    let shared = shared.clone();
                    async move {
                        let (http, base, service, run) = &*shared;
                        let org = format!("org-{run}-{}", i % chains);
                        let request = http
                            .post(format!("{base}/api/audit/events"))
                            .bearer_auth(service)
                            .header("idempotency-key", format!("{run}-{chains}-{round}-{i}"))
                            .json(&json!({"action": "plugin.upload", "actorId": "user-1",
                                          "orgId": org, "targetType": "plugin",
                                          "targetId": format!("plugin-{i}"),
                                          "details": {"version": "1.0.0", "n": i}}));
                        status(request.send().await)
                    }
                })
                .await?
                .all(201)
            }
        }
    };
    let sizes = (total, in_flight);
    let one = paired(&server.base, sizes, append(1)).await?;
    let fifty = paired(&server.base, sizes, append(50)).await?;
    println!("audit ingest into one chain: {}", one.line());
    println!("audit ingest over 50 chains: {}", fifty.line());
    server.stop().await;
    Ok(())
}
