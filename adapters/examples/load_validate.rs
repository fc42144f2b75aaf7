//! Load, as ratios to the same server's bare `GET /health` measured first in the same
//! run, against the server on loopback over a real database: `GET /api/organization`
//! with a user's token (an authenticated read of one organization: the gate and the
//! account's apiCalls count), and live validations (a service token, the check of 100
//! active rules of which 30 fail with their severities so that every check blocks and
//! notifies, the check log's row, the entity's snapshot and the notification).
//!
//! ```sh
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/load \
//!   cargo run --release -p adapters --example load_validate -- 4000 32
//! ```
//!
//! Arguments: how many requests of each kind (4000), how many in flight (32). The
//! database is migrated; use a scratch one.

use std::future::Future;
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
    let total: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(4000);
    let in_flight: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(32);
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
    let hour = Duration::from_secs(3600);
    let user = keys
        .sign(&Claims::user(
            "load",
            Some("load@example.com"),
            Utc::now(),
            hour,
        ))
        .map_err(|e| e.to_string())?;
    let http = reqwest::Client::new();
    let org: Value = http
        .post(format!("{base}/api/organization"))
        .bearer_auth(&user)
        .json(&json!({"name": format!("load-{}", &adapters::new_id()[..8])}))
        .send()
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
    let mut claims = Claims::user("load-service", None, Utc::now(), hour);
    claims.service = Some("load".to_owned());
    let service = keys.sign(&claims).map_err(|e| e.to_string())?;

    let (http, base, org, service) = (
        Arc::new(http),
        Arc::new(base),
        Arc::new(org),
        Arc::new(service),
    );
    let health = {
        let (http, base) = (http.clone(), base.clone());
        measure(total, in_flight, move |_| {
            let (http, base) = (http.clone(), base.clone());
            async move {
                http.get(format!("{base}/health"))
                    .send()
                    .await
                    .map(|r| r.status().as_u16())
                    .unwrap_or(0)
            }
        })
        .await?
    };
    let read = {
        let (http, base, org, user) = (
            http.clone(),
            base.clone(),
            org.clone(),
            Arc::new(user.clone()),
        );
        measure(total, in_flight, move |_| {
            let (http, base, org, user) = (http.clone(), base.clone(), org.clone(), user.clone());
            async move {
                http.get(format!("{base}/api/organization"))
                    .bearer_auth(user.as_str())
                    .header("x-org-id", org.as_str())
                    .send()
                    .await
                    .map(|r| r.status().as_u16())
                    .unwrap_or(0)
            }
        })
        .await?
    };
    let validate = measure(total, in_flight, move |i| {
        let (http, base, org, service) = (http.clone(), base.clone(), org.clone(), service.clone());
        async move {
            let body = json!({"attributes": {"name": "eslint", "version": "8.1.0"},
                              "entityId": format!("plugin-{}", i % 500)});
            http.post(format!("{base}/api/compliance/validate/plugin"))
                .bearer_auth(service.as_str())
                .header("x-org-id", org.as_str())
                .json(&body)
                .send()
                .await
                .map(|r| r.status().as_u16())
                .unwrap_or(0)
        }
    })
    .await?;
    println!(
        "GET /health: {:.0}/s (median {:.1} ms, p99 {:.1} ms)",
        health.rate, health.median_ms, health.p99_ms
    );
    println!(
        "GET /api/organization, a user's token: {:.0}/s (median {:.1} ms, p99 {:.1} ms), ratio to /health {:.3}",
        read.rate,
        read.median_ms,
        read.p99_ms,
        read.rate / health.rate
    );
    println!(
        "live validation, 100 rules, 30 failing (blocked, notified): {:.0}/s (median {:.1} ms, p99 {:.1} ms), ratio to /health {:.3}",
        validate.rate,
        validate.median_ms,
        validate.p99_ms,
        validate.rate / health.rate
    );
    Ok(())
}

struct Figures {
    rate: f64,
    median_ms: f64,
    p99_ms: f64,
}

/// Sends `total` requests made by `request`, `in_flight` at a time; every one must
/// answer 200.
async fn measure<F, R>(total: usize, in_flight: usize, request: F) -> Result<Figures, String>
where
    F: Fn(usize) -> R,
    R: Future<Output = u16> + Send + 'static,
{
    let started = Instant::now();
    let mut latencies = Vec::with_capacity(total);
    let mut running = tokio::task::JoinSet::new();
    let mut next = 0usize;
    while next < total || !running.is_empty() {
        while next < total && running.len() < in_flight {
            let sent = request(next);
            running.spawn(async move {
                let at = Instant::now();
                (sent.await, at.elapsed())
            });
            next += 1;
        }
        if let Some(done) = running.join_next().await {
            let (status, elapsed) = done.map_err(|e| e.to_string())?;
            if status != 200 {
                return Err(format!("a request answered {status}"));
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
            .as_secs_f64()
            * 1000.0
    };
    Ok(Figures {
        rate: total as f64 / seconds,
        median_ms: at(0.5),
        p99_ms: at(0.99),
    })
}
