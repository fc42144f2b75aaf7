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
