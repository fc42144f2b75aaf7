//! The audit relay: moves the server's own audit events from the outbox into their
//! chains, in outbox order, one transaction per event (append and delete together),
//! under the `audit-relay` lease so that one replica relays at a time. It also turns
//! finished denial folds into one `authz.denied` event each. Nothing is lost: an event
//! stays in the outbox until the transaction that chains it commits; a crash or a
//! stop leaves the rest for the next holder of the lease.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::Shutdown;
use crate::storage::{unit_of_work, Store, StoreError, StoreResult};

/// The lease the relay takes.
pub const LEASE: &str = "audit-relay";
/// How long a taken lease lasts without renewal.
pub const LEASE_TTL: Duration = Duration::from_secs(10);
/// How often the relay looks at the outbox when it is idle.
pub const POLL: Duration = Duration::from_millis(100);
/// Events chained per round (the lease is renewed between rounds).
const BATCH: u32 = 200;

/// Chains every event waiting now, in order; returns how many. Used by the worker
/// and by tests (which drain before they look at the chains).
pub async fn drain(store: &Store) -> StoreResult<u64> {
    let mut relayed = 0;
    loop {
        match relay_batch(store).await? {
            None => return Ok(relayed),
            Some(n) => relayed += n,
        }
    }
}

/// Chains the oldest [`BATCH`] events of the outbox; `None` when it was empty.
async fn relay_batch(store: &Store) -> StoreResult<Option<u64>> {
    let batch = store.outbox_batch(BATCH).await?;
    if batch.is_empty() {
        return Ok(None);
    }
    let mut relayed = 0;
    for pending in &batch {
        let now = Utc::now();
        if unit_of_work!(store, |tx| -> StoreError {
            tx.relay_one(pending, now).await
        })? {
            relayed += 1;
        }
    }
    Ok(Some(relayed))
}

/// Flushes every denial fold (whatever its minute: for tests and a final stop).
pub async fn flush_all_denials(store: &Store) -> StoreResult<u64> {
    flush_denials(store, Utc::now() + chrono::Duration::minutes(2)).await
}

/// Turns every fold of a minute before `before` into one authz.denied event in the
/// outbox for the denials after the first (which was chained when it happened): its
/// details carry `count` (those others), `firstAt` and `lastAt`. A fold of one
/// denial is only deleted. One unit of work per fold; how many folds were flushed.
pub async fn flush_denials(store: &Store, before: DateTime<Utc>) -> StoreResult<u64> {
    let mut flushed = 0;
    for key in store.denial_folds_before(before).await? {
        let taken = unit_of_work!(store, |tx| -> StoreError {
            let Some(fold) = tx.take_denial_fold(&key).await? else {
                // Another relay flushed it.
                return Ok(false);
            };
            if fold.count > 1 {
                // An event of its own: the first was chained under the fold's id.
                let mut others = fold.first;
                others.id = crate::storage::new_id();
                let first_at = others.occurred_at;
                let event =
                    crate::audit::folded_denial(others, fold.count - 1, first_at, fold.last_at);
                tx.enqueue_audit(&[event]).await?;
            }
            Ok(true)
        })?;
        flushed += u64::from(taken);
    }
    Ok(flushed)
}

/// The worker: while it holds the lease, flush finished denial minutes and chain the
/// outbox; at shutdown, drain what it can (the registry's deadline bounds it) and
/// give the lease back.
pub async fn run(store: Store, holder: String, mut shutdown: Shutdown) {
    loop {
        let held = match store
            .take_lease(LEASE, &holder, LEASE_TTL, Utc::now())
            .await
        {
            Ok(token) => token.is_some(),
            Err(error) => {
                tracing::warn!(%error, "audit relay: cannot take the lease");
                false
            }
        };
        if held {
            if let Err(error) = round(&store).await {
                tracing::warn!(%error, "audit relay: round failed; the outbox keeps the events");
            }
        }
        if shutdown.is_set() {
            break;
        }
        let pause = if held { POLL } else { LEASE_TTL / 2 };
        tokio::select! {
            _ = shutdown.wait() => {}
            _ = tokio::time::sleep(pause) => {}
        }
    }
    // Graceful stop: what is left goes now if this replica holds the lease.
    if let Ok(Some(_)) = store
        .take_lease(LEASE, &holder, LEASE_TTL, Utc::now())
        .await
    {
        match drain(&store).await {
            Ok(n) => tracing::info!(relayed = n, "audit relay drained the outbox"),
            Err(error) => tracing::warn!(%error, "audit relay could not drain the outbox"),
        }
        let _ = store.release_lease(LEASE, &holder).await;
    }
}

async fn round(store: &Store) -> StoreResult<()> {
    // A minute is finished once the next one has begun; a one-minute grace covers
    // clocks that disagree between replicas.
    flush_denials(store, Utc::now() - chrono::Duration::minutes(1)).await?;
    relay_batch(store).await?;
    Ok(())
}
