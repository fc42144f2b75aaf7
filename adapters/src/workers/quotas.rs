//! The quota worker, under the `quota-periods` lease: once after start it derives
//! every account root's limits again and writes those that changed (so a changed
//! `QUOTA_TIER_*` or bundle variable reaches the pool rows), and every minute it
//! starts the new month for the monthly types (apiCalls, aiCalls): their usage goes
//! back to zero at the start of each calendar month, UTC. Charges already count a new
//! month from zero in their own statement; the worker makes the reset visible for
//! organizations that are idle.

use std::time::Duration;

use chrono::Utc;
use entitlements::Dimension;

use super::Shutdown;
use crate::config::Config;
use crate::replica::allowance::Allowances;
use crate::services::context::AppState;
use crate::storage::Store;

/// The lease the worker takes.
pub const LEASE: &str = "quota-periods";

const INTERVAL: Duration = Duration::from_secs(60);
const TTL: Duration = Duration::from_secs(300);
const PAGE: u32 = 200;

/// Runs until the server stops.
pub async fn run(state: AppState, holder: String, mut shutdown: Shutdown) {
    let mut derived = false;
    loop {
        match state
            .infra
            .store
            .take_lease(LEASE, &holder, TTL, Utc::now())
            .await
        {
            Ok(Some(_)) => {
                if !derived {
                    match derive_all(
                        &state.infra.store,
                        &state.config,
                        &state.replica.allowances,
                        Some(&shutdown),
                    )
                    .await
                    {
                        Ok(n) => {
                            derived = true;
                            tracing::info!(roots = n, "account limits derived again");
                        }
                        Err(error) => tracing::warn!(%error, "deriving account limits failed"),
                    }
                }
                match start_month(&state.infra.store).await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(rows = n, "monthly quotas reset"),
                    Err(error) => tracing::warn!(%error, "monthly quota reset failed"),
                }
            }
            Ok(None) => {}
            Err(error) => tracing::warn!(%error, "quota worker: cannot take the lease"),
        }
        tokio::select! {
            _ = tokio::time::sleep(INTERVAL) => {}
            _ = shutdown.wait() => break,
        }
    }
    let _ = state.infra.store.release_lease(LEASE, &holder).await;
}

/// Derives every account root's limits again, a page at a time (stopping early when
/// the server stops); how many roots it went through.
pub async fn derive_all(
    store: &Store,
    config: &Config,
    allowances: &Allowances,
    shutdown: Option<&Shutdown>,
) -> Result<u64, crate::services::ServiceError> {
    let mut offset = 0;
    loop {
        let (roots, _) = store.organizations_page(true, PAGE, offset).await?;
        if roots.is_empty() {
            return Ok(offset);
        }
        for root in &roots {
            if shutdown.is_some_and(Shutdown::is_set) {
                return Ok(offset);
            }
            crate::services::entitlement::resync(store, config, allowances, root, Utc::now())
                .await?;
        }
        offset += roots.len() as u64;
    }
}

/// Starts the current month for the monthly types wherever an earlier one is
/// stored; how many rows went back to zero.
pub async fn start_month(store: &Store) -> Result<u64, crate::storage::StoreError> {
    let monthly: Vec<&str> = Dimension::ALL
        .iter()
        .filter(|d| d.is_monthly())
        .map(|d| d.name())
        .collect();
    let period = crate::services::quotas::period_of(Utc::now());
    store.start_period(&monthly, &period).await
}
