//! The re-evaluation worker (every replica, several loops each; a claim is
//! exclusive): claims an entity's due events together, judges the entity once,
//! deletes the events, or on failure retries them after `REEVALUATION_RETRY_SECONDS`
//! doubled per attempt, dead after `REEVALUATION_MAX_ATTEMPTS` with the last error.
//! An entity being judged is not claimed again until its claim ends. The request
//! path never waits on it.

use std::time::Duration;

use chrono::Utc;

use super::Shutdown;
use crate::config::ReevaluationSettings;
use crate::services::context::AppState;

/// How many entities one replica judges at once: each of these loops claims one
/// entity at a time (a claim is exclusive across loops and replicas), and the checks
/// they record at the same moment are written together (`services::grouped`).
pub const CONCURRENCY: usize = 8;

/// Runs [`CONCURRENCY`] loops until the server stops.
pub async fn run(state: AppState, settings: ReevaluationSettings, shutdown: Shutdown) {
    let mut loops = tokio::task::JoinSet::new();
    for _ in 0..CONCURRENCY {
        loops.spawn(one_at_a_time(
            state.clone(),
            settings.clone(),
            shutdown.clone(),
        ));
    }
    while loops.join_next().await.is_some() {}
}

/// One loop: claims, judges and finishes one entity at a time.
async fn one_at_a_time(state: AppState, settings: ReevaluationSettings, mut shutdown: Shutdown) {
    loop {
        if shutdown.is_set() {
            break;
        }
        match step(&state, &settings).await {
            Ok(true) => continue,
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "re-evaluation round failed; retrying"),
        }
        tokio::select! {
            _ = tokio::time::sleep(settings.poll) => {}
            _ = shutdown.wait() => break,
        }
    }
}

/// Claims and processes one entity's events; whether there were any.
pub async fn step(
    state: &AppState,
    settings: &ReevaluationSettings,
) -> Result<bool, crate::storage::StoreError> {
    let now = Utc::now();
    let lease = now + chrono::Duration::from_std(LEASE).unwrap_or(chrono::Duration::MAX);
    let Some(claimed) = state.store.claim_reevaluation(now, lease).await? else {
        return Ok(false);
    };
    match crate::services::reevaluation::process(state, &claimed).await {
        Ok(()) => {
            state.store.finish_reevaluation(&claimed).await?;
            state.metrics.reevaluated(claimed.ids.len() as u64);
        }
        Err(error) => {
            let factor = 2u32.saturating_pow(claimed.attempts.min(16));
            let wait = chrono::Duration::from_std(settings.retry_delay.saturating_mul(factor))
                .unwrap_or(chrono::Duration::MAX);
            let dead = claimed.attempts + 1 >= settings.max_attempts;
            state
                .store
                .retry_reevaluation(
                    &claimed,
                    Utc::now() + wait,
                    settings.max_attempts,
                    &error.to_string(),
                )
                .await?;
            state.metrics.reevaluation_failed(dead);
            tracing::warn!(org = %claimed.org_id, entity = %claimed.entity_id, %error, dead, "re-evaluation failed");
        }
    }
    Ok(true)
}

/// How long the worker gives one entity.
pub const LEASE: Duration = Duration::from_secs(60);
