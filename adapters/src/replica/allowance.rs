//! This replica's blocks of monthly units (the spending is `services::allowance`): each replica reserves a block
//! of units of an organization from its account's pool by one conditional statement
//! (the charge any increment makes), spends it in memory, and gives back what it did
//! not spend once the organization has been idle on this replica for a second, when
//! the account's limits change, and when the server stops. API calls use it; AI
//! calls will when generation counts them one by one.
//!
//! What holds:
//! - The pool's used count includes every reserved block, so it never passes the
//!   limit on any number of replicas; near the limit a block is only what is left.
//! - A crashed replica's unspent units stay counted as used, never as free.
//! - A request is refused while units remain unspent elsewhere only within this
//!   bound: at most [`BLOCK`]` - 1` units per other replica and organization of the
//!   account, for at most [`IDLE`] (plus one sweep) after that replica's last request
//!   of the organization.
//! - A block counts in the month it was reserved in: past the month's end its rest
//!   is neither spent nor given back (the new month started from zero).
//! - After a reset the blocks of the account are forgotten, not given back (the
//!   reset counted them); a give-back racing a reset may take back up to
//!   `BLOCK - 1` units of the new count (stated, not closed).
//! - The quotas a replica reports subtract its own unspent units: on one replica
//!   they are exact; another replica's unspent units show as used until it gives
//!   them back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use entitlements::Dimension;

use crate::storage::{Charge, Store};

/// How many units a replica reserves at once.
pub const BLOCK: u64 = 64;

/// How long an organization stays idle on a replica before its unspent units go
/// back to the pool.
pub const IDLE: Duration = Duration::from_secs(1);

type Key = (String, Dimension);

/// One organization's reserved units on this replica.
#[derive(Debug)]
pub struct Block {
    /// The account root whose pool the units came from.
    pub root_id: String,
    /// The month the units count in (its key).
    pub period: String,
    /// Reserved and not spent.
    pub unspent: u64,
    /// When a request last spent from it.
    pub last_used: Instant,
}

/// One organization's block, locked while a request spends from it or refills it.
pub type Slot = Arc<tokio::sync::Mutex<Block>>;

/// This replica's blocks, per organization and quota type.
#[derive(Debug, Default)]
pub struct Allowances {
    blocks: Mutex<HashMap<Key, Slot>>,
}

impl Allowances {
    /// The block of `org_id` (whose account is `root_id`) and `dimension`, made empty
    /// when there is none; `None` when the map's lock is poisoned.
    pub fn slot(&self, (org_id, root_id): (&str, &str), dimension: Dimension) -> Option<Slot> {
        let mut blocks = self.blocks.lock().ok()?;
        Some(
            blocks
                .entry((org_id.to_owned(), dimension))
                .or_insert_with(|| {
                    Arc::new(tokio::sync::Mutex::new(Block {
                        root_id: root_id.to_owned(),
                        period: String::new(),
                        unspent: 0,
                        last_used: Instant::now(),
                    }))
                })
                .clone(),
        )
    }

    fn slots(&self, mut keep: impl FnMut(&Key) -> bool) -> Vec<(Key, Slot)> {
        self.blocks.lock().map_or_else(
            |_| Vec::new(),
            |blocks| {
                blocks
                    .iter()
                    .filter(|(key, _)| keep(key))
                    .map(|(key, slot)| (key.clone(), slot.clone()))
                    .collect()
            },
        )
    }

    /// The units this replica holds unspent in `period`: `org`'s own, and its
    /// account's (`root_id`), of `dimension`. A block being refilled right now is
    /// not counted.
    pub fn unspent(
        &self,
        (org_id, root_id): (&str, &str),
        dimension: Dimension,
        period: &str,
    ) -> (u64, u64) {
        let mut own = 0;
        let mut account = 0;
        for ((id, _), slot) in self.slots(|(_, d)| *d == dimension) {
            let Ok(block) = slot.try_lock() else { continue };
            if block.root_id != root_id || block.period != period {
                continue;
            }
            account += block.unspent;
            if id == org_id {
                own += block.unspent;
            }
        }
        (own, account)
    }

    /// Drops the blocks that are idle, empty and held by nobody (the map stays as
    /// large as the organizations active in the last second).
    fn prune(&self) {
        if let Ok(mut blocks) = self.blocks.lock() {
            blocks.retain(|_, slot| {
                Arc::strong_count(slot) > 1
                    || slot
                        .try_lock()
                        .map_or(true, |b| b.unspent > 0 || b.last_used.elapsed() < IDLE)
            });
        }
    }
}

async fn give_back_block(store: &Store, (org_id, dimension): &Key, block: &mut Block) -> bool {
    if block.unspent == 0 {
        return true;
    }
    let charge = Charge {
        org_id,
        root_id: &block.root_id,
        dimension: dimension.name(),
        period: &block.period,
        amount: block.unspent,
    };
    let given = crate::storage::unit_of_work!(store, |tx| -> crate::storage::StoreError {
        tx.give_back(&charge).await
    });
    match given {
        Ok(()) => {
            block.unspent = 0;
            true
        }
        Err(error) => {
            // Kept for the next sweep: until then they count as used.
            tracing::warn!(%error, org = %org_id, "unspent units not given back yet");
            false
        }
    }
}

/// Gives back the unspent units of organizations idle for [`IDLE`] and drops the
/// empty blocks nobody uses; a block in use is left for the next sweep. Returns
/// how many blocks were given back.
pub async fn give_back_idle(store: &Store, allowances: &Allowances) -> usize {
    let mut given = 0;
    for (key, slot) in allowances.slots(|_| true) {
        let Ok(mut block) = slot.try_lock() else {
            continue;
        };
        if block.unspent > 0
            && block.last_used.elapsed() >= IDLE
            && give_back_block(store, &key, &mut block).await
        {
            given += 1;
        }
    }
    allowances.prune();
    given
}

/// Gives back every unspent unit of `root_id`'s account: its limits changed, and
/// the pool must count what was spent only. A block in use at that moment (a
/// request of the account is refilling it, possibly the one whose first charge
/// synchronized these limits) is given back when idle.
pub async fn give_back_account(store: &Store, allowances: &Allowances, root_id: &str) {
    for (key, slot) in allowances.slots(|_| true) {
        let Ok(mut block) = slot.try_lock() else {
            continue;
        };
        if block.root_id == root_id {
            give_back_block(store, &key, &mut block).await;
        }
    }
}

/// Gives back every unspent unit this replica holds (the server stops), waiting
/// for the requests that hold a block.
pub async fn give_back_all(store: &Store, allowances: &Allowances) {
    for (key, slot) in allowances.slots(|_| true) {
        let mut block = slot.lock().await;
        give_back_block(store, &key, &mut block).await;
    }
}

/// Forgets the unspent units of `root_id`'s account: its usage was reset, which
/// counted them. A block being refilled right now keeps what it reserves after
/// the reset.
pub async fn forget_account(allowances: &Allowances, root_id: &str) {
    for (_, slot) in allowances.slots(|_| true) {
        let Ok(mut block) = slot.try_lock() else {
            continue;
        };
        if block.root_id == root_id {
            block.unspent = 0;
        }
    }
}

/// What another replica told through [`crate::storage::QUOTA_CHANNEL`].
pub async fn heard(store: &Store, allowances: &Allowances, payload: &str) {
    match payload.split_once(' ') {
        Some(("give-back", root)) => give_back_account(store, allowances, root).await,
        Some(("forget", root)) => forget_account(allowances, root).await,
        _ => tracing::warn!(payload, "an unknown quota notification"),
    }
}
