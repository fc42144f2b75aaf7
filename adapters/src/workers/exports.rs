//! The organization-export worker (every replica; a job is taken by one replica
//! under its lease, and taken over when that lease lapses): makes the archives
//! ([`crate::services::exports::run_due`]) and forgets those past their window.

use std::time::Duration;

use chrono::Utc;

use super::Shutdown;
use crate::services::context::AppState;

/// How often an idle replica looks for a job.
pub const POLL: Duration = Duration::from_secs(1);
/// How often it forgets the archives past their window.
pub const FORGET_EVERY: Duration = Duration::from_secs(60);

/// Runs until the server stops.
pub async fn run(state: AppState, holder: String, mut shutdown: Shutdown) {
    let mut forgotten_at: Option<std::time::Instant> = None;
    loop {
        if shutdown.is_set() {
            break;
        }
        if forgotten_at.is_none_or(|at| at.elapsed() >= FORGET_EVERY) {
            forgotten_at = Some(std::time::Instant::now());
            if let Err(error) =
                crate::services::exports::forget_expired(&state.infra.store, Utc::now()).await
            {
                tracing::warn!(%error, "expired exports were not forgotten; tried again later");
            }
        }
        match crate::services::exports::run_due(&state.infra.store, &holder, Utc::now()).await {
            Ok(true) => continue,
            Ok(false) => {}
            Err(error) => tracing::warn!(%error, "organization exports failed; tried again later"),
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = shutdown.wait() => break,
        }
    }
}
