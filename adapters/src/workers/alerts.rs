//! The alert evaluator: every `ALERT_EVALUATION_INTERVAL_SECONDS`, the replica
//! holding the `alert-evaluation` lease evaluates every due rule
//! (`services::alerts::evaluate_due`). Each rule's write is conditional on the
//! evaluation count it read, so a lease that changes hands mid-round never writes
//! a transition, or sends a notification, twice.

use std::time::Duration;

use chrono::Utc;

use super::Shutdown;
use crate::services::context::AppState;

/// The lease the evaluator takes.
pub const LEASE: &str = "alert-evaluation";

/// Runs until the server stops.
pub async fn run(state: AppState, holder: String, mut shutdown: Shutdown) {
    let interval = state.config.alerts.interval;
    // The lease outlives a round (1,000 rules take well under a minute) and lapses
    // soon after a replica dies.
    let ttl = interval.max(Duration::from_secs(30)) * 2;
    loop {
        match state
            .infra
            .store
            .take_lease(LEASE, &holder, ttl, Utc::now())
            .await
        {
            Ok(Some(_)) => match crate::services::alerts::evaluate_due(
                &state.infra.store,
                &state.config,
                &state.infra.reporting,
                Utc::now(),
            )
            .await
            {
                Ok(round) if round.transitions > 0 || round.notices > 0 => {
                    tracing::info!(
                        evaluated = round.evaluated,
                        transitions = round.transitions,
                        notices = round.notices,
                        "alert rules evaluated"
                    );
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "alert evaluation round failed"),
            },
            Ok(None) => {}
            Err(error) => tracing::warn!(%error, "alert evaluator: cannot take the lease"),
        }
        tokio::select! {
            _ = tokio::time::sleep(interval.min(Duration::from_secs(5))) => {}
            _ = shutdown.wait() => break,
        }
    }
    let _ = state.infra.store.release_lease(LEASE, &holder).await;
}
