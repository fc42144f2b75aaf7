//! The scan sweeper (every replica; a claim is exclusive and fenced): claims a running
//! scan nobody sweeps, or one whose sweeper's lease (`COMPLIANCE_SCAN_LEASE_MS`)
//! expired, and sweeps it to its end ([`crate::services::scans::sweep`]). At a
//! graceful stop it gives its claim back between two pages.

use chrono::Utc;

use super::Shutdown;
use crate::services::context::AppState;
use crate::services::scans::{self, SweepSettings};

/// Runs until the server stops.
pub async fn run(state: AppState, holder: String, mut shutdown: Shutdown) {
    let c = &state.config.compliance;
    let settings = SweepSettings {
        concurrency: c.scan_concurrency,
        batch: c.scan_progress_batch_size,
        lease: c.scan_lease,
    };
    let poll = c.scan_poll;
    loop {
        if shutdown.is_set() {
            break;
        }
        match step(&state, &holder, settings, &shutdown).await {
            Ok(true) => continue,
            Ok(false) => {}
            Err(error) => tracing::warn!(%error, "scan sweep failed; the scan is resumed later"),
        }
        tokio::select! {
            _ = tokio::time::sleep(poll) => {}
            _ = shutdown.wait() => break,
        }
    }
}

/// Claims one scan and sweeps it; whether there was one.
pub async fn step(
    state: &AppState,
    holder: &str,
    settings: SweepSettings,
    shutdown: &Shutdown,
) -> Result<bool, crate::services::ServiceError> {
    let now = Utc::now();
    let until =
        now + chrono::Duration::from_std(settings.lease).unwrap_or(chrono::Duration::seconds(30));
    let Some(scan) = state.infra.store.claim_scan(holder, now, until).await? else {
        return Ok(false);
    };
    tracing::info!(scan = %scan.id, org = %scan.org_id, takeovers = scan.sweep.takeovers, "sweeping a scan");
    let stopping = || shutdown.is_set();
    let swept = scans::sweep(state, &scan, settings, &stopping).await?;
    tracing::info!(scan = %scan.id, ?swept, "scan sweep ended");
    Ok(true)
}
