//! `ComplianceClient`: how a plugin or pipeline service asks the compliance service
//! whether an upload may proceed, failing closed.
//!
//! ```sh
//! cargo run -p adapters --example compliance_client
//! ```
//!
//! It starts the reference server in-process (a real service points the client at
//! its deployment, e.g. `http://compliance:3000`), registers one rule, then validates
//! a passing and a blocked plugin, and asks a server that is not there.

mod support;

use adapters::client::{ComplianceClient, Entity};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), String> {
    let demo = support::start().await?;
    let owner = demo.user("alice");
    let org = demo.organization(&owner, "acme").await?;
    demo.call(
        reqwest::Method::POST,
        "/api/compliance/rules",
        &owner,
        Some(&org),
        json!({"name": "Versions are pinned", "target": "plugin", "severity": "error",
               "field": "version", "operator": "neq", "value": "latest"}),
    )
    .await?;

    // What the plugin service embeds: the URL, its service token; 5 s budget.
    let client = ComplianceClient::new(&demo.base, &demo.service("plugin-service"));

    let passed = client
        .validate(
            &org,
            Entity::Plugin,
            &json!({"name": "eslint", "version": "8.57.0"}),
            Some("plugin-1"),
        )
        .await
        .map_err(|r| format!("a pinned plugin was refused: {}", r.envelope()))?;
    println!(
        "eslint 8.57.0: may proceed ({} warnings)",
        passed.warnings.len()
    );

    match client
        .validate(
            &org,
            Entity::Plugin,
            &json!({"name": "eslint", "version": "latest"}),
            Some("plugin-2"),
        )
        .await
    {
        Ok(_) => return Err("an unpinned plugin passed".to_owned()),
        // The service answers its own caller with this envelope, as it is.
        Err(refusal) => println!(
            "eslint latest: {} {}\n{:#}",
            refusal.status,
            refusal.code,
            refusal.envelope()
        ),
    }

    // Nothing listens here: the check cannot be made, so the upload must not proceed.
    let nowhere = ComplianceClient::new("http://127.0.0.1:9", &demo.service("plugin-service"));
    match nowhere
        .validate(&org, Entity::Plugin, &json!({"version": "1.0.0"}), None)
        .await
    {
        Ok(_) => Err("an unreachable service let an upload through".to_owned()),
        Err(refusal) if refusal.status == 503 => {
            println!(
                "unreachable: {} {} (fail closed)",
                refusal.status, refusal.code
            );
            Ok(())
        }
        Err(refusal) => Err(format!("unexpected: {}", refusal.envelope())),
    }
}
