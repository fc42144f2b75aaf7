//! Load: quota increments per second on one pool, through the whole door (the
//! service token, the Idempotency-Key-less increment, one conditional UPDATE on the
//! root's pool row and the team's own row), against the server on loopback over a
//! real database; half the calls name the root, half its team. More calls than the
//! limit allows are made, so the run also shows that none overshot: the 200s add up
//! to the limit exactly and the pool row says so.
//!
//! ```sh
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/load \
//!   cargo run --release -p adapters --example load_quota -- 20000 32 15000
//! ```
//!
//! Arguments: how many increments of 1 (20000), how many in flight (32), the pool's
//! aiCalls limit (15000). The database is migrated; use a scratch one.

mod support;

use std::sync::Arc;

use adapters::services::entitlement::{self, Change};
use chrono::Utc;
use entitlements::{Dimension, Limit};
use serde_json::json;
use support::load::{measure, serve};

#[tokio::main]
async fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let total: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let in_flight: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(32);
    let limit: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(15_000);
    let server = serve(&[]).await?;
    let app = server.state.clone();
    let base = server.base.clone();
    let user = server.user_token("load")?;
    let service = server.service_token("generator")?;
    let http = reqwest::Client::new();
    let name: String = format!("load-{}", adapters::new_id())
        .chars()
        .take(30)
        .collect();
    let root_id = server
        .organization(&user, json!({ "name": name }), None)
        .await?;
    let team_id = server
        .organization(
            &user,
            json!({"name": "team", "parentOrgId": root_id}),
            Some(&root_id),
        )
        .await?;
    let root = app
        .infra
        .store
        .organization(&root_id)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the root is gone")?;
    entitlement::commit(
        &app.infra.store,
        &app.config,
        &app.replica.allowances,
        &root,
        Utc::now(),
        |_| {
            Ok((
                Change {
                    overrides: vec![(Dimension::AiCalls, Some(Limit::Finite(limit)))],
                    ..Change::default()
                },
                Vec::new(),
            ))
        },
    )
    .await
    .map_err(|e| e.to_string())?;

    let shared = Arc::new((http, service, base, root_id.clone(), team_id));
    let figures = measure(total, in_flight, move |i| {
        let shared = shared.clone();
        async move {
            let (http, service, base, root_id, team_id) = &*shared;
            let org = if i % 2 == 0 { root_id } else { team_id };
            http.post(format!("{base}/api/quotas/{org}/increment"))
                .bearer_auth(service)
                .json(&json!({"type": "aiCalls", "amount": 1}))
                .send()
                .await
                .map(|r| r.status().as_u16())
                .unwrap_or(0)
        }
    })
    .await?;
    let count = |status: u16| figures.statuses.get(&status).copied().unwrap_or(0);
    let (counted, refused) = (count(200), count(429));
    if counted + refused != total as u64 {
        return Err(format!(
            "an increment answered neither 200 nor 429: {:?}",
            figures.statuses
        ));
    }
    let pool = app
        .infra
        .store
        .pool_usage(&root_id, "aiCalls")
        .await
        .map_err(|e| e.to_string())?;
    println!(
        "{total} increments of 1 on one pool (root and team alternating), {in_flight} in flight, limit {limit}: {:.0} increments/s; latency median {:.1} ms, p99 {:.1} ms; counted {counted}, refused {refused} (429), pool row {pool}",
        figures.rate, figures.median_ms, figures.p99_ms
    );
    if counted != limit.min(total as u64) || pool != counted {
        return Err(format!(
            "overshoot or loss: counted {counted}, pool {pool}, limit {limit}"
        ));
    }
    server.stop().await;
    Ok(())
}
