//! Moving the copies of compliance that entities held before judgements were stored
//! once (migration 0028): the replica holding the `judgement-move` lease moves them a
//! batch at a time, each batch its own transaction, resuming after a stop where the
//! copies left begin; once none is left the worker ends. Reads answer the same
//! throughout (an entity reads its copy until it is moved).

use std::time::{Duration, Instant};

use chrono::Utc;

use super::Shutdown;
use crate::storage::{unit_of_work, Store, StoreError, StoreResult};

/// The lease the worker takes.
pub const LEASE: &str = "judgement-move";
/// Entities moved per transaction.
pub const BATCH: u32 = 500;

/// Moves every copy, then ends (at once when none is left).
pub async fn run(store: Store, holder: String, mut shutdown: Shutdown) {
    loop {
        match move_all(&store, &holder, &shutdown).await {
            Ok(true) => break,
            Ok(false) => {}
            Err(error) => tracing::warn!(%error, "moving compliance copies failed; retried"),
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(30)) => {}
            _ = shutdown.wait() => break,
        }
    }
    let _ = store.release_lease(LEASE, &holder).await;
}

/// One pass: `true` when no copy is left, `false` when another replica moves them
/// (or the server stops).
pub async fn move_all(
    store: &Store,
    holder: &str,
    shutdown: &Shutdown,
) -> crate::storage::StoreResult<bool> {
    let left = store.judgement_copies("pipeline").await? + store.judgement_copies("plugin").await?;
    if left == 0 {
        return Ok(true);
    }
    let started = Instant::now();
    for target in ["plugin", "pipeline"] {
        let mut after = String::new();
        loop {
            if shutdown.is_set() {
                return Ok(false);
            }
            let lease = store
                .take_lease(LEASE, holder, Duration::from_secs(120), Utc::now())
                .await?;
            if lease.is_none() {
                return Ok(false);
            }
            match move_copies(store, target, &after, BATCH).await? {
                Some(last) => after = last,
                None => break,
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    tracing::info!(
        left,
        seconds,
        per_second =
            (f64::from(u32::try_from(left).unwrap_or(u32::MAX)) / seconds.max(0.001)).round(),
        batches_of = BATCH,
        "moved the entities' compliance copies into judgements"
    );
    Ok(true)
}

/// Moves the copies of up to `batch` entities of `target` after the id `after` to
/// the judgements stored once; the last id moved (`None`: none was left).
pub async fn move_copies(
    store: &Store,
    target: &str,
    after: &str,
    batch: u32,
) -> StoreResult<Option<String>> {
    unit_of_work!(store, |tx| -> StoreError {
        tx.move_judgement_copies(target, after, batch).await
    })
}
