//! Customer keys and the secrets under them, in the background:
//! - the checker (lease `kms-check`): every `KMS_CHECK_INTERVAL_SECONDS`, and at once
//!   when an unwrap failed on this replica, checks every customer key; three
//!   failures in a row orphan its organization, a key that works again recovers it
//!   (`services::keys::check_keys`).
//! - the rewrite pass (lease `secrets-rewrite`): rewraps the data keys a previous
//!   platform key wraps and rewrites secrets stored before in the current format, a
//!   batch at a time, until nothing is left; then looks again every ten minutes.

use std::time::Duration;

use chrono::Utc;

use super::Shutdown;
use crate::services::context::AppState;
use crate::services::keys;

/// The checker's lease.
pub const CHECK_LEASE: &str = "kms-check";
/// The rewrite pass's lease.
pub const REWRITE_LEASE: &str = "secrets-rewrite";
/// Changes of one batch of the rewrite pass.
pub const REWRITE_BATCH: usize = 200;
/// How long the rewrite pass rests once nothing is left.
const REWRITE_REST: Duration = Duration::from_secs(600);
/// An unwrap failure wakes the checker at most this often.
const WAKE_AT_MOST: Duration = Duration::from_secs(5);

/// The checker, until the server stops.
pub async fn check(state: AppState, holder: String, mut shutdown: Shutdown) {
    let interval = state.config.keys.check_interval;
    let ttl = interval.max(Duration::from_secs(30));
    loop {
        match state
            .infra
            .store
            .take_lease(CHECK_LEASE, &holder, ttl, Utc::now())
            .await
        {
            Ok(Some(_)) => match keys::check_keys(
                &state.infra.store,
                &state.config,
                &state.outbound.keyring,
                Utc::now(),
            )
            .await
            {
                Ok(round) if round.orphaned + round.recovered > 0 => {
                    tracing::info!(?round, "customer keys checked");
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "customer keys could not be checked"),
            },
            Ok(None) => {}
            Err(error) => tracing::warn!(%error, "key checker: cannot take the lease"),
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = async {
                state.outbound.keyring.failure().await;
                tokio::time::sleep(WAKE_AT_MOST).await;
            } => {}
            _ = shutdown.wait() => break,
        }
    }
    let _ = state.infra.store.release_lease(CHECK_LEASE, &holder).await;
}

/// The rewrite pass, until the server stops.
pub async fn rewrite(state: AppState, holder: String, mut shutdown: Shutdown) {
    let ttl = Duration::from_secs(120);
    loop {
        let mut rest = REWRITE_REST;
        match state
            .infra
            .store
            .take_lease(REWRITE_LEASE, &holder, ttl, Utc::now())
            .await
        {
            Ok(Some(_)) => match keys::rewrite_old_secrets(
                &state.infra.store,
                &state.config,
                &state.outbound.keyring,
                REWRITE_BATCH,
            )
            .await
            {
                Ok(round) => {
                    if round.rewrapped + round.rewritten > 0 {
                        tracing::info!(?round, "secrets rewritten under their organizations' keys");
                    }
                    if round.rewrapped + round.rewritten >= REWRITE_BATCH {
                        rest = Duration::from_millis(100);
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "the secrets' rewrite pass failed; retried later")
                }
            },
            Ok(None) => {}
            Err(error) => tracing::warn!(%error, "secrets' rewrite: cannot take the lease"),
        }
        tokio::select! {
            _ = tokio::time::sleep(rest) => {}
            _ = shutdown.wait() => break,
        }
    }
    let _ = state
        .infra
        .store
        .release_lease(REWRITE_LEASE, &holder)
        .await;
}
