//! Times the server's streaming verification of a long chain stored in the database.
//!
//! Seals COUNT events (default 1,000,000) for one chain in memory, in batches, and
//! bulk-inserts them, then verifies the stored chain the way `GET /api/audit/verify`
//! does, printing how long each step took.
//!
//!   DATABASE_URL=postgres://postgres@127.0.0.1/bench COUNT=1000000 \
//!     cargo run --release -p adapters --example verify_million

use std::time::Instant;

use adapters::storage::{pool_for_tests, Store};
use audit_chain::{seal, AuditEvent, ChainHead};
use chrono::Utc;

const BATCH: usize = 500;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("DATABASE_URL")?;
    let count: usize = std::env::var("COUNT")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(1_000_000);
    let chain = format!("bench-{}", uuid::Uuid::new_v4().simple());
    let store = Store::connect(&url).await?;
    adapters::services::operations::migrate(&store).await?;
    let now = Utc::now();
    let started = Instant::now();
    let mut head = ChainHead::genesis(chain.clone());
    let mut written = 0;
    while written < count {
        let n = BATCH.min(count - written);
        let mut rows = Vec::with_capacity(n);
        for i in 0..n {
            let event = AuditEvent {
                id: uuid::Uuid::new_v4().to_string(),
                action: "plugin.upload".into(),
                actor_id: "user-1".into(),
                actor_email: Some("ada@example.com".into()),
                org_id: chain.clone(),
                affected_org_id: None,
                target_type: Some("plugin".into()),
                target_id: Some(format!("plugin-{}", written + i)),
                details: serde_json::json!({"n": written + i, "build": {"queue": "tier", "attempt": 1}}),
                outcome: Some("success".into()),
                occurred_at: now,
                service: Some("plugin".into()),
                idempotency_key: None,
            };
            let (row, next) = seal(&head, event, now)?;
            head = next;
            rows.push(row);
        }
        let mut sql = String::from(
            "INSERT INTO audit_events (id, chain_key, seq, action, actor_id, actor_email, org_id, affected_org_id, target_type, target_id,
             details, outcome, occurred_at, created_at, service, idempotency_key, redaction_version, prev_hash, hash) VALUES ",
        );
        for r in 0..rows.len() {
            let base = r * 19;
            let params: Vec<String> = (1..=19).map(|p| format!("${}", base + p)).collect();
            sql.push_str(if r == 0 { "(" } else { ",(" });
            sql.push_str(&params.join(","));
            sql.push(')');
        }
        if store.dialect() == adapters::storage::Dialect::Sqlite {
            sql = sql.replace('$', "?");
        }
        let mut query = sqlx::query(&sql).persistent(false);
        for row in &rows {
            query = query
                .bind(row.id.clone())
                .bind(row.chain_key.clone())
                .bind(row.seq as i64)
                .bind(row.action.clone())
                .bind(row.actor_id.clone())
                .bind(row.actor_email.clone())
                .bind(row.org_id.clone())
                .bind(row.affected_org_id.clone())
                .bind(row.target_type.clone())
                .bind(row.target_id.clone())
                .bind(row.details.to_string())
                .bind(row.outcome.clone())
                .bind(audit_chain::format_timestamp(&row.occurred_at))
                .bind(audit_chain::format_timestamp(&row.created_at))
                .bind(row.service.clone())
                .bind(row.idempotency_key.clone())
                .bind(i64::from(row.redaction_version))
                .bind(row.prev_hash.clone())
                .bind(row.hash.clone());
        }
        query.execute(pool_for_tests(&store)).await?;
        written += n;
    }
    println!(
        "sealed and stored {count} events in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    let verdict = adapters::services::audit::verify_chain(&store, &chain, None)
        .await
        .map_err(|e| e.to_string())?;
    println!(
        "verified {} rows (ok={}, last seq {:?}) in {:.1} s",
        verdict.chain.count,
        verdict.ok,
        verdict.chain.last_seq,
        started.elapsed().as_secs_f64()
    );
    sqlx::query(&if store.dialect() == adapters::storage::Dialect::Sqlite {
        "DELETE FROM audit_events WHERE chain_key = ?1".to_owned()
    } else {
        "DELETE FROM audit_events WHERE chain_key = $1".to_owned()
    })
    .bind(&chain)
    .execute(pool_for_tests(&store))
    .await?;
    Ok(())
}
