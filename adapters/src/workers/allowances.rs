//! Gives back the units of monthly quota types a replica reserved and did not spend
//! (`services::allowance`): every quarter of a second for the organizations idle for
//! a second, and all of them when the server stops (after the last request).

use std::time::Duration;

use super::Shutdown;
use crate::replica::allowance;
use crate::services::context::AppState;

const SWEEP: Duration = Duration::from_millis(250);

/// Runs until the server stops, then gives everything back.
pub async fn run(state: AppState, mut shutdown: Shutdown) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(SWEEP) => {
                allowance::give_back_idle(&state.infra.store, &state.replica.allowances).await;
            }
            _ = shutdown.wait() => break,
        }
    }
    allowance::give_back_all(&state.infra.store, &state.replica.allowances).await;
}
