//! The notification delivery worker (every replica; a claim is exclusive and fenced
//! by its lease): claims one due delivery, makes the attempt, and records it with the
//! delivery's next state ([`crate::services::notifications`]). A delivery whose
//! worker died is claimed again once its lease expires; the receiver sees the same
//! notification id.

use std::time::Duration;

use chrono::Utc;

use super::Shutdown;
use crate::services::context::AppState;

/// How long a claim holds (an attempt takes at most the 10-second webhook timeout,
/// or the SMTP timeout).
pub const LEASE: Duration = Duration::from_secs(60);

/// Runs until the server stops.
pub async fn run(state: AppState, mut shutdown: Shutdown) {
    let poll = state.config.notifications.poll;
    loop {
        if shutdown.is_set() {
            break;
        }
        match step(&state).await {
            Ok(true) => continue,
            Ok(false) => {}
            Err(error) => tracing::warn!(%error, "notification delivery failed; retried later"),
        }
        tokio::select! {
            _ = tokio::time::sleep(poll) => {}
            _ = shutdown.wait() => break,
        }
    }
}

/// Claims and attempts one delivery; whether there was one.
pub async fn step(state: &AppState) -> Result<bool, crate::services::ServiceError> {
    let now = Utc::now();
    let until = now + chrono::Duration::from_std(LEASE).unwrap_or(chrono::Duration::seconds(60));
    let Some(claimed) = state.infra.store.claim_delivery(now, until).await? else {
        return Ok(false);
    };
    let outcome = crate::services::delivery::attempt(
        &state.infra.store,
        &state.config,
        &state.outbound.keyring,
        &claimed,
    )
    .await?;
    if !crate::services::delivery::record(
        &state.infra.store,
        &state.config,
        &state.infra.metrics,
        &claimed,
        &outcome,
    )
    .await?
    {
        tracing::warn!(delivery = %claimed.id, "a delivery's claim lapsed before its attempt was recorded");
    }
    Ok(true)
}
