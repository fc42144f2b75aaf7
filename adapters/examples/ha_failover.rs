//! The failover scenario of `scripts/test-ha`: two replicas of `compliance serve` on a
//! pg_auto_failover pair (the script starts them), writes and live checks sent to
//! both, the primary killed (`HA_KILL`, a shell command) while they run. Every write
//! is sent again until it is acknowledged, as a client of a production service does
//! (an audit event with its `Idempotency-Key`, a pipeline with its unique name); after the run every acknowledged write is looked for in
//! the database, the chains are verified, and a token revoked after the failover is
//! tried on both replicas.
//!
//! Environment: `HA_SERVERS` (the replicas' base URLs, comma-separated), `JWT_SECRET`,
//! `DATABASE_URL` (the hosts, for the checks), `HA_KILL`, `HA_KILL_AFTER` (seconds,
//! default 6), `HA_SECONDS` (default 45), `HA_WRITERS` (per kind, default 3),
//! `HA_ADMIN_PASSWORD` (the password of `ha-admin@example.com`, a provisioned
//! super-admin).
//!
//! Prints one line of figures and exits 1 when anything acknowledged is lost, a
//! request answered 500, a chain does not verify, or the revoked token still works.

// JSON answers are read by key (a missing one reads as null), and HA_SERVERS is
// checked to name two replicas before they are indexed.
#![allow(clippy::indexing_slicing)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use adapters::auth::{Claims, TokenKeys};
use adapters::storage::Store;
use chrono::Utc;
use serde_json::{json, Value};

/// What one kind of write saw.
#[derive(Debug, Default)]
struct Tally {
    /// Acknowledged: the key or entity each write names, and the id answered.
    acknowledged: Vec<(String, String)>,
    /// Answers and failures by status (0: no answer at all).
    statuses: BTreeMap<u16, u64>,
    /// Retries of a write not yet acknowledged.
    retries: u64,
    /// Pipelines whose earlier try was applied without an answer (the retry met
    /// their name).
    applied_unanswered: u64,
    /// When the first write sent after the kill was acknowledged (after the kill).
    first_after_kill: Option<Duration>,
}

#[derive(Clone)]
struct Shared {
    http: reqwest::Client,
    servers: Arc<Vec<String>>,
    token: Arc<String>,
    service: Arc<String>,
    org: Arc<String>,
    run: Arc<String>,
    killed_at: Arc<Mutex<Option<Instant>>>,
    until: Instant,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Audit,
    Pipeline,
    Check,
}

impl Shared {
    /// Sends one write until it is acknowledged (or the run ends): the same key on
    /// every try, alternating replicas.
    async fn write(&self, kind: Kind, n: u64, tally: &Mutex<Tally>) {
        let key = format!("{}-{kind:?}-{n}", self.run);
        let mut attempt = 0u64;
        loop {
            if Instant::now() > self.until + Duration::from_secs(30) {
                return;
            }
            let base = &self.servers[usize::try_from((n + attempt) % 2).unwrap_or(0)];
            let sent = Instant::now();
            let request = match kind {
                Kind::Audit => self
                    .http
                    .post(format!("{base}/api/audit/events"))
                    .bearer_auth(self.service.as_str())
                    .header("idempotency-key", &key)
                    .json(&json!({"action": "plugin.upload", "actorId": "ha-writer",
                        "orgId": *self.org, "targetType": "plugin", "targetId": key})),
                Kind::Pipeline => self
                    .http
                    .post(format!("{base}/api/pipelines"))
                    .bearer_auth(self.token.as_str())
                    .header("x-org-id", self.org.as_str())
                    .json(
                        &json!({"project": "ha", "organization": "ha", "pipelineName": key,
                        "accessModifier": "private", "props": {}}),
                    ),
                Kind::Check => self
                    .http
                    .post(format!("{base}/api/compliance/validate/pipeline"))
                    .bearer_auth(self.token.as_str())
                    .header("x-org-id", self.org.as_str())
                    .json(&json!({"attributes": {"pipelineName": key}, "entityId": key})),
            };
            let answer = request.timeout(Duration::from_secs(20)).send().await;
            let (status, body) = match answer {
                Ok(response) => {
                    let status = response.status().as_u16();
                    (
                        status,
                        response.json::<Value>().await.unwrap_or(Value::Null),
                    )
                }
                Err(_) => (0, Value::Null),
            };
            if self.settle(kind, (&key, attempt), (status, &body), sent, tally) {
                return;
            }
            attempt += 1;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Shared {
    /// Counts one answer; `true` when the write is settled (acknowledged, or failed
    /// for good), `false` to send it again.
    fn settle(
        &self,
        kind: Kind,
        (key, attempt): (&str, u64),
        (status, body): (u16, &Value),
        sent: Instant,
        tally: &Mutex<Tally>,
    ) -> bool {
        let mut tally = tally
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *tally.statuses.entry(status).or_default() += 1;
        if (200..300).contains(&status) {
            let id = body["data"]["id"].as_str().unwrap_or(key).to_owned();
            tally.acknowledged.push((key.to_owned(), id));
            let killed = *self
                .killed_at
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(killed) = killed.filter(|killed| sent > *killed) {
                let after = killed.elapsed();
                if tally.first_after_kill.is_none_or(|first| after < first) {
                    tally.first_after_kill = Some(after);
                }
            }
            return true;
        }
        // A pipeline whose earlier try was applied but not answered: its name is
        // taken (by that try; the check after the run finds it once).
        if status == 409 && kind == Kind::Pipeline && attempt > 0 {
            tally.acknowledged.push((key.to_owned(), key.to_owned()));
            tally.applied_unanswered += 1;
            return true;
        }
        if status != 0 && status != 503 {
            // Anything but "not now" is a failure of the scenario, not retried.
            eprintln!("{kind:?} {key}: {status} {body}");
            return true;
        }
        tally.retries += 1;
        false
    }
}

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

async fn call(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    token: &str,
    org: Option<&str>,
    body: Option<Value>,
) -> Result<(u16, Value), String> {
    let mut request = http.request(method, url).bearer_auth(token);
    if let Some(org) = org {
        request = request.header("x-org-id", org);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    Ok((status, response.json().await.unwrap_or(Value::Null)))
}

/// What each replica answers `GET /api/me` with `token`.
async fn statuses_of_me(
    http: &reqwest::Client,
    servers: &[String],
    token: &str,
) -> Result<Vec<u16>, String> {
    let mut statuses = Vec::new();
    for base in servers {
        let (status, _) = call(
            http,
            reqwest::Method::GET,
            format!("{base}/api/me"),
            token,
            None,
            None,
        )
        .await?;
        statuses.push(status);
    }
    Ok(statuses)
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match scenario().await {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::FAILURE,
        Err(why) => {
            eprintln!("ha_failover: {why}");
            std::process::ExitCode::from(2)
        }
    }
}

async fn scenario() -> Result<bool, String> {
    let servers: Vec<String> = env("HA_SERVERS", "http://127.0.0.1:3101,http://127.0.0.1:3102")
        .split(',')
        .map(str::to_owned)
        .collect();
    if servers.len() != 2 {
        return Err("HA_SERVERS names two replicas".to_owned());
    }
    let keys = TokenKeys::hs256(&env("JWT_SECRET", ""));
    let sign = |claims: Claims| keys.sign(&claims).map_err(|e| e.to_string());
    let mut service_claims =
        Claims::user("audit-writer", None, Utc::now(), Duration::from_secs(3600));
    service_claims.service = Some("audit-writer".to_owned());
    let service = sign(service_claims)?;
    let http = reqwest::Client::new();
    // The super-admin `scripts/test-ha` provisioned (`compliance provision`).
    let (status, body) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/api/auth/login", servers[0]),
        "",
        None,
        Some(
            json!({"identifier": "ha-admin@example.com", "password": env("HA_ADMIN_PASSWORD", "")}),
        ),
    )
    .await?;
    let admin = body["data"]["accessToken"]
        .as_str()
        .ok_or(format!("the super-admin's session: {status} {body}"))?
        .to_owned();
    let run = adapters::storage::new_id();
    let run = run.get(..8).unwrap_or(&run).to_owned();

    let (status, body) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/api/organization", servers[0]),
        &admin,
        None,
        Some(json!({"name": format!("ha-{run}")})),
    )
    .await?;
    let org = body["data"]["id"]
        .as_str()
        .ok_or(format!("an organization: {status} {body}"))?
        .to_owned();
    // An account of its own (personal access tokens belong to accounts).
    let email = format!("ha-{run}@example.com");
    let password = "a long enough password 1";
    let (status, body) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/api/auth/register", servers[0]),
        "",
        None,
        Some(json!({"email": email, "password": password})),
    )
    .await?;
    if !(200..300).contains(&status) {
        return Err(format!("an account: {status} {body}"));
    }
    let (status, body) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/api/auth/login", servers[0]),
        "",
        None,
        Some(json!({"identifier": email, "password": password})),
    )
    .await?;
    let session = body["data"]["accessToken"]
        .as_str()
        .ok_or(format!("a session: {status} {body}"))?
        .to_owned();
    let expires = (Utc::now() + chrono::Duration::days(1)).to_rfc3339();
    let (status, body) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/api/me/tokens", servers[0]),
        &session,
        None,
        Some(json!({"name": "ha", "expiresAt": expires})),
    )
    .await?;
    let pat = body["data"]["token"]
        .as_str()
        .ok_or(format!("a token: {status} {body}"))?
        .to_owned();
    let pat_id = body["data"]["id"].as_str().unwrap_or_default().to_owned();

    let seconds: u64 = env("HA_SECONDS", "45").parse().unwrap_or(45);
    let kill_after: u64 = env("HA_KILL_AFTER", "6").parse().unwrap_or(6);
    let writers: u64 = env("HA_WRITERS", "3").parse().unwrap_or(3);
    let started = Instant::now();
    let shared = Shared {
        http: http.clone(),
        servers: Arc::new(servers.clone()),
        token: Arc::new(admin.clone()),
        service: Arc::new(service),
        org: Arc::new(org.clone()),
        run: Arc::new(run.clone()),
        killed_at: Arc::new(Mutex::new(None)),
        until: started + Duration::from_secs(seconds),
    };
    let tallies: BTreeMap<Kind, Arc<Mutex<Tally>>> = [Kind::Audit, Kind::Pipeline, Kind::Check]
        .into_iter()
        .map(|kind| (kind, Arc::new(Mutex::new(Tally::default()))))
        .collect();
    let mut tasks = Vec::new();
    for (kind, tally) in &tallies {
        for w in 0..writers {
            let (shared, tally, kind) = (shared.clone(), tally.clone(), *kind);
            tasks.push(tokio::spawn(async move {
                let mut n = w * 1_000_000;
                while Instant::now() < shared.until {
                    shared.write(kind, n, &tally).await;
                    n += 1;
                }
            }));
        }
    }
    tokio::time::sleep(Duration::from_secs(kill_after)).await;
    let kill = env("HA_KILL", "");
    let killed = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&kill)
        .status()
        .await;
    // From when the primary is gone: writes sent before may still be acknowledged
    // by it (and must survive).
    *shared
        .killed_at
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Instant::now());
    eprintln!("killed the primary ({kill}): {killed:?}");
    for task in tasks {
        let _ = task.await;
    }

    // What was acknowledged is in the database, once.
    let store = Store::connect(&env("DATABASE_URL", ""))
        .await
        .map_err(|e| e.to_string())?;
    let pool = adapters::storage::pool_for_tests(&store);
    let mut ok = true;
    let mut figures = serde_json::Map::new();
    for (kind, tally) in &tallies {
        let tally = std::mem::take(
            &mut *tally
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let (sql, by_id) = match kind {
            Kind::Audit => (
                "SELECT id FROM audit_events WHERE org_id = $1 AND actor_id = 'ha-writer'",
                true,
            ),
            Kind::Pipeline => (
                "SELECT pipeline_name FROM pipelines WHERE org_id = $1",
                false,
            ),
            Kind::Check => (
                "SELECT entity_id FROM compliance_checks WHERE org_id = $1 AND listed = 1 AND entity_id LIKE '%-Check-%'",
                false,
            ),
        };
        let found: Vec<String> = sqlx::query_scalar(sql)
            .bind(org.as_str())
            .fetch_all(pool)
            .await
            .map_err(|e| format!("{kind:?}: {e}"))?;
        let distinct: BTreeSet<&String> = found.iter().collect();
        let lost = tally
            .acknowledged
            .iter()
            .filter(|(key, id)| !distinct.contains(if by_id { id } else { key }))
            .count();
        let twice = found.len() - distinct.len();
        let server_errors: u64 = tally
            .statuses
            .iter()
            .filter(|(s, _)| **s >= 500 && **s != 503)
            .map(|(_, n)| n)
            .sum();
        let others: u64 = tally
            .statuses
            .iter()
            .filter(|(s, _)| (300..500).contains(*s))
            .map(|(_, n)| n)
            .sum::<u64>()
            - tally.applied_unanswered;
        if lost > 0 || (twice > 0 && *kind == Kind::Pipeline) || server_errors > 0 || others > 0 {
            ok = false;
        }
        figures.insert(
            format!("{kind:?}").to_lowercase(),
            json!({
                "acknowledged": tally.acknowledged.len(),
                "lost": lost,
                "appliedTwice": twice,
                "refused503": tally.statuses.get(&503).copied().unwrap_or(0),
                "noAnswer": tally.statuses.get(&0).copied().unwrap_or(0),
                "serverErrors": server_errors,
                "otherRefusals": others,
                "retries": tally.retries,
                "appliedUnanswered": tally.applied_unanswered,
                "firstAcknowledgedAfterKillMs": tally.first_after_kill.map(|d| d.as_millis()),
            }),
        );
    }

    // The chains verify (the relay has chained the server's own events by now).
    tokio::time::sleep(Duration::from_secs(3)).await;
    for chain in [org.as_str()] {
        let (status, body) = call(
            &http,
            reqwest::Method::GET,
            format!("{}/api/audit/verify?orgId={chain}", servers[1]),
            &admin,
            None,
            None,
        )
        .await?;
        let verified = status == 200 && body["data"]["ok"] == json!(true);
        ok &= verified;
        if !verified {
            eprintln!("the chain does not verify: {status} {body}");
        }
        figures.insert("chainVerified".to_owned(), json!(verified));
        figures.insert("chainRows".to_owned(), body["data"]["count"].clone());
    }

    // A token revoked after the failover is refused on both replicas within a second
    // (each took it before, so each had it among its kept facts).
    let before = statuses_of_me(&http, &servers, &pat).await?;
    let (revoked, _) = call(
        &http,
        reqwest::Method::DELETE,
        format!("{}/api/me/tokens/{pat_id}", servers[0]),
        &session,
        None,
        None,
    )
    .await?;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let after = statuses_of_me(&http, &servers, &pat).await?;
    let revocation_followed = before.iter().all(|s| *s == 200)
        && (200..300).contains(&revoked)
        && after.iter().all(|s| *s == 401);
    ok &= revocation_followed;
    figures.insert(
        "tokenRevokedAfterFailover".to_owned(),
        json!({"before": before, "revoke": revoked, "after": after}),
    );
    figures.insert("ok".to_owned(), json!(ok));
    println!("{}", Value::Object(figures));
    Ok(ok)
}
