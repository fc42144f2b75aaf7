//! What the load examples share: the server on loopback over `DATABASE_URL` (migrated,
//! with the audit relay running, as `serve` runs it), its tokens, and the loop that
//! keeps a number of requests in flight and reads their rate and latencies.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use adapters::auth::{Claims, TokenKeys};
use adapters::config::Config;
use adapters::http::{router, AppState};
use adapters::storage::Store;
use adapters::workers::Workers;
use chrono::Utc;

use super::wrk::Request;

/// The allocator `compliance serve` runs with, so that the in-process server is
/// measured as deployed.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The token secret of the load server.
const SECRET: &str = "load-secret-0123456789abcdef";

/// A load server on loopback.
pub struct LoadServer {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// Its state (its store, for the checks after a run).
    pub state: AppState,
    keys: TokenKeys,
    workers: Workers,
}

/// The load server's store on PostgreSQL, where [`paired`] reads the write-ahead log's
/// position around each row.
static WAL_STORE: std::sync::OnceLock<Store> = std::sync::OnceLock::new();

/// Where PostgreSQL's write-ahead log stands, in bytes (`None` off PostgreSQL).
pub async fn wal_position() -> Option<f64> {
    let store = WAL_STORE.get()?;
    sqlx::query_scalar::<_, i64>(
        "SELECT CAST(pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0') AS BIGINT)",
    )
    .fetch_one(adapters::storage::pool_for_tests(store))
    .await
    .ok()
    .map(|n| n as f64)
}

/// Starts the server over `DATABASE_URL` with `vars` beside the token secret.
pub async fn serve(vars: &[(&str, &str)]) -> Result<LoadServer, String> {
    let url = std::env::var("DATABASE_URL").map_err(|_| "set DATABASE_URL".to_owned())?;
    let mut all = vec![
        ("JWT_SECRET".to_owned(), SECRET.to_owned()),
        ("DATABASE_URL".to_owned(), url.clone()),
    ];
    // Behind a pooler in transaction mode: DATABASE_DIRECT_URL names the database.
    let direct = std::env::var("DATABASE_DIRECT_URL")
        .ok()
        .filter(|direct| !direct.is_empty());
    if let Some(direct) = &direct {
        all.push(("DATABASE_DIRECT_URL".to_owned(), direct.clone()));
    }
    all.extend(vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    let config = Config::from_vars(all).map_err(|e| format!("{e:?}"))?;
    let store = Store::connect_primary(&url, direct.as_deref())
        .await
        .map_err(|e| e.to_string())?;
    adapters::services::operations::migrate(&store)
        .await
        .map_err(|e| e.to_string())?;
    if store.dialect() == adapters::storage::Dialect::Postgres {
        // The WAL position is read on a session of the database itself.
        let wal = match &direct {
            Some(direct) => Store::connect(direct).await.map_err(|e| e.to_string())?,
            None => store.clone(),
        };
        let _ = WAL_STORE.set(wal);
    }
    let state = AppState::new(
        config,
        store.clone(),
        Arc::new(adapters::audit::AuditCounters::default()),
    );
    let mut workers = Workers::new();
    workers.spawn("audit-relay", move |shutdown| {
        adapters::workers::relay::run(store, "load".to_owned(), shutdown)
    });
    {
        let state = state.clone();
        workers.spawn("allowances", move |shutdown| {
            adapters::workers::allowances::run(state, shutdown)
        });
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let base = format!(
        "http://{}",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    let app = router(state.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(LoadServer {
        base,
        state,
        keys: TokenKeys::hs256(SECRET),
        workers,
    })
}

impl LoadServer {
    /// A user's token, valid for an hour.
    pub fn user_token(&self, user: &str) -> Result<String, String> {
        let email = format!("{user}@example.com");
        self.keys
            .sign(&Claims::user(
                user,
                Some(&email),
                Utc::now(),
                Duration::from_secs(3600),
            ))
            .map_err(|e| e.to_string())
    }

    /// A service's token, valid for an hour.
    pub fn service_token(&self, service: &str) -> Result<String, String> {
        let mut claims = Claims::user(service, None, Utc::now(), Duration::from_secs(3600));
        claims.service = Some(service.to_owned());
        self.keys.sign(&claims).map_err(|e| e.to_string())
    }

    /// Creates an organization from `body` with `token` (a team: its root in
    /// `parent`), and answers its id.
    pub async fn organization(
        &self,
        token: &str,
        body: serde_json::Value,
        parent: Option<&str>,
    ) -> Result<String, String> {
        let reply = super::call(
            &self.base,
            reqwest::Method::POST,
            "/api/organization",
            token,
            parent,
            body,
        )
        .await?;
        reply
            .pointer("/data/id")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
            .ok_or(format!("no organization: {reply}"))
    }

    /// Lets the workers finish what they hold.
    pub async fn stop(self) {
        self.workers.drain(Duration::from_secs(10)).await;
    }
}

/// What a run measured.
pub struct Figures {
    /// Requests per second.
    pub rate: f64,
    /// Median latency, in milliseconds.
    pub median_ms: f64,
    /// 99th percentile latency, in milliseconds.
    pub p99_ms: f64,
    /// How many requests answered each status.
    pub statuses: BTreeMap<u16, u64>,
}

impl Figures {
    /// Fails unless every request answered `status`.
    pub fn all(self, status: u16) -> Result<Figures, String> {
        match self.statuses.keys().find(|s| **s != status) {
            Some(other) => Err(format!("a request answered {other}, not {status}")),
            None => Ok(self),
        }
    }
}

/// Sends `total` requests made by `request` (given their number), `in_flight` at a
/// time; each request answers its status (0 when it got none).
pub async fn measure<F, R>(total: usize, in_flight: usize, request: F) -> Result<Figures, String>
where
    F: Fn(usize) -> R,
    R: Future<Output = u16> + Send + 'static,
{
    let started = Instant::now();
    let mut latencies = Vec::with_capacity(total);
    let mut statuses = BTreeMap::new();
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
            *statuses.entry(status).or_insert(0) += 1;
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
        statuses,
    })
}

/// The status of a sent request (0 when it could not be sent).
pub fn status(sent: reqwest::Result<reqwest::Response>) -> u16 {
    sent.map(|r| r.status().as_u16()).unwrap_or(0)
}

impl Figures {
    /// `rate/s (median, p99)`, with the ratio to `yardstick`.
    pub fn line(&self, yardstick: Option<&Figures>) -> String {
        let ratio = yardstick.map_or_else(String::new, |y| {
            format!(", ratio to /health {:.3}", self.rate / y.rate)
        });
        format!(
            "{:.0}/s (median {:.1} ms, p99 {:.1} ms){ratio}",
            self.rate, self.median_ms, self.p99_ms
        )
    }
}

impl LoadServer {
    /// The yardstick: bare `GET /health`, `total` requests, `in_flight` at a time.
    pub async fn health(&self, total: usize, in_flight: usize) -> Result<Figures, String> {
        health(&self.base, total, in_flight).await
    }
}

/// The yardstick of any server at `base`: bare `GET /health`, `total` requests,
/// `in_flight` at a time (or `wrk`'s run), every one answering 200.
pub async fn health(base: &str, total: usize, in_flight: usize) -> Result<Figures, String> {
    send(base, (total, in_flight), &Request::get("/health")).await
}

/// Sends `request`'s requests to `base`: `total` of them, `in_flight` at a time, by
/// this loop, or by `wrk` for its duration with `in_flight` connections when
/// `LOAD_TOOL=wrk`; every one must answer its `expect`ed status.
pub async fn send(
    base: &str,
    (total, in_flight): (usize, usize),
    request: &Request,
) -> Result<Figures, String> {
    if super::wrk::enabled() {
        return super::wrk::run(base, request, in_flight)
            .await?
            .all(request.expect);
    }
    let http = reqwest::Client::new();
    let shared = Arc::new((http, base.to_owned(), request.clone()));
    measure(total, in_flight, move |n| {
        let shared = shared.clone();
        async move {
            let (http, base, request) = &*shared;
            let method = reqwest::Method::from_bytes(request.method.as_bytes())
                .unwrap_or(reqwest::Method::GET);
            let mut sent = http.request(method, format!("{base}{}", request.path));
            for (name, value) in &request.headers {
                sent = sent.header(name.as_str(), Request::render(value, n));
            }
            if !request.body.is_empty() {
                sent = sent.body(Request::render(&request.body, n));
            }
            status(sent.send().await)
        }
    })
    .await?
    .all(request.expect)
}

/// The yardstick in [`ROUNDS`] rounds back to back: the median round's rate, and
/// every round's, lowest first (for a part measured once, such as a scan).
pub async fn health_median(
    base: &str,
    total: usize,
    in_flight: usize,
) -> Result<(f64, Vec<f64>), String> {
    let mut rates = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        rates.push(health(base, total, in_flight).await?.rate);
    }
    rates.sort_by(f64::total_cmp);
    let median = rates.get(ROUNDS / 2).copied().unwrap_or(0.0);
    Ok((median, rates))
}

/// How many times a row is measured, each time right after the yardstick: the machine
/// is shared, and a rate moves by a third within minutes, so a row's ratio is the
/// median of its rounds, each against the `/health` measured just before it.
pub const ROUNDS: usize = 3;

/// A row measured against the yardstick in [`ROUNDS`] rounds.
pub struct Paired {
    /// The row in the median round.
    pub row: Figures,
    /// The yardstick measured just before it.
    pub health: Figures,
    /// Every round's ratio, lowest first.
    pub ratios: Vec<f64>,
    /// The median round's bytes of PostgreSQL's write-ahead log per request (on
    /// PostgreSQL; the server's background work included).
    pub wal_per_request: Option<f64>,
}

impl Paired {
    /// The median round's line, with the spread of the ratios.
    pub fn line(&self) -> String {
        let (low, high) = (
            self.ratios.first().copied().unwrap_or_default(),
            self.ratios.last().copied().unwrap_or_default(),
        );
        let wal = self
            .wal_per_request
            .map_or_else(String::new, |w| format!("; WAL {w:.0} bytes per request"));
        format!(
            "{} (median of {} rounds, {low:.3} to {high:.3}; /health {:.0}/s before it){wal}",
            self.row.line(Some(&self.health)),
            self.ratios.len(),
            self.health.rate
        )
    }
}

/// Measures `/health` at `base` and then the row `round` measures, [`ROUNDS`] times:
/// the round whose ratio is the median.
pub async fn paired<F, R>(
    base: &str,
    (total, in_flight): (usize, usize),
    mut round: F,
) -> Result<Paired, String>
where
    F: FnMut() -> R,
    R: Future<Output = Result<Figures, String>>,
{
    let mut rounds = Vec::with_capacity(ROUNDS);
    let mut wal = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let health = health(base, total, in_flight).await?;
        let before = wal_position().await;
        let row = round().await?;
        if let (Some(a), Some(b)) = (before, wal_position().await) {
            let requests: u64 = row.statuses.values().sum();
            wal.push((b - a) / requests.max(1) as f64);
        }
        rounds.push((row.rate / health.rate, row, health));
    }
    rounds.sort_by(|a, b| a.0.total_cmp(&b.0));
    wal.sort_by(f64::total_cmp);
    let ratios = rounds.iter().map(|(ratio, _, _)| *ratio).collect();
    let (_, row, health) = rounds.swap_remove(ROUNDS / 2);
    Ok(Paired {
        row,
        health,
        ratios,
        wal_per_request: wal.get(wal.len() / 2).copied(),
    })
}

/// The arguments every load example takes: how many requests of each kind (4000)
/// and how many in flight (32).
pub fn args() -> (usize, usize) {
    let mut args = std::env::args().skip(1);
    let total = args.next().and_then(|a| a.parse().ok()).unwrap_or(4000);
    let in_flight = args.next().and_then(|a| a.parse().ok()).unwrap_or(32);
    (total, in_flight)
}

/// Seeds `seeded` executions of `org` by SQL, one every 90 days / `seeded` back from
/// now: 20 pipelines (`p0`..`p19`), one in ten failed in Build, two stages each;
/// analyzed on PostgreSQL.
pub async fn seed_executions(
    store: &adapters::storage::Store,
    org: &str,
    seeded: i64,
) -> Result<(), String> {
    let pool = adapters::storage::pool_for_tests(store);
    let postgres = store.dialect() == adapters::storage::Dialect::Postgres;
    let sql = |text: &str| {
        if postgres {
            text.to_owned()
        } else {
            text.replace('$', "?")
        }
    };
    // One every 90 days / `seeded`, back from now; 20 pipelines; one in ten failed
    // in Build; two stages each.
    let step_ms = 7_776_000_000 / seeded.max(1);
    let (numbers, instant) = if postgres {
        (
            "SELECT g AS n FROM generate_series(1, $2::bigint) g",
            "to_char((now() - (n * $3::bigint) * interval '1 millisecond') AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')",
        )
    } else {
        (
            "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < $2) SELECT n FROM g",
            "strftime('%Y-%m-%dT%H:%M:%S', 'now', '-' || ((n * $3) / 1000) || ' seconds') || '.000000Z'",
        )
    };
    let executions = format!(
        "INSERT INTO report_executions (resource, execution_id, org_id, pipeline_id, state, outcome, started_at, ended_at, duration_ms, error)
         SELECT 'arn:seed:' || (n % 20), 's' || n, $1, 'p' || (n % 20),
           CASE WHEN n % 10 = 0 THEN 'FAILED' ELSE 'SUCCEEDED' END,
           CASE WHEN n % 10 = 0 THEN 'failure' ELSE 'success' END,
           {instant}, NULL, 60000 + (n % 1000) * 100,
           CASE WHEN n % 10 = 0 THEN 'build' ELSE NULL END
         FROM ({numbers}) AS numbers"
    );
    let stages = format!(
        "INSERT INTO report_stages (resource, execution_id, stage, org_id, pipeline_id, state, started_at, duration_ms)
         SELECT 'arn:seed:' || (n % 20), 's' || n, stage, $1, 'p' || (n % 20),
           CASE WHEN n % 10 = 0 AND stage = 'Build' THEN 'FAILED' ELSE 'SUCCEEDED' END,
           {instant}, 20000 + (n % 500) * 100
         FROM ({numbers}) AS numbers, (SELECT 'Build' AS stage UNION ALL SELECT 'Deploy') AS stages"
    );
    for statement in [executions, stages] {
        sqlx::query(&sql(&statement))
            .bind(org)
            .bind(seeded)
            .bind(step_ms)
            .execute(pool)
            .await
            .map_err(|e| e.to_string())?;
    }
    if postgres {
        for table in ["report_executions", "report_stages"] {
            sqlx::query(&format!("ANALYZE {table}"))
                .execute(pool)
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}
