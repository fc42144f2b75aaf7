//! The re-evaluation worker (every replica, two loops each; a claim is exclusive):
//! claims the due events of a batch of entities, each entity's together, judges
//! each entity once (the batch together), deletes the events, or on failure retries them after `REEVALUATION_RETRY_SECONDS`
//! doubled per attempt, dead after `REEVALUATION_MAX_ATTEMPTS` with the last error.
//! An entity being judged is not claimed again until its claim ends. The request
//! path never waits on it.

use std::time::Duration;

use chrono::Utc;

use super::Shutdown;
use crate::config::ReevaluationSettings;
use crate::services::context::AppState;

/// How many loops one replica runs; each claims up to [`BATCH`] entities at a time (a
/// claim is exclusive across loops and replicas), judges them together and finishes
/// them together, so one loop judges while the other claims or writes.
pub const CONCURRENCY: usize = 2;

/// The most due events one claim takes (with every other due event of their
/// entities).
pub const BATCH: u32 = 64;

/// Runs [`CONCURRENCY`] loops until the server stops.
pub async fn run(state: AppState, settings: ReevaluationSettings, shutdown: Shutdown) {
    let mut loops = tokio::task::JoinSet::new();
    for _ in 0..CONCURRENCY {
        loops.spawn(one_batch_at_a_time(
            state.clone(),
            settings.clone(),
            shutdown.clone(),
        ));
    }
    while loops.join_next().await.is_some() {}
}

/// One loop: claims, judges and finishes a batch of entities at a time.
async fn one_batch_at_a_time(
    state: AppState,
    settings: ReevaluationSettings,
    mut shutdown: Shutdown,
) {
    loop {
        if shutdown.is_set() {
            break;
        }
        match step(&state, &settings).await {
            Ok(0) => {}
            Ok(_) => continue,
            Err(e) => tracing::warn!(error = %e, "re-evaluation round failed; retrying"),
        }
        tokio::select! {
            _ = tokio::time::sleep(settings.poll) => {}
            _ = shutdown.wait() => break,
        }
    }
}

/// Claims a batch of entities' events and processes them; how many entities it
/// claimed (0: nothing was due).
pub async fn step(
    state: &AppState,
    settings: &ReevaluationSettings,
) -> Result<usize, crate::storage::StoreError> {
    let now = Utc::now();
    let lease = now + chrono::Duration::from_std(LEASE).unwrap_or(chrono::Duration::MAX);
    let claimed = state
        .infra
        .store
        .claim_reevaluations(now, lease, BATCH)
        .await?;
    if claimed.is_empty() {
        return Ok(0);
    }
    let outcomes = crate::services::reevaluation::process_all(state, &claimed).await;
    let mut done = Vec::with_capacity(claimed.len());
    for (entity, outcome) in claimed.iter().zip(outcomes) {
        match outcome {
            Ok(()) => done.push(entity.clone()),
            Err(error) => {
                let factor = 2u32.saturating_pow(entity.attempts.min(16));
                let wait = chrono::Duration::from_std(settings.retry_delay.saturating_mul(factor))
                    .unwrap_or(chrono::Duration::MAX);
                let dead = entity.attempts + 1 >= settings.max_attempts;
                state
                    .infra
                    .store
                    .retry_reevaluation(
                        entity,
                        Utc::now() + wait,
                        settings.max_attempts,
                        &error.to_string(),
                    )
                    .await?;
                state.infra.metrics.reevaluation_failed(dead);
                tracing::warn!(org = %entity.org_id, entity = %entity.entity_id, %error, dead, "re-evaluation failed");
            }
        }
    }
    state.infra.store.finish_reevaluations(&done).await?;
    state
        .infra
        .metrics
        .reevaluated(done.iter().map(|e| e.ids.len() as u64).sum());
    Ok(claimed.len())
}

/// How long the worker gives a batch.
pub const LEASE: Duration = Duration::from_secs(60);
