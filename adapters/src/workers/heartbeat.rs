//! The primary's heartbeat (on PostgreSQL, every replica, no lease): each second the
//! heartbeat row is written, so that a streaming standby's copy says how far behind
//! the standby is (`REPORTING_DATABASE_URL`; see `storage::heartbeat`).

use std::time::Duration;

use chrono::Utc;

use super::Shutdown;
use crate::storage::Store;

/// How often the heartbeat is written.
pub const EVERY: Duration = Duration::from_secs(1);

/// The worker.
pub async fn run(store: Store, mut shutdown: Shutdown) {
    let mut failing = false;
    loop {
        match store.beat(Utc::now()).await {
            Ok(()) => failing = false,
            Err(error) if !failing => {
                failing = true;
                tracing::warn!(%error, "the heartbeat was not written");
            }
            Err(_) => {}
        }
        tokio::select! {
            _ = shutdown.wait() => return,
            _ = tokio::time::sleep(EVERY) => {}
        }
    }
}
