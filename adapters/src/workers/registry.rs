//! The registry worker (every replica; settling an intent is a conditional write,
//! so two replicas never record one twice): records the registry changes whose
//! answer could not record them, once the registry shows them, and forgets the
//! intents it found no change for after a week.

use std::time::Duration;

use chrono::Utc;

use super::Shutdown;
use crate::services::context::AppState;

/// How often it looks.
pub const POLL: Duration = Duration::from_secs(60);
/// How old an intent is before the worker judges it: longer than a copy takes, so
/// that the request settles its own.
pub const GRACE: Duration = Duration::from_secs(15 * 60);
/// How long an abandoned intent is kept.
const KEEP_ABANDONED: Duration = Duration::from_secs(7 * 24 * 3600);

/// Runs until the server stops; nothing without `REGISTRY_URL`.
pub async fn run(state: AppState, mut shutdown: Shutdown) {
    if state.outbound.registry.is_none() {
        return;
    }
    loop {
        let now = Utc::now();
        let before = now - chrono::Duration::from_std(GRACE).unwrap_or_default();
        match crate::services::images::settle_stale_intents(
            &state.infra.store,
            &state.outbound.registry,
            before,
        )
        .await
        {
            Ok(n) if n > 0 => tracing::info!(recorded = n, "registry changes recorded late"),
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "registry intents: a pass failed; retried later"),
        }
        let forgotten = now - chrono::Duration::from_std(KEEP_ABANDONED).unwrap_or_default();
        if let Err(error) = state.infra.store.prune_intents(forgotten).await {
            tracing::warn!(%error, "registry intents: pruning failed");
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = shutdown.wait() => break,
        }
    }
}
