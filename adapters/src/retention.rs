//! Retention: audit rows older than `AUDIT_RETENTION_DAYS` are pruned daily, as a
//! prefix of each chain (verification tolerates that). Pruning is idempotent, so
//! several replicas doing it is harmless.

use std::time::Duration;

use chrono::Utc;

use crate::storage::Store;

/// Prunes now, then once a day, forever: audit rows past `retention_days`, and
/// compliance check-log entries past `check_retention_days`.
pub async fn prune_daily(store: Store, retention_days: u32, check_retention_days: u32) {
    let mut every = tokio::time::interval(Duration::from_secs(24 * 3600));
    loop {
        every.tick().await;
        let cutoff = Utc::now() - chrono::Duration::days(i64::from(retention_days));
        match store.prune_audit(cutoff).await {
            Ok(0) => {}
            Ok(rows) => tracing::info!(rows, %cutoff, "pruned audit rows past retention"),
            Err(error) => tracing::warn!(%error, "audit retention pruning failed"),
        }
        let cutoff = Utc::now() - chrono::Duration::days(i64::from(check_retention_days));
        match store.prune_checks(cutoff).await {
            Ok(0) => {}
            Ok(rows) => tracing::info!(rows, %cutoff, "pruned compliance check log"),
            Err(error) => tracing::warn!(%error, "check log pruning failed"),
        }
    }
}
