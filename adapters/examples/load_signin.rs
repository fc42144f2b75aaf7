//! Load: sign-in, as ratios to the same server's bare `GET /health` measured first
//! in the same run, against the server on loopback over a real database: sign-ins
//! per second (each an argon2id check at OWASP's parameters, a new refresh family
//! and its audit event), refreshes per second (rotation: one conditional update and
//! an insert; 32 sessions refreshing one after another), and what checking a
//! session's revocation adds to a request: `GET /api/me/organizations` with a
//! development token (no account: the check finds none, kept) beside the same read
//! with a signed-in session's token (its account's generation and its family,
//! kept).
//!
//! ```sh
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/load \
//!   cargo run --release -p adapters --example load_signin -- 4000 32
//! ```
//!
//! Arguments: how many requests of each kind (4000; sign-ins a tenth of it), how
//! many in flight (32). The database is migrated; use a scratch one.

mod support;

use std::sync::Arc;

use serde_json::{json, Value};
use support::load::{measure, serve, status};
use tokio::sync::Mutex;

const PASSWORD: &str = "load test passphrase";

async fn post(http: &reqwest::Client, url: String, body: Value) -> Result<Value, String> {
    http.post(url)
        .json(&body)
        .send()
        .await
        .map_err(|e| e.to_string())?
        .json()
        .await
        .map_err(|e| e.to_string())
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let (total, in_flight) = support::load::args();
    let server = serve(&[]).await?;
    let base = server.base.clone();
    let http = reqwest::Client::new();
    let email = format!("load-{}@example.com", &adapters::new_id()[..8]);
    let registered = post(
        &http,
        format!("{base}/api/auth/register"),
        json!({"email": email, "password": PASSWORD}),
    )
    .await?;
    if registered.get("statusCode") != Some(&json!(201)) {
        return Err(format!("register: {registered}"));
    }
    let login = json!({"identifier": email, "password": PASSWORD});
    let health = server.health(total, in_flight).await?;
    println!("GET /health (the yardstick): {}", health.line(None));

    let shared = Arc::new((http.clone(), base.clone(), login.clone()));
    let signins = measure((total / 10).max(1), in_flight, move |_| {
        let shared = shared.clone();
        async move {
            let (http, base, login) = &*shared;
            status(
                http.post(format!("{base}/api/auth/login"))
                    .json(login)
                    .send()
                    .await,
            )
        }
    })
    .await?
    .all(200)?;
    println!(
        "sign-in (argon2id 19 MiB, 2 passes): {}",
        signins.line(Some(&health))
    );

    // One session per request in flight, each refreshed one after another.
    let mut sessions = Vec::new();
    let mut access = String::new();
    for _ in 0..in_flight {
        let session = post(&http, format!("{base}/api/auth/login"), login.clone()).await?;
        let refresh = session
            .pointer("/data/refreshToken")
            .and_then(Value::as_str)
            .ok_or(format!("login: {session}"))?;
        access = session
            .pointer("/data/accessToken")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        sessions.push(Mutex::new(refresh.to_owned()));
    }
    let shared = Arc::new((http.clone(), base.clone(), sessions));
    let refreshes = measure(total, in_flight, move |i| {
        let shared = shared.clone();
        async move {
            let (http, base, sessions) = &*shared;
            let Some(chain) = sessions.get(i % sessions.len()) else {
                return 0;
            };
            let mut token = chain.lock().await;
            let sent = http
                .post(format!("{base}/api/auth/refresh"))
                .json(&json!({"refreshToken": *token}))
                .send()
                .await;
            let Ok(response) = sent else { return 0 };
            let code = response.status().as_u16();
            if let Ok(body) = response.json::<Value>().await {
                if let Some(next) = body.pointer("/data/refreshToken").and_then(Value::as_str) {
                    *token = next.to_owned();
                }
            }
            code
        }
    })
    .await?
    .all(200)?;
    println!("refresh (rotation): {}", refreshes.line(Some(&health)));

    let development = server.user_token("load-dev")?;
    for (what, token) in [
        ("a development token (no account)", development),
        ("a signed-in session (account and family checked)", access),
    ] {
        let shared = Arc::new((http.clone(), base.clone(), token));
        let reads = measure(total, in_flight, move |_| {
            let shared = shared.clone();
            async move {
                let (http, base, token) = &*shared;
                status(
                    http.get(format!("{base}/api/me/organizations"))
                        .bearer_auth(token)
                        .send()
                        .await,
                )
            }
        })
        .await?
        .all(200)?;
        println!(
            "GET /api/me/organizations, {what}: {}",
            reads.line(Some(&health))
        );
    }
    server.stop().await;
    Ok(())
}
