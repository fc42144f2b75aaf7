//! Retention: audit rows older than `AUDIT_RETENTION_DAYS` are pruned daily, as a
//! prefix of each chain (verification tolerates that), the check log, ended scans
//! and the notification history older than `COMPLIANCE_AUDIT_RETENTION_DAYS`, and
//! the data of organizations deleted more than `ORG_RESTORE_DAYS` ago (their audit
//! chains stay), reported executions and build attempts past `REPORT_RETENTION_DAYS`, by the replica that holds the `retention` lease.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::Shutdown;
use crate::storage::{unit_of_work, Store, StoreError, StoreResult};

/// Prunes now, then once a day until shutdown: audit rows past `retention_days`, and
/// compliance check-log entries, ended scans and their results and the notification
/// history ([`Store::prune_history`]) past `check_retention_days`; increments'
/// idempotency keys past `services::quotas::INCREMENT_KEY_RETENTION`.
pub async fn prune_daily(
    store: Store,
    holder: String,
    (retention_days, check_retention_days, restore_days, report_days, message_days): (
        u32,
        u32,
        u32,
        u32,
        u32,
    ),
    mut shutdown: Shutdown,
) {
    let mut every = tokio::time::interval(Duration::from_secs(24 * 3600));
    loop {
        tokio::select! {
            _ = shutdown.wait() => return,
            _ = every.tick() => {}
        }
        match store
            .take_lease("retention", &holder, Duration::from_secs(3600), Utc::now())
            .await
        {
            Ok(Some(_)) => {}
            Ok(None) => continue,
            Err(error) => {
                tracing::warn!(%error, "retention: cannot take the lease");
                continue;
            }
        }
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
        match store.prune_history(cutoff).await {
            Ok(0) => {}
            Ok(rows) => tracing::info!(rows, %cutoff, "pruned scans and notification history"),
            Err(error) => tracing::warn!(%error, "scan and notification pruning failed"),
        }
        match purge_deleted(&store, Utc::now(), restore_days).await {
            Ok(0) => {}
            Ok(orgs) => tracing::info!(orgs, "purged organizations past their restore window"),
            Err(error) => tracing::warn!(%error, "purging deleted organizations failed"),
        }
        let cutoff = Utc::now() - chrono::Duration::days(i64::from(report_days));
        match prune_reports(&store, cutoff).await {
            Ok(0) => {}
            Ok(rows) => {
                tracing::info!(rows, %cutoff, "pruned reported executions past REPORT_RETENTION_DAYS")
            }
            Err(error) => tracing::warn!(%error, "report pruning failed"),
        }
        match store.prune_posture_snapshots(cutoff).await {
            Ok(0) => {}
            Ok(rows) => {
                tracing::info!(rows, %cutoff, "pruned posture snapshots past REPORT_RETENTION_DAYS")
            }
            Err(error) => tracing::warn!(%error, "posture snapshot pruning failed"),
        }
        let minute = (Utc::now() - chrono::Duration::hours(1))
            .format("%Y-%m-%dT%H:%M")
            .to_string();
        if let Err(error) = store.prune_alert_tests(&minute).await {
            tracing::warn!(%error, "pruning the destination tests' counts failed");
        }
        let cutoff = Utc::now() - chrono::Duration::days(i64::from(message_days));
        let feed_cutoff = Utc::now() - chrono::Duration::days(1);
        match store.prune_messages(cutoff, feed_cutoff).await {
            Ok(0) => {}
            Ok(rows) => {
                tracing::info!(rows, %cutoff, "pruned messages past MESSAGE_RETENTION_DAYS")
            }
            Err(error) => tracing::warn!(%error, "message pruning failed"),
        }
        let cutoff = Utc::now() - chrono::Duration::days(1);
        match store.prune_signin(cutoff).await {
            Ok(0) => {}
            Ok(rows) => {
                tracing::info!(rows, %cutoff, "forgot old sign-in failures, mail and links")
            }
            Err(error) => tracing::warn!(%error, "sign-in pruning failed"),
        }
        // Single sign-on's attempts and pending links live ten minutes.
        match store.prune_sso_attempts(Utc::now()).await {
            Ok(0) => {}
            Ok(rows) => tracing::info!(rows, "forgot expired single sign-on attempts"),
            Err(error) => tracing::warn!(%error, "single sign-on pruning failed"),
        }
        let cutoff = Utc::now() - crate::services::quotas::INCREMENT_KEY_RETENTION;
        match store.prune_increment_keys(cutoff).await {
            Ok(0) => {}
            Ok(rows) => tracing::info!(rows, %cutoff, "forgot old increment keys"),
            Err(error) => tracing::warn!(%error, "increment key pruning failed"),
        }
    }
}

/// Purges the organizations deleted more than `restore_days` before `now` (their
/// data, not their audit chains); how many.
pub async fn purge_deleted(
    store: &Store,
    now: chrono::DateTime<Utc>,
    restore_days: u32,
) -> Result<u64, crate::storage::StoreError> {
    let cutoff = tenancy::RestoreWindow::days(restore_days).purge_before(now);
    let mut purged = 0;
    // One organization per unit of work (teams before their roots).
    for id in store.organizations_deleted_before(cutoff).await? {
        unit_of_work!(store, |tx| -> StoreError {
            tx.purge_organization(&id).await
        })?;
        store.facts_changed();
        purged += 1;
    }
    Ok(purged)
}

/// Deletes the reported executions, stages, events and build attempts that started
/// before `before`, at once; how many executions.
pub async fn prune_reports(store: &Store, before: DateTime<Utc>) -> StoreResult<u64> {
    unit_of_work!(store, |tx| -> StoreError { tx.prune_reports(before).await })
}
