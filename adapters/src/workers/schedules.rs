//! The scan scheduler: every `SCAN_SCHEDULER_INTERVAL_MS`, the replica holding the
//! `scan-scheduler` lease (`SCAN_LOCK_TTL_MS`) starts the scans of the schedules that
//! are due. Each due run starts one scan even if two schedulers overlapped (the move
//! of a schedule's next run is conditional, in the scan's transaction).

use chrono::Utc;

use super::Shutdown;
use crate::services::context::AppState;

/// The lease the scheduler takes.
pub const LEASE: &str = "scan-scheduler";

/// Runs until the server stops.
pub async fn run(state: AppState, holder: String, mut shutdown: Shutdown) {
    let c = &state.config.compliance;
    let (interval, ttl) = (c.scan_scheduler_interval, c.scan_lock_ttl);
    loop {
        match state
            .infra
            .store
            .take_lease(LEASE, &holder, ttl, Utc::now())
            .await
        {
            Ok(Some(_)) => {
                match crate::services::scans::run_due_schedules(
                    &state.infra.store,
                    &state.config,
                    &state.infra.metrics,
                    Utc::now(),
                )
                .await
                {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(started = n, "scheduled scans started"),
                    Err(error) => tracing::warn!(%error, "scan scheduler round failed"),
                }
            }
            Ok(None) => {}
            Err(error) => tracing::warn!(%error, "scan scheduler: cannot take the lease"),
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = shutdown.wait() => break,
        }
    }
    let _ = state.infra.store.release_lease(LEASE, &holder).await;
}
