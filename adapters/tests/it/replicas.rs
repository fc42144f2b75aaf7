//! Several server processes on one PostgreSQL database.

use std::time::{Duration, Instant};

use super::crash::{create_org, free_port, start_with, user_token, wait_healthy};
use super::*;

/// A rule changed through one replica is enforced by the other within a second,
/// although its cache would keep the old set for ten minutes.
#[tokio::test]
async fn a_rule_changed_on_one_replica_is_enforced_by_the_other_at_once() {
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let ports = [free_port(), free_port()];
    let client = reqwest::Client::new();
    let mut servers = Vec::new();
    for port in ports {
        servers.push(start_with(
            &url,
            port,
            &[("CACHE_TTL_COMPLIANCE_RULES", "600")],
        ));
        wait_healthy(&client, &format!("http://127.0.0.1:{port}")).await;
    }
    let (a, b) = (
        format!("http://127.0.0.1:{}", ports[0]),
        format!("http://127.0.0.1:{}", ports[1]),
    );
    let token = user_token("alice");
    let org = create_org(&client, &a, &token, "replicated").await;
    let blocked = |base: String| {
        let client = client.clone();
        let token = token.clone();
        let org = org.clone();
        async move {
            let body: Value = client
                .post(format!("{base}/api/compliance/validate/plugin/dry-run"))
                .bearer_auth(&token)
                .header("x-org-id", &org)
                .json(&json!({"attributes": {"version": "latest"}}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            body["data"]["blocked"].as_bool().unwrap()
        }
    };
    // B caches the organization's (empty) rule set.
    assert!(!blocked(b.clone()).await);
    // A rule is added through A.
    let response = client
        .post(format!("{a}/api/compliance/rules"))
        .bearer_auth(&token)
        .header("x-org-id", &org)
        .json(
            &json!({"name": "pinned", "target": "plugin", "severity": "error",
                      "field": "version", "operator": "neq", "value": "latest"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let changed = Instant::now();
    let mut enforced_after = None;
    while changed.elapsed() < Duration::from_secs(1) {
        if blocked(b.clone()).await {
            enforced_after = Some(changed.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for server in &servers {
        super::crash::terminate(server);
    }
    for mut server in servers {
        let _ = server.wait();
    }
    drop_postgres(&admin_url, &name).await;
    let after = enforced_after.expect("replica B still served the old rule set after a second");
    eprintln!("replica B enforced the new rule after {after:?}");
}

/// Two replicas' build workers on one queue: every build runs once and ends once.
#[tokio::test]
async fn two_replicas_build_each_plugin_exactly_once() {
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let dir = std::env::temp_dir().join(format!(
        "compliance-replica-builds-{}",
        uuid::Uuid::new_v4()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("builds.log");
    let command = format!("echo \"$PLUGIN_NAME\" >> {} && sleep 0.05", log.display());
    let ports = [free_port(), free_port()];
    let client = reqwest::Client::new();
    let mut servers = Vec::new();
    for port in ports {
        servers.push(start_with(
            &url,
            port,
            &[
                ("PLUGIN_BUILD_COMMAND", command.as_str()),
                ("PLUGIN_BUILD_POLL_MS", "10"),
                ("QUOTA_TIER_DEVELOPER_PLUGINS", "-1"),
            ],
        ));
        wait_healthy(&client, &format!("http://127.0.0.1:{port}")).await;
    }
    let bases = ports.map(|port| format!("http://127.0.0.1:{port}"));
    let token = user_token("alice");
    let org = create_org(&client, &bases[0], &token, "builders").await;
    let mut ids = Vec::new();
    for i in 0..30 {
        let archive = super::plugins::plugin_zip(&format!("p{i}"), "1.0.0");
        let boundary = "replica-boundary";
        let mut body = format!("--{boundary}\r\nContent-Disposition: form-data; name=\"plugin\"; filename=\"p.zip\"\r\n\r\n").into_bytes();
        body.extend_from_slice(&archive);
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        let answer: Value = client
            .post(format!("{}/api/plugins", bases[i % 2]))
            .bearer_auth(&token)
            .header("x-org-id", &org)
            .header(
                "content-type",
                format!("multipart/form-data; boundary={boundary}"),
            )
            .body(body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        ids.push(answer["data"]["id"].as_str().expect("uploaded").to_owned());
    }
    let started = Instant::now();
    for id in &ids {
        loop {
            let answer: Value = client
                .get(format!("{}/api/plugins/{id}", bases[1]))
                .bearer_auth(&token)
                .header("x-org-id", &org)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if answer["data"]["buildStatus"] == "completed" {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "builds stalled"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // Each builder ran once per plugin, whichever replica claimed it.
    let text = std::fs::read_to_string(&log).unwrap();
    let mut names: Vec<&str> = text.lines().collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!((before, names.len()), (30, 30), "{text}");
    // One terminal outcome each, once the replicas' relays have chained them.
    let store = Store::connect(&url).await.unwrap();
    let mut completed = Vec::new();
    for _ in 0..500 {
        let filter = adapters::storage::AuditFilter {
            action: Some("plugin.build.completed".to_owned()),
            ..Default::default()
        };
        completed = store.audit_events(&filter, 1000, 0, true).await.unwrap().0;
        if completed.len() >= 30 && store.outbox_depth().await.unwrap().rows == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut targets: Vec<_> = completed
        .iter()
        .filter_map(|e| e.target_id.clone())
        .collect();
    targets.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(targets, expected);
    store.close().await;
    for server in &servers {
        super::crash::terminate(server);
    }
    for mut server in servers {
        let _ = server.wait();
    }
    drop_postgres(&admin_url, &name).await;
    let _ = std::fs::remove_dir_all(&dir);
}
