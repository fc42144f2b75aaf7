//! Organization exports (issue 54): a background job's archive, downloaded, verified
//! offline by `compliance export verify` (and its chain by `compliance audit
//! verify`), a changed byte found; secrets left out; 409, 410 and the refusals; and
//! an organization of 100,000 pipelines exported by a server process whose memory
//! stays flat.

use crate::api::{data_of, Answer};
use adapters::code::ErrorCode;
use adapters::http::wire::ExportJob;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use sha2::Digest;
use tower::ServiceExt;

use super::*;

const WEBHOOK_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// A raw GET: (status, headers, bytes).
async fn fetch(
    app: &TestApp,
    path: &str,
    token: &str,
) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let request = Request::builder()
        .uri(path)
        .header("authorization", format!("Bearer {token}"))
        .body(Body::empty())
        .unwrap();
    let response = app.router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, headers, bytes.to_vec())
}

fn temp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("export-test-{}", adapters::new_id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// `compliance <args>`: (exit code, standard output as JSON when it is).
fn compliance(args: &[&str]) -> (Option<i32>, Value, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_compliance"))
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (
        output.status.code(),
        serde_json::from_str(&stdout).unwrap_or(Value::Null),
        format!("{stdout}\n{stderr}"),
    )
}

async fn an_export_is_made_in_the_background_and_verifies_offline(app: &TestApp) {
    let hook_app = app.beside(&[("WEBHOOK_ALLOW_PRIVATE", "true")]).await;
    let app = &hook_app;
    let (system, root) = app.system().await;
    let acme = app.org("alice", "acme").await;
    let alice = app.token("alice", "alice@example.com");
    app.by(&alice)
        .org(&acme)
        .post("/api/compliance/rules")
        .json(
            json!({"name": "Private only", "target": "pipeline", "severity": "error",
                        "field": "accessModifier", "operator": "eq", "value": "private"}),
        )
        .await
        .expect(StatusCode::CREATED);
    let Answer(status, body) = super::notifications::prefer(
        app,
        &alice,
        &acme,
        json!({"webhookUrl": "http://127.0.0.1:9/hook", "webhookSecret": WEBHOOK_SECRET}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // A signed checkpoint of acme's chain (once chained), for the archive to carry.
    app.relay().await;
    let settings = test_config(&[]).checkpoints.unwrap();
    adapters::workers::checkpoints::round(&app.store, &settings, Utc::now())
        .await
        .unwrap();

    // Refusals.
    let admin_path = format!("/api/admin/organizations/{acme}/exports");
    app.by(&alice)
        .post(&admin_path)
        .await
        .refused(ErrorCode::Forbidden);
    let mallory = app.token("mallory", "m@example.com");
    let own_path = format!("/api/organization/{acme}/exports");
    let Answer(status, body) = app.by(&mallory).post(&own_path).await;
    assert!(
        status == StatusCode::FORBIDDEN || status == StatusCode::NOT_FOUND,
        "{body}"
    );

    // Asked by its owner: 202, one at a time.
    let asked: ExportJob = app
        .by(&alice)
        .post(&own_path)
        .await
        .expect(StatusCode::ACCEPTED)
        .data();
    assert_eq!(asked.status, "queued");
    let id = asked.id;
    app.by(&root)
        .post(&admin_path)
        .await
        .refused(ErrorCode::Conflict);
    let Answer(status, body) = app
        .by(&alice)
        .get(format!("{own_path}/{id}/download"))
        .await;
    assert_eq!(
        code(status, &body),
        ErrorCode::Conflict,
        "not done yet: {body}"
    );

    // A replica's worker makes it (once the request's own event is chained).
    app.relay().await;
    assert!(
        adapters::services::exports::run_due(&app.state.infra.store, "test", Utc::now())
            .await
            .unwrap()
    );
    assert!(
        !adapters::services::exports::run_due(&app.state.infra.store, "test", Utc::now())
            .await
            .unwrap()
    );
    let done: ExportJob = app
        .by(&root)
        .get(format!("{admin_path}/{id}"))
        .await
        .expect(StatusCode::OK)
        .data();
    assert_eq!(done.status, "done", "{done:?}");
    let url = done.download_url.clone().unwrap();
    assert_eq!(url, format!("{admin_path}/{id}/download"));
    let sha = done.sha256.clone().unwrap();
    let (status, headers, bytes) = fetch(app, &url, &root).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "application/zip");
    assert_eq!(headers["x-content-sha256"].to_str().unwrap(), sha);
    assert_eq!(hex::encode(sha2::Sha256::digest(&bytes)), sha);
    assert_eq!(done.size_bytes, Some(bytes.len() as u64));
    // The owner downloads it through the organization's own route too.
    let (status, _, same) = fetch(app, &format!("{own_path}/{id}/download"), &alice).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(same, bytes);
    let (status, _, _) = fetch(app, &format!("{own_path}/{id}/download"), &mallory).await;
    assert!(status == StatusCode::FORBIDDEN || status == StatusCode::NOT_FOUND);

    // Verified offline, with the checkpoint's key.
    let path = temp("export.zip");
    std::fs::write(&path, &bytes).unwrap();
    let (status, _, key) = fetch(app, "/api/audit/checkpoints/key", "unused").await;
    assert_eq!(status, StatusCode::OK);
    let key = String::from_utf8(key).unwrap().trim().to_owned();
    let file = path.to_str().unwrap();
    let (exit, report, text) = compliance(&["export", "verify", file, "--key", &key]);
    assert_eq!(exit, Some(0), "{text}");
    assert_eq!(report["ok"], true);
    assert_eq!(report["orgId"], acme.as_str());
    assert!(report["audit"]["count"].as_u64().unwrap() > 0, "{report}");
    assert_eq!(report["audit"]["checkpoints"]["ok"], true, "{report}");
    // What it holds, and what it does not.
    let mut archive = zip::ZipArchive::new(std::fs::File::open(&path).unwrap()).unwrap();
    let mut read = |name: &str| {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut archive.by_name(name).unwrap(), &mut text).unwrap();
        text
    };
    assert!(read("rules.jsonl").contains("Private only"));
    let preferences = read("notification-preferences.jsonl");
    assert!(
        preferences.contains("http://127.0.0.1:9/hook"),
        "{preferences}"
    );
    assert!(!preferences.contains("webhook_secret") && !preferences.contains(WEBHOOK_SECRET));
    let audit = read("audit.jsonl");
    assert!(audit.starts_with("{\"checkpoint\""), "the checkpoint first");
    assert!(audit.contains("admin.org.export"));
    assert!(!String::from_utf8_lossy(&bytes).contains(WEBHOOK_SECRET));
    // Its chain, alone, is what `compliance audit verify` reads.
    let chain = temp("audit.jsonl");
    std::fs::write(&chain, audit).unwrap();
    let (exit, report, text) =
        compliance(&["audit", "verify", chain.to_str().unwrap(), "--key", &key]);
    assert_eq!(exit, Some(0), "{text}");
    assert_eq!(report["ok"], true);

    // One byte changed inside a file: found.
    let mut tampered = bytes.clone();
    tampered[120] ^= 0x20;
    let bad = temp("tampered.zip");
    std::fs::write(&bad, &tampered).unwrap();
    let (exit, report, text) =
        compliance(&["export", "verify", bad.to_str().unwrap(), "--key", &key]);
    assert_eq!(exit, Some(1), "{text}");
    assert_eq!(report["ok"], false);
    assert!(
        report["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["ok"] == false),
        "{report}"
    );

    // Audited where acme sees it.
    let events = app.audited("admin.org.export").await;
    assert!(events.iter().any(|e| e.chain_key == acme));
    assert!(events.iter().any(|e| e.chain_key == system));

    // After its 24 hours: 410, and the archive is forgotten.
    app.sql(&format!(
        "UPDATE org_exports SET expires_at = '2020-01-01T00:00:00.000000Z' WHERE id = '{id}'"
    ))
    .await;
    let Answer(status, body) = app.by(&root).get(&url).await;
    assert_eq!(code(status, &body), ErrorCode::Gone, "{body}");
    assert_eq!(
        adapters::services::exports::forget_expired(&app.state.infra.store, Utc::now())
            .await
            .unwrap(),
        1
    );
    let expired: ExportJob = app.by(&root).get(format!("{admin_path}/{id}")).await.data();
    assert_eq!(expired.status, "expired");
    assert!(expired.download_url.is_none());
    // Another may be asked for now.
    app.by(&root)
        .post(&admin_path)
        .await
        .expect(StatusCode::ACCEPTED);
    hook_app.stop().await;
}

/// The peak resident memory of a process, in KiB.
fn peak_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// 100,000 pipelines (about 120 MB of rows as JSON) exported by a server process:
/// its peak memory grows by far less than the data (pages of 1,000 rows, written as
/// they come), the archive verifies offline and a changed byte is found.
#[tokio::test]
async fn an_organization_of_100000_pipelines_exports_with_flat_memory() {
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let client = reqwest::Client::new();
    let port = super::crash::free_port();
    let server =
        super::crash::start_with(&url, port, &[("BOOTSTRAP_SUPERADMIN_EMAILS", ROOT_EMAIL)]);
    let base = format!("http://127.0.0.1:{port}");
    super::crash::wait_healthy(&client, &base).await;
    let root = adapters::auth::TokenKeys::hs256(SECRET)
        .sign(&adapters::auth::Claims::user(
            "root",
            Some(ROOT_EMAIL),
            Utc::now(),
            Duration::from_secs(3600),
        ))
        .unwrap();
    super::crash::create_org(&client, &base, &root, "system").await;
    let acme = super::crash::create_org(&client, &base, &root, "acme").await;
    let store = Store::connect(&url).await.unwrap();
    let props = format!("{{\"stages\": [{{\"name\": \"{}\"}}]}}", "x".repeat(1000));
    sqlx::query(&format!(
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 100000)
         INSERT INTO pipelines (id, org_id, project, organization, pipeline_name, access_modifier, props,
             compliance, compliance_result, created_by, created_at, updated_at)
         SELECT 'p-' || x, '{acme}', 'shop', 'acme', 'pipe-' || x, 'private', '{props}',
             '{{\"result\":\"pass\",\"violations\":[]}}', 'pass', 'root',
             '2026-11-28T00:00:00.000000Z', '2026-11-28T00:00:00.000000Z' FROM n"
    ))
    .execute(adapters::storage::pool_for_tests(&store))
    .await
    .unwrap();
    let before = peak_kib(server.id());
    let response = client
        .post(format!("{base}/api/admin/organizations/{acme}/exports"))
        .bearer_auth(&root)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let id = data_of::<ExportJob>(response).await.id;
    let started = Instant::now();
    let done = loop {
        let job: ExportJob = data_of(
            client
                .get(format!(
                    "{base}/api/admin/organizations/{acme}/exports/{id}"
                ))
                .bearer_auth(&root)
                .send()
                .await
                .unwrap(),
        )
        .await;
        match job.status.as_str() {
            "done" => break job,
            "failed" => panic!("{job:?}"),
            _ => {}
        }
        assert!(started.elapsed() < Duration::from_secs(300), "{job:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let grown_mib = (peak_kib(server.id()).saturating_sub(before)) / 1024;
    println!(
        "100,000 pipelines exported in {:?}, {} bytes, the server's peak memory grew by {grown_mib} MiB",
        started.elapsed(),
        done.size_bytes.unwrap_or_default()
    );
    assert!(
        grown_mib < 64,
        "the server's peak memory grew by {grown_mib} MiB"
    );
    let bytes = client
        .get(format!("{base}{}", done.download_url.as_deref().unwrap()))
        .bearer_auth(&root)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let path = temp("big.zip");
    std::fs::write(&path, &bytes).unwrap();
    let (exit, report, text) = compliance(&["export", "verify", path.to_str().unwrap()]);
    assert_eq!(exit, Some(0), "{text}");
    let pipelines = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "pipelines.jsonl")
        .cloned()
        .unwrap();
    assert_eq!(pipelines["ok"], true);
    let mut archive = zip::ZipArchive::new(std::fs::File::open(&path).unwrap()).unwrap();
    let manifest: Value =
        serde_json::from_reader(archive.by_name("manifest.json").unwrap()).unwrap();
    let lines = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "pipelines.jsonl")
        .unwrap()["lines"]
        .clone();
    assert_eq!(lines, 100_000);
    let mut tampered = bytes.to_vec();
    let middle = tampered.len() / 2;
    tampered[middle] ^= 0x01;
    std::fs::write(&path, &tampered).unwrap();
    let (exit, _, text) = compliance(&["export", "verify", path.to_str().unwrap()]);
    assert_ne!(exit, Some(0), "a changed byte must be found: {text}");
    super::crash::terminate(&server);
    store.close().await;
    drop_postgres(&admin_url, &name).await;
}

on_both_backends!(an_export_is_made_in_the_background_and_verifies_offline);
