//! Following the primary among several database hosts (`DATABASE_URL` naming more
//! than one, see `storage::primary`): every replica, no lease. Each second, and at
//! once after a statement failed for want of a server, it asks whether the pool's
//! host is still the primary and moves the pool when it is not; until a primary is
//! found again it asks every second (statements meanwhile answer 503).

use std::time::Duration;

use super::Shutdown;
use crate::storage::{primary, Store};

/// How often the pool's host is asked, at most.
const EVERY: Duration = Duration::from_secs(1);
/// The least time between two rounds, however many failures hint at a move.
const AT_LEAST: Duration = Duration::from_millis(200);

/// The worker (returns at once when the store has one host).
pub async fn run(store: Store, mut shutdown: Shutdown) {
    if !store.follows_primary() {
        return;
    }
    let mut lost_since: Option<std::time::Instant> = None;
    loop {
        tokio::select! {
            _ = shutdown.wait() => return,
            _ = tokio::time::sleep(EVERY) => {}
            _ = primary::suspected() => {}
        }
        match store.keep_primary().await {
            Ok(moved) => {
                if let Some(since) = lost_since.take() {
                    tracing::warn!(
                        after_ms = u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX),
                        "the database primary answers again"
                    );
                } else if moved {
                    tracing::warn!("the database pool moved to a new primary");
                }
            }
            Err(error) => {
                if lost_since.is_none() {
                    lost_since = Some(std::time::Instant::now());
                    tracing::warn!(%error, "no database primary: requests answer 503 until one is found");
                }
            }
        }
        tokio::select! {
            _ = shutdown.wait() => return,
            _ = tokio::time::sleep(AT_LEAST) => {}
        }
    }
}
