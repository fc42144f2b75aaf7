//! The message feed (every replica): a few times a second, hands what is new to the
//! live streams this replica holds (`services::message_feed`).

use std::time::Duration;

use super::Shutdown;
use crate::services::context::AppState;

/// How often it reads: a message reaches a stream on any replica within a second.
pub const POLL: Duration = Duration::from_millis(250);

/// Runs until the server stops.
pub async fn run(state: AppState, mut shutdown: Shutdown) {
    loop {
        if shutdown.is_set() {
            break;
        }
        if let Err(error) = crate::replica::feed::follow(
            &state.infra.store,
            &state.replica.feed,
            chrono::Utc::now(),
        )
        .await
        {
            tracing::warn!(%error, "message feed: read failed; tried again");
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = shutdown.wait() => break,
        }
    }
}
