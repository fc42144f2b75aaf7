//! The reports worker (every replica; a derivation locks its execution): derives the
//! executions whose events were stored but not derived (a crash between an ingest's
//! commit and its derivation, a registration that attributed a resource's waiting
//! executions). Derivation is idempotent: the same events give the same execution.

use std::time::Duration;

use super::Shutdown;
use crate::services::context::AppState;

/// How often it looks.
pub const POLL: Duration = Duration::from_secs(1);

/// Runs until the server stops.
pub async fn run(state: AppState, mut shutdown: Shutdown) {
    loop {
        if shutdown.is_set() {
            break;
        }
        match crate::services::reports::derive_pending(&state.infra.store, 500).await {
            Ok(n) if n > 0 => continue,
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "reports: derivation failed; retried later"),
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = shutdown.wait() => break,
        }
    }
}
