//! The posture snapshots: once an hour, the replica holding the
//! `posture-snapshots` lease writes a snapshot of every live organization at the
//! hour's start (a second round in the same hour writes nothing: one row per
//! organization and instant). Scans write theirs when they end.

use std::time::Duration;

use chrono::{DurationRound, Utc};

use super::Shutdown;
use crate::services::context::AppState;

/// The lease the worker takes.
pub const LEASE: &str = "posture-snapshots";

/// Runs until the server stops.
pub async fn run(state: AppState, holder: String, mut shutdown: Shutdown) {
    let mut last_hour = None;
    loop {
        let now = Utc::now();
        let hour = now
            .duration_trunc(chrono::Duration::hours(1))
            .unwrap_or(now);
        if last_hour != Some(hour) {
            match state
                .infra
                .store
                .take_lease(LEASE, &holder, Duration::from_secs(600), now)
                .await
            {
                Ok(Some(_)) => {
                    match crate::services::posture::snapshot_all(&state.infra.store, hour).await {
                        Ok(n) => {
                            tracing::info!(organizations = n, "posture snapshots written");
                            last_hour = Some(hour);
                        }
                        Err(error) => tracing::warn!(%error, "posture snapshots failed; retried"),
                    }
                }
                Ok(None) => last_hour = Some(hour),
                Err(error) => tracing::warn!(%error, "posture snapshots: cannot take the lease"),
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(60)) => {}
            _ = shutdown.wait() => break,
        }
    }
    let _ = state.infra.store.release_lease(LEASE, &holder).await;
}
