//! Load: how long the console's pages take on an organization with 10,000 entities,
//! against the server on loopback over a real database (the embedded SQLite file by
//! default, as `serve` runs), beside the same server's bare `GET /health` measured
//! first in the same run. The organization's pipelines are judged by a scan against
//! three rules (a third blocked, a third warned); each page is then asked for one
//! at a time, signed in through the console's own form.
//!
//! ```sh
//! DATABASE_URL=sqlite:///tmp/console.db \
//!   cargo run --release -p adapters --example load_console -- 10000 50
//! ```
//!
//! Arguments: how many pipelines (10000), how many requests of each page (50). The
//! database is migrated; use a scratch one.

mod support;

use std::time::{Duration, Instant};

use adapters::services::scans::{self, SweepSettings};
use serde_json::{json, Value};
use support::load::{measure, serve, status};

const PASSWORD: &str = "load test passphrase";

async fn post(
    http: &reqwest::Client,
    url: String,
    (token, org): (Option<&str>, Option<&str>),
    body: Value,
) -> Result<Value, String> {
    let mut request = http.post(url).json(&body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(org) = org {
        request = request.header("x-org-id", org);
    }
    request
        .send()
        .await
        .map_err(|e| e.to_string())?
        .json()
        .await
        .map_err(|e| e.to_string())
}

fn text(value: &Value, pointer: &str) -> Result<String, String> {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("no {pointer} in {value}"))
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let pipelines: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let asks: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(50);
    let server = serve(&[("QUOTA_TIER_DEVELOPER_PIPELINES", "-1")]).await?;
    let base = server.base.clone();
    let http = reqwest::Client::new();
    let email = format!("console-{}@example.com", &adapters::new_id()[..8]);
    post(
        &http,
        format!("{base}/api/auth/register"),
        (None, None),
        json!({"email": email, "password": PASSWORD}),
    )
    .await?;
    let login = json!({"identifier": email, "password": PASSWORD});
    let session = post(&http, format!("{base}/api/auth/login"), (None, None), login).await?;
    let token = text(&session, "/data/accessToken")?;
    let org = server
        .organization(&token, json!({"name": "busy"}), None)
        .await?;

    // The inventory, then the rules, then a scan that judges it all.
    let started = Instant::now();
    let probe = post(
        &http,
        format!("{base}/api/pipelines"),
        (Some(&token), Some(&org)),
        json!({"project": "web", "organization": "busy", "pipelineName": "probe-one",
               "accessModifier": "private", "props": {}}),
    )
    .await?;
    if probe.get("statusCode") != Some(&json!(201)) {
        return Err(format!("a pipeline: {probe}"));
    }
    let shared = std::sync::Arc::new((http.clone(), base.clone(), token.clone(), org.clone()));
    measure(pipelines, 32, move |n| {
        let shared = shared.clone();
        async move {
            let (http, base, token, org) = &*shared;
            let access = if n % 3 == 0 { "public" } else { "private" };
            let name = if n % 3 == 1 {
                format!("legacy{n}")
            } else {
                format!("web-app{n}")
            };
            status(
                http.post(format!("{base}/api/pipelines"))
                    .bearer_auth(token)
                    .header("x-org-id", org.as_str())
                    .json(
                        &json!({"project": "web", "organization": "busy", "pipelineName": name,
                                  "accessModifier": access, "props": {}}),
                    )
                    .send()
                    .await,
            )
        }
    })
    .await?
    .all(201)?;
    for rule in [
        json!({"name": "Private only", "target": "pipeline", "severity": "error",
               "field": "accessModifier", "operator": "eq", "value": "private"}),
        json!({"name": "Named by convention", "target": "pipeline", "severity": "warning",
               "field": "pipelineName", "operator": "regex", "value": "^web-app[0-9]+$"}),
        json!({"name": "Web project", "target": "pipeline", "severity": "info",
               "field": "project", "operator": "eq", "value": "web"}),
    ] {
        post(
            &http,
            format!("{base}/api/compliance/rules"),
            (Some(&token), Some(&org)),
            rule,
        )
        .await?;
    }
    post(
        &http,
        format!("{base}/api/compliance/scans"),
        (Some(&token), Some(&org)),
        json!({"target": "pipeline"}),
    )
    .await?;
    let never = || false;
    let settings = SweepSettings {
        concurrency: 2,
        batch: 200,
        lease: Duration::from_secs(60),
    };
    loop {
        let now = chrono::Utc::now();
        let claimed = server
            .state
            .infra
            .store
            .claim_scan("load", now, now + chrono::Duration::seconds(60))
            .await
            .map_err(|e| e.to_string())?;
        let Some(claimed) = claimed else { break };
        scans::sweep(&server.state, &claimed, settings, &never)
            .await
            .map_err(|e| e.to_string())?;
    }
    println!(
        "{pipelines} pipelines created and judged in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // Signed in through the console's form.
    let host = base.trim_start_matches("http://").to_owned();
    let signed = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| e.to_string())?
        .post(format!("{base}/console/login"))
        .header("origin", &base)
        .form(&[("identifier", email.as_str()), ("password", PASSWORD)])
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let cookie = signed
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::to_owned)
        .ok_or("the console's sign-in set no cookie")?;
    let _ = host;

    let health = server.health(asks * 10, 1).await?;
    println!(
        "GET /health (the yardstick), one at a time: median {:.2} ms",
        health.median_ms
    );
    // The API reads the posture page makes, alone.
    for path in [
        "/api/compliance/posture?top=10",
        "/api/compliance/posture/policy-report?target=pipeline",
    ] {
        let shared = std::sync::Arc::new((
            http.clone(),
            format!("{base}{path}"),
            token.clone(),
            org.clone(),
        ));
        let figures = measure(asks, 1, move |_| {
            let shared = shared.clone();
            async move {
                let (http, url, token, org) = &*shared;
                status(
                    http.get(url)
                        .bearer_auth(token)
                        .header("x-org-id", org.as_str())
                        .send()
                        .await,
                )
            }
        })
        .await?
        .all(200)?;
        println!(
            "GET {path}: median {:.1} ms, p99 {:.1} ms",
            figures.median_ms, figures.p99_ms
        );
    }
    for page in [
        "posture",
        "rules",
        "catalog",
        "exemptions",
        "inventory",
        "scans",
        "audit",
        "billing",
        "inbox",
        "conversations",
        "dashboards",
        "alerts",
        "people",
        "settings",
        "account",
        "rules/edit",
        "rules/templates",
    ] {
        let shared = std::sync::Arc::new((
            http.clone(),
            format!("{base}/console/{page}?org={org}"),
            cookie.clone(),
        ));
        let figures = measure(asks, 1, move |_| {
            let shared = shared.clone();
            async move {
                let (http, url, cookie) = &*shared;
                status(http.get(url).header("cookie", cookie).send().await)
            }
        })
        .await?
        .all(200)?;
        println!(
            "GET /console/{page}: median {:.1} ms, p99 {:.1} ms ({:.0}x /health)",
            figures.median_ms,
            figures.p99_ms,
            figures.median_ms / health.median_ms
        );
    }
    server.stop().await;
    Ok(())
}
