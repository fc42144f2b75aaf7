//! The digest scheduler: every `DIGEST_SCHEDULER_INTERVAL_MS`, the replica holding the
//! `notification-digests` lease (`DIGEST_LOCK_TTL_MS`) turns each ended window of held
//! deliveries into one digest per organization, channel and window. The window's row
//! in `digests` makes it once even if two schedulers overlap; held deliveries stay in
//! the database across restarts.

use chrono::Utc;

use super::Shutdown;
use crate::services::context::AppState;

/// The lease the scheduler takes.
pub const LEASE: &str = "notification-digests";

/// Runs until the server stops.
pub async fn run(state: AppState, holder: String, mut shutdown: Shutdown) {
    let c = &state.config.compliance;
    let (interval, ttl) = (c.digest_scheduler_interval, c.digest_lock_ttl);
    loop {
        match state
            .infra
            .store
            .take_lease(LEASE, &holder, ttl, Utc::now())
            .await
        {
            Ok(Some(_)) => {
                match crate::services::delivery::send_digests(&state.infra.store, Utc::now()).await
                {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(digests = n, "notification digests made"),
                    Err(error) => tracing::warn!(%error, "digest round failed"),
                }
            }
            Ok(None) => {}
            Err(error) => tracing::warn!(%error, "digest scheduler: cannot take the lease"),
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = shutdown.wait() => break,
        }
    }
    let _ = state.infra.store.release_lease(LEASE, &holder).await;
}
