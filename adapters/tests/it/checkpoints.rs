//! Signed checkpoints: a truncated or rewritten chain becomes visible.

use crate::api::{pagination, Answer};
use adapters::workers::checkpoints;
use audit_chain::{seal, AuditEvent, ChainHead, NoteSigner};

use super::*;

async fn post(app: &TestApp, org: &str, from: usize, to: usize) {
    let token = app.service_token("plugin");
    for n in from..to {
        let (status, body) = app
            .post_event(
                &token,
                Some(&format!("{org}-{n}")),
                json!({"action": "plugin.upload", "actorId": "u", "orgId": org, "targetType": "plugin",
                       "targetId": format!("p{n}"), "details": {"n": n}}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
}

fn settings() -> adapters::config::CheckpointSettings {
    test_config(&[]).checkpoints.unwrap()
}

async fn sign(app: &TestApp, at: chrono::DateTime<Utc>) -> usize {
    checkpoints::round(&app.store, &settings(), at)
        .await
        .unwrap()
}

/// The chain's verdict as the API answers it, read by key (the checkpoint part is
/// free-form).
async fn verify_report(app: &TestApp, org: &str) -> Value {
    json!(app.verify(org).await)
}

async fn checkpoints_make_truncation_and_rewrites_visible(app: &TestApp) {
    let now = Utc::now();
    // Truncation: the newest three rows deleted (and the head set back).
    post(app, "org-trunc", 0, 10).await;
    assert!(sign(app, now).await >= 1);
    let report = verify_report(app, "org-trunc").await;
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["checkpoints"]["checked"], 1, "{report}");
    assert_eq!(report["checkpoints"]["latestSeq"], 10, "{report}");
    let rows = app.store.chain_batch("org-trunc", 0, 100).await.unwrap();
    app.sql("DELETE FROM audit_events WHERE chain_key = 'org-trunc' AND seq > 7")
        .await;
    app.sql(&format!(
        "UPDATE audit_chain_heads SET seq = 7, hash = '{}' WHERE chain_key = 'org-trunc'",
        rows[6].hash
    ))
    .await;
    let report = verify_report(app, "org-trunc").await;
    assert_eq!(report["ok"], false, "{report}");
    assert_eq!(
        report["checkpoints"]["problem"],
        json!({"kind": "truncated", "seq": 10, "lastSeq": 7}),
        "{report}"
    );

    // A rewrite: row 5 changed and every later hash recomputed; the chain links again,
    // the checkpoint does not agree.
    post(app, "org-rewrite", 0, 10).await;
    sign(app, now).await;
    let rows = app.store.chain_batch("org-rewrite", 0, 100).await.unwrap();
    let mut head = ChainHead::after(&rows[3]);
    for row in &rows[4..] {
        let mut details = row.details.clone();
        if row.seq == 5 {
            details = json!({"n": "rewritten"});
        }
        let event = AuditEvent {
            id: row.id.clone(),
            action: row.action.clone(),
            actor_id: row.actor_id.clone(),
            actor_email: row.actor_email.clone(),
            org_id: row.org_id.clone(),
            affected_org_id: row.affected_org_id.clone(),
            target_type: row.target_type.clone(),
            target_id: row.target_id.clone(),
            details,
            outcome: row.outcome.clone(),
            occurred_at: row.occurred_at,
            service: row.service.clone(),
            idempotency_key: row.idempotency_key.clone(),
        };
        let (sealed, next) = seal(&head, event, row.created_at).unwrap();
        app.sql(&format!(
            "UPDATE audit_events SET details = '{}', prev_hash = '{}', hash = '{}' WHERE id = '{}'",
            sealed.details, sealed.prev_hash, sealed.hash, sealed.id
        ))
        .await;
        head = next;
    }
    let report = verify_report(app, "org-rewrite").await;
    assert_eq!(
        report["brokenAt"],
        Value::Null,
        "the rewritten chain links: {report}"
    );
    assert_eq!(report["ok"], false, "{report}");
    assert_eq!(
        report["checkpoints"]["problem"]["kind"], "rewritten",
        "{report}"
    );
    assert_eq!(report["checkpoints"]["problem"]["seq"], 10, "{report}");

    // A checkpoint signed by another key: refused.
    post(app, "org-foreign", 0, 3).await;
    let other = NoteSigner::from_seed("PeterNeumann", [3; 32]).unwrap();
    let rows = app.store.chain_batch("org-foreign", 0, 100).await.unwrap();
    let note = audit_chain::Checkpoint {
        deployment: "test.example".into(),
        chain_key: "org-foreign".into(),
        seq: 3,
        hash: rows[2].hash.clone(),
        time: now,
    }
    .sign(&other)
    .unwrap();
    app.store
        .store_checkpoint(&adapters::storage::CheckpointRecord {
            chain_key: "org-foreign".into(),
            seq: 3,
            hash: rows[2].hash.clone(),
            signed_at: now,
            note,
        })
        .await
        .unwrap();
    let report = verify_report(app, "org-foreign").await;
    assert_eq!(report["ok"], false, "{report}");
    assert_eq!(
        report["checkpoints"]["problem"],
        json!({"kind": "badSignature", "seq": 3})
    );

    // A pruned prefix with checkpoints: still ok.
    post(app, "org-pruned", 0, 5).await;
    sign(app, now).await;
    post(app, "org-pruned", 5, 10).await;
    sign(app, now + chrono::Duration::seconds(301)).await;
    app.sql("DELETE FROM audit_events WHERE chain_key = 'org-pruned' AND seq <= 6")
        .await;
    let report = verify_report(app, "org-pruned").await;
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["checkpoints"]["pruned"], 1, "{report}");
    assert_eq!(report["checkpoints"]["checked"], 2, "{report}");
}

async fn checkpoints_are_listed_for_audit_readers_and_the_key_is_public(app: &TestApp) {
    let org = app.org("cp-owner", "checkpointed").await;
    post(app, &org, 0, 4).await;
    sign(app, Utc::now()).await;
    let owner = app.token("cp-owner", "cp-owner@example.com");
    let Answer(status, body) = app
        .by(&owner)
        .org(&org)
        .get(format!("/api/audit/checkpoints?orgId={org}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["latest"]["seq"], body["checkpoints"][0]["seq"]);
    assert_eq!(pagination(&body).total, 1);
    let note = body["latest"]["note"].as_str().unwrap();
    assert!(
        note.starts_with(&format!("test.example/audit/{org}\n")),
        "{note}"
    );
    // Another organization's member: refused.
    let stranger = app.token("stranger", "s@example.com");
    let Answer(status, _) = app
        .by(&stranger)
        .org(&org)
        .get(format!("/api/audit/checkpoints?orgId={org}"))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // The verifier key, as text, verifies the note.
    let response = app
        .router
        .clone()
        .oneshot(
            Request::get("/api/audit/checkpoints/key")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let key = String::from_utf8(
        response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
    .unwrap();
    let verifier = audit_chain::NoteVerifier::from_verifier_key(key.trim()).unwrap();
    assert!(audit_chain::Checkpoint::open(note, &verifier).is_ok());
}

on_both_backends!(
    checkpoints_make_truncation_and_rewrites_visible,
    checkpoints_are_listed_for_audit_readers_and_the_key_is_public,
);

/// PostgreSQL, two server processes on one database: each checkpoint is signed once
/// (the lease), whichever replica signs it.
#[tokio::test]
async fn two_replicas_sign_each_checkpoint_once() {
    use super::crash::{start_with, wait_healthy};
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let dirs: Vec<std::path::PathBuf> = (0..2)
        .map(|i| std::env::temp_dir().join(format!("compliance-cp-{i}-{}", uuid::Uuid::new_v4())))
        .collect();
    let ports = super::crash::two_free_ports();
    let client = reqwest::Client::new();
    let mut servers = Vec::new();
    for (port, dir) in ports.iter().zip(&dirs) {
        let dir = dir.display().to_string();
        servers.push(start_with(
            &url,
            *port,
            &[
                ("AUDIT_CHECKPOINT_KEY", CHECKPOINT_KEY),
                ("AUDIT_CHECKPOINT_DIR", &dir),
                ("AUDIT_CHECKPOINT_INTERVAL_SECONDS", "1"),
                ("AUDIT_CHECKPOINT_EVENTS", "3"),
            ],
        ));
        wait_healthy(&client, &format!("http://127.0.0.1:{port}")).await;
    }
    let keys = TokenKeys::hs256(SECRET);
    let mut claims = Claims::user(
        "plugin",
        None,
        Utc::now(),
        std::time::Duration::from_secs(600),
    );
    claims.service = Some("plugin".into());
    let token = keys.sign(&claims).unwrap();
    for n in 0..60 {
        let port = ports[n % 2];
        let org = format!("org-{}", n % 3);
        let response = client
            .post(format!("http://127.0.0.1:{port}/api/audit/events"))
            .bearer_auth(&token)
            .header("idempotency-key", format!("k{n}"))
            .json(&json!({"action": "plugin.upload", "actorId": "u", "orgId": org, "targetType": "plugin", "targetId": format!("p{n}")}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        tokio::time::sleep(std::time::Duration::from_millis(80)).await;
    }
    // Let the signer catch up with the last appends, then stop both.
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    for server in &servers {
        super::crash::terminate(server);
    }
    for mut server in servers {
        server.wait().unwrap();
    }
    let store = Store::connect(&url).await.unwrap();
    let stored: Vec<(String, i64)> =
        sqlx::query_as("SELECT chain_key, seq FROM audit_checkpoints ORDER BY chain_key, seq")
            .fetch_all(adapters::storage::pool_for_tests(&store))
            .await
            .unwrap();
    let mut files = Vec::new();
    for dir in &dirs {
        for chain in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            for note in std::fs::read_dir(chain.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                files.push(note.path().strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    let distinct: std::collections::BTreeSet<_> = files.iter().cloned().collect();
    eprintln!(
        "two replicas: {} checkpoints stored, {} files written ({} distinct) over {} chains",
        stored.len(),
        files.len(),
        distinct.len(),
        3
    );
    assert!(stored.len() >= 6, "too few checkpoints: {stored:?}");
    assert_eq!(
        files.len(),
        stored.len(),
        "a checkpoint was signed twice or not written"
    );
    assert_eq!(distinct.len(), files.len());
    // Every chain's newest state is checkpointed.
    for org in ["org-0", "org-1", "org-2"] {
        let head: i64 = sqlx::query_scalar(&format!(
            "SELECT seq FROM audit_chain_heads WHERE chain_key = '{org}'"
        ))
        .fetch_one(adapters::storage::pool_for_tests(&store))
        .await
        .unwrap();
        assert!(
            stored.iter().any(|(c, s)| c == org && *s == head),
            "{org} at {head}: {stored:?}"
        );
    }
    store.close().await;
    drop_postgres(&admin_url, &name).await;
    for dir in dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
}
