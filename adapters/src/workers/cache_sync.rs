//! Caches that follow changes on every replica: on PostgreSQL each process listens on
//! [`CACHE_CHANNEL`](crate::compliance::CACHE_CHANNEL) and drops the rule sets another
//! replica's change made stale. After a lost connection (notifications may have been
//! missed) it drops everything. The TTL stays as a safety net.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;

use super::Shutdown;
use crate::compliance::{RuleCache, Stale, CACHE_CHANNEL};

/// The worker, for a PostgreSQL `url`.
pub async fn run(url: String, cache: Arc<RuleCache>, mut shutdown: Shutdown) {
    loop {
        match PgListener::connect(&url).await {
            Ok(mut listener) => {
                if let Err(error) = listener.listen(CACHE_CHANNEL).await {
                    tracing::warn!(%error, "cache sync: cannot listen");
                } else {
                    // Whatever changed while nobody listened is unknown.
                    cache.invalidate_all();
                    loop {
                        tokio::select! {
                            _ = shutdown.wait() => return,
                            received = listener.try_recv() => match received {
                                Ok(Some(notification)) => {
                                    cache.forget(&Stale::from_payload(notification.payload()));
                                }
                                // The connection dropped; the listener reconnects on the
                                // next call, and what was missed is unknown.
                                Ok(None) => cache.invalidate_all(),
                                Err(error) => {
                                    tracing::warn!(%error, "cache sync: listener failed");
                                    cache.invalidate_all();
                                    break;
                                }
                            },
                        }
                    }
                }
            }
            Err(error) => tracing::warn!(%error, "cache sync: cannot connect"),
        }
        tokio::select! {
            _ = shutdown.wait() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}
