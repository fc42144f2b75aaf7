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

use std::sync::Arc;
use std::time::{Duration, Instant};

use adapters::auth::{Claims, TokenKeys};
use adapters::config::Config;
use adapters::http::{router, AppState};
use adapters::services::entitlement::{self, Change};
use adapters::storage::Store;
use chrono::Utc;
use entitlements::{Dimension, Limit};
use serde_json::{json, Value};

const SECRET: &str = "load-secret-0123456789abcdef";

#[tokio::main]
async fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let total: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let in_flight: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(32);
    let limit: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(15_000);
    let url = std::env::var("DATABASE_URL").map_err(|_| "set DATABASE_URL".to_owned())?;
    let config = Config::from_vars(vec![
        ("JWT_SECRET".to_owned(), SECRET.to_owned()),
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
    let app = state.clone();
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

    let keys = TokenKeys::hs256(SECRET);
    let user = keys
        .sign(&Claims::user(
            "load",
            Some("load@example.com"),
            Utc::now(),
            Duration::from_secs(3600),
        ))
        .map_err(|e| e.to_string())?;
    let mut claims = Claims::user("generator", None, Utc::now(), Duration::from_secs(3600));
    claims.service = Some("generator".to_owned());
    let service = keys.sign(&claims).map_err(|e| e.to_string())?;
    let http = reqwest::Client::new();
    let create = |body: Value, org: Option<String>| {
        let mut request = http
            .post(format!("{base}/api/organization"))
            .bearer_auth(&user)
            .json(&body);
        if let Some(org) = org {
            request = request.header("x-org-id", org);
        }
        async move {
            let reply: Value = request
                .send()
                .await
                .map_err(|e| e.to_string())?
                .json()
                .await
                .map_err(|e| e.to_string())?;
            reply
                .pointer("/data/id")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or(format!("no organization: {reply}"))
        }
    };
    let name: String = format!("load-{}", adapters::new_id())
        .chars()
        .take(30)
        .collect();
    let root_id = create(json!({"name": name}), None).await?;
    let team_id = create(
        json!({"name": "team", "parentOrgId": root_id}),
        Some(root_id.clone()),
    )
    .await?;
    let root = app
        .store
        .organization(&root_id)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the root is gone")?;
    entitlement::commit(&app, &root, Utc::now(), |_| {
        Ok((
            Change {
                overrides: vec![(Dimension::AiCalls, Some(Limit::Finite(limit)))],
                ..Change::default()
            },
            Vec::new(),
        ))
    })
    .await
    .map_err(|e| e.to_string())?;

    let started = Instant::now();
    let mut latencies = Vec::with_capacity(total);
    let (mut counted, mut refused) = (0u64, 0u64);
    let mut next = 0usize;
    let mut running = tokio::task::JoinSet::new();
    let (http, service, base) = (Arc::new(http.clone()), Arc::new(service), Arc::new(base));
    while next < total || !running.is_empty() {
        while next < total && running.len() < in_flight {
            let (http, service, base) = (http.clone(), service.clone(), base.clone());
            let org = if next % 2 == 0 {
                root_id.clone()
            } else {
                team_id.clone()
            };
            running.spawn(async move {
                let at = Instant::now();
                let status = http
                    .post(format!("{base}/api/quotas/{org}/increment"))
                    .bearer_auth(service.as_str())
                    .json(&json!({"type": "aiCalls", "amount": 1}))
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
            match status {
                200 => counted += 1,
                429 => refused += 1,
                other => return Err(format!("an increment answered {other}")),
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
    let pool = app
        .store
        .pool_usage(&root_id, "aiCalls")
        .await
        .map_err(|e| e.to_string())?;
    println!(
        "{total} increments of 1 on one pool (root and team alternating), {in_flight} in flight, limit {limit}: {:.0} increments/s; latency median {:.1} ms, p99 {:.1} ms; counted {counted}, refused {refused} (429), pool row {pool}",
        total as f64 / seconds,
        at(0.5).as_secs_f64() * 1000.0,
        at(0.99).as_secs_f64() * 1000.0
    );
    if counted != limit.min(total as u64) || pool != counted {
        return Err(format!(
            "overshoot or loss: counted {counted}, pool {pool}, limit {limit}"
        ));
    }
    workers.drain(Duration::from_secs(10)).await;
    Ok(())
}
