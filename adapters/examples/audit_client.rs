//! `AuditClient`: how another service records audit events in the compliance
//! service's tamper-evident chain, without losing one when it is down.
//!
//! ```sh
//! cargo run -p adapters --example audit_client
//! ```
//!
//! It starts the reference server in-process, delivers an event, spools two more
//! while the service is unreachable, redelivers them (each once, under its key), and
//! reads the organization's chain back.

mod support;

use adapters::emitter::{AuditClient, Delivery, OutgoingEvent};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), String> {
    let demo = support::start().await?;
    let owner = demo.user("alice");
    let org = demo.organization(&owner, "acme").await?;
    let spool = std::env::temp_dir().join(format!("audit-spool-{}", uuid::Uuid::new_v4()));
    let token = demo.service("pipeline-service");

    // Delivered at once.
    let client = AuditClient::new(&demo.base, &token, &spool, 1000).map_err(|e| e.to_string())?;
    let mut event = OutgoingEvent::new("pipeline.create", "alice", &org);
    event.target_type = Some("pipeline".to_owned());
    event.target_id = Some("deploy".to_owned());
    let delivered = client.deliver_or_spool(event).await;
    println!("pipeline.create: {delivered:?}");
    if delivered != Delivery::Delivered {
        return Err("the event was not delivered".to_owned());
    }

    // The service is unreachable: the events wait in the spool, on disk.
    let offline =
        AuditClient::new("http://127.0.0.1:9", &token, &spool, 1000).map_err(|e| e.to_string())?;
    for target in ["build", "release"] {
        let mut event = OutgoingEvent::new("pipeline.update", "alice", &org);
        event.target_type = Some("pipeline".to_owned());
        event.target_id = Some(target.to_owned());
        println!(
            "pipeline.update {target} (offline): {:?}",
            offline.deliver_or_spool(event).await
        );
    }
    println!("spooled: {}", offline.spooled());

    // Back online: the spool drains, each event once under its idempotency key.
    let redelivered = client.redeliver().await;
    println!(
        "redelivered: {redelivered}, spooled now: {}",
        client.spooled()
    );
    if redelivered != 2 || client.spooled() != 0 {
        return Err("the spool did not drain".to_owned());
    }

    // The organization's chain holds all three, in order, and verifies.
    let mut seen = 0;
    for _ in 0..50 {
        let page = demo
            .call(
                reqwest::Method::GET,
                "/api/audit?targetType=pipeline&limit=10",
                &owner,
                Some(&org),
                json!(null),
            )
            .await;
        seen = page
            .ok()
            .and_then(|p| {
                p.get("events")
                    .and_then(serde_json::Value::as_array)
                    .map(Vec::len)
            })
            .unwrap_or(0);
        if seen >= 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    println!("chained events of acme: {seen}");
    let _ = std::fs::remove_dir_all(&spool);
    if seen < 3 {
        return Err("the events are not in the chain".to_owned());
    }
    Ok(())
}
