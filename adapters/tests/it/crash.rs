//! PostgreSQL, real processes: a server killed with SIGKILL in the middle of a
//! mutation loop, restarted on the same database, then stopped with SIGTERM: every
//! mutation that got a 2xx has its audit event, and the chain verifies.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use adapters::http::wire::Organization;

use super::*;

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Two different free ports (a port just released may be handed out again).
pub fn two_free_ports() -> [u16; 2] {
    let first = free_port();
    let second = std::iter::repeat_with(free_port)
        .find(|p| *p != first)
        .unwrap();
    [first, second]
}

pub fn start(url: &str, port: u16) -> Running {
    start_with(url, port, &[])
}

/// A server process that is killed when dropped: a test that fails half-way leaves no
/// server behind holding database connections.
pub struct Running(Child);

impl std::ops::Deref for Running {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Running {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A server on `port` over the database `url`, with more variables.
pub fn start_with(url: &str, port: u16, vars: &[(&str, &str)]) -> Running {
    Running(
        Command::new(env!("CARGO_BIN_EXE_compliance"))
            .arg("serve")
            // As in the in-process tests: members join Developer organizations.
            .env("QUOTA_TIER_DEVELOPER_SEATS", "-1")
            .envs(vars.iter().copied())
            .env("DATABASE_URL", url)
            .env("JWT_SECRET", SECRET)
            .env("COMPLIANCE_SERVICE_PORT", port.to_string())
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// Sends SIGTERM (a graceful stop) to a server process.
pub fn terminate(server: &Child) {
    let sent = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// A user's token for the servers these tests start (they share `SECRET`).
pub fn user_token(sub: &str) -> String {
    TokenKeys::hs256(SECRET)
        .sign(&Claims::user(
            sub,
            Some(&format!("{sub}@example.com")),
            Utc::now(),
            Duration::from_secs(3600),
        ))
        .unwrap()
}

/// A new organization, created over HTTP at `base` by the holder of `token`; its id.
pub async fn create_org(client: &reqwest::Client, base: &str, token: &str, name: &str) -> String {
    let org: Organization = crate::api::data_of(
        client
            .post(format!("{base}/api/organization"))
            .bearer_auth(token)
            .json(&json!({ "name": name }))
            .send()
            .await
            .unwrap(),
    )
    .await;
    org.id
}

/// Waits for a started server's `/health` (up to a minute: a loaded CI machine runs
/// browsers and other servers beside it).
pub async fn wait_healthy(client: &reqwest::Client, base: &str) {
    for _ in 0..1200 {
        if client
            .get(format!("{base}/health"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the server did not start");
}

/// Adds, promotes and removes members until a request cannot reach the server.
/// Returns the (action, user) of every mutation that was acknowledged with a 2xx.
/// Lets the loop run 1.5 s and at least a dozen acknowledged mutations (a loaded
/// machine is slow, not wrong), then resets the count for the next phase.
async fn busy_for_a_while(progress: &std::sync::atomic::AtomicUsize) {
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for _ in 0..120 {
        if progress.load(Ordering::Relaxed) > 12 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    progress.store(0, Ordering::Relaxed);
}

async fn mutate_until_gone(
    client: reqwest::Client,
    base: String,
    org: String,
    token: String,
    prefix: &'static str,
    stop: Arc<AtomicBool>,
    progress: Arc<std::sync::atomic::AtomicUsize>,
) -> Vec<(&'static str, String)> {
    let mut acked = Vec::new();
    for i in 0.. {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let user = format!("{prefix}-{i}");
        let members = format!("{base}/api/organization/{org}/members");
        let steps: [(&'static str, reqwest::RequestBuilder); 3] = [
            (
                "org.member.add",
                client.post(&members).json(&json!({"userId": user})),
            ),
            (
                "org.role.member.add",
                client
                    .patch(format!("{members}/{user}"))
                    .json(&json!({"role": "admin"})),
            ),
            (
                "org.member.remove",
                client.delete(format!("{members}/{user}")),
            ),
        ];
        for (action, request) in steps {
            match request.bearer_auth(&token).send().await {
                Ok(response) if response.status().is_success() => {
                    acked.push((action, user.clone()));
                    progress.fetch_add(1, Ordering::Relaxed);
                }
                Ok(response) => panic!("{action} {user}: {}", response.status()),
                // The server is gone: the loop is over.
                Err(_) => return acked,
            }
        }
    }
    acked
}

#[tokio::test]
async fn no_acknowledged_mutation_loses_its_event_on_a_crash_or_a_stop() {
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let token = user_token("alice");

    let mut server = start(&url, port);
    wait_healthy(&client, &base).await;
    let org = create_org(&client, &base, &token, "crashy").await;
    let acked = Arc::new(Mutex::new(vec![("org.create", org.clone())]));

    // 1. SIGKILL in the middle of the loop.
    let stop = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let looping = tokio::spawn(mutate_until_gone(
        client.clone(),
        base.clone(),
        org.clone(),
        token.clone(),
        "killed",
        stop.clone(),
        progress.clone(),
    ));
    busy_for_a_while(&progress).await;
    server.kill().unwrap();
    server.wait().unwrap();
    let killed_phase = looping.await.unwrap();
    let in_killed_phase = killed_phase.len();
    acked.lock().unwrap().extend(killed_phase);

    // 2. Restarted on the same database; then SIGTERM in the middle of the loop.
    let mut server = start(&url, port);
    wait_healthy(&client, &base).await;
    let looping = tokio::spawn(mutate_until_gone(
        client.clone(),
        base.clone(),
        org.clone(),
        token.clone(),
        "stopped",
        stop.clone(),
        progress.clone(),
    ));
    busy_for_a_while(&progress).await;
    terminate(&server);
    let exit = server.wait().unwrap();
    assert!(exit.success(), "the server did not stop cleanly: {exit}");
    let stopped_phase = looping.await.unwrap();
    let in_stopped_phase = stopped_phase.len();
    acked.lock().unwrap().extend(stopped_phase);

    // 3. Restarted once more: the relay picks up whatever the stops left.
    let mut server = start(&url, port);
    wait_healthy(&client, &base).await;
    let store = Store::connect(&url).await.unwrap();
    let mut drained = false;
    for _ in 0..300 {
        if store.outbox_depth().await.unwrap().rows == 0 {
            drained = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        drained,
        "the relay did not drain the outbox after the restart"
    );
    terminate(&server);
    server.wait().unwrap();

    // Every acknowledged mutation has its event; the chain verifies.
    let mut chained = Vec::new();
    let mut verifier = audit_chain::ChainVerifier::new();
    let mut after = 0;
    loop {
        let batch = store.chain_batch(&org, after, 1000).await.unwrap();
        let Some(last) = batch.last() else { break };
        after = last.seq;
        for row in &batch {
            assert!(verifier.push(row), "the chain breaks at seq {}", row.seq);
            chained.push((
                row.action.clone(),
                row.target_id.clone().unwrap_or_default(),
            ));
        }
    }
    let verdict = verifier.finish();
    assert!(verdict.ok, "{verdict:?}");
    let acked = acked.lock().unwrap().clone();
    let missing: Vec<_> = acked
        .iter()
        .filter(|(action, target)| {
            !chained
                .iter()
                .any(|(a, t)| a == action && (t == target || *action == "org.create"))
        })
        .collect();
    eprintln!(
        "crash test: {} acknowledged mutations ({in_killed_phase} before SIGKILL, {in_stopped_phase} before SIGTERM), {} chained events, {} missing",
        acked.len(),
        chained.len(),
        missing.len()
    );
    assert!(
        in_killed_phase > 10 && in_stopped_phase > 10,
        "the loops did too little"
    );
    assert!(
        missing.is_empty(),
        "acknowledged without an event: {missing:?}"
    );
    store.close().await;
    drop_postgres(&admin_url, &name).await;
}

/// A server like [`start_with`], logging at `debug` (sqlx's statements included)
/// into `log`, so that a test can read everything it wrote.
pub fn start_logged(url: &str, port: u16, vars: &[(&str, &str)], log: &std::path::Path) -> Running {
    let file = std::fs::File::create(log).unwrap();
    Running(
        Command::new(env!("CARGO_BIN_EXE_compliance"))
            .arg("serve")
            .env("QUOTA_TIER_DEVELOPER_SEATS", "-1")
            .envs(vars.iter().copied())
            .env("DATABASE_URL", url)
            .env("JWT_SECRET", SECRET)
            .env("COMPLIANCE_SERVICE_PORT", port.to_string())
            .env("RUST_LOG", "debug")
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap(),
    )
}
