//! Background work: every worker is registered here, gets a shutdown signal, and is
//! drained on SIGTERM within a deadline. Work that must happen once across replicas
//! takes a database lease (`Store::take_lease`) before each round.
//!
//! - `relay`: chains the audit outbox in order and flushes folded denials (lease
//!   `audit-relay`).
//! - `cache_sync`: on PostgreSQL, drops the rule sets and gate facts another
//!   replica's change made stale, and gives back or forgets reserved units when an
//!   account's limits change or its usage is reset (every replica; no lease).
//! - `allowances`: gives back the monthly units this replica reserved and did not
//!   spend, when their organization is idle and when the server stops (every
//!   replica; no lease).
//! - `primary`: with several database hosts, keeps the pool on the primary and
//!   moves it after a failover (every replica; no lease).
//! - `heartbeat`: on PostgreSQL, writes the heartbeat row each second (the
//!   reporting standby's lag is read from it; every replica; no lease).
//! - `checkpoints`: signs checkpoints of the audit chains (lease `audit-checkpoints`).
//! - `builds`: runs plugin image builds from the build queue (every replica; each
//!   claim is exclusive).
//! - `reevaluation`: judges again the entities the re-evaluation queue names (every
//!   replica; each claim is exclusive).
//! - `scans`: sweeps requested and scheduled scans (every replica; each claim is
//!   exclusive, fenced, and resumed elsewhere when its lease expires).
//! - `schedules`: starts the scans of due schedules (lease `scan-scheduler`).
//! - `delivery`: sends notifications (inbox, e-mail, webhook) and records each
//!   attempt (every replica; each claim is exclusive).
//! - `digests`: turns ended windows of held notifications into digests (lease
//!   `notification-digests`).
//! - `quotas`: derives every account's limits again after start, and starts each
//!   month's period of the monthly quota types (lease `quota-periods`).
//! - `kms-check`: checks every customer key; three failures in a row orphan its
//!   organization, a key that works again recovers it (lease `kms-check`).
//! - `secrets-rewrite`: rewraps data keys after a platform key's rotation and
//!   rewrites older secrets in the current format (lease `secrets-rewrite`).
//! - `alerts`: evaluates due alert rules (lease `alert-evaluation`).
//! - `posture`: writes every organization's posture snapshot each hour (lease
//!   `posture-snapshots`).
//! - `retention`: prunes audit rows and check-log entries past retention (lease
//!   `retention`).

pub mod account_mail;
pub mod alerts;
pub mod allowances;
pub mod builds;
pub mod cache_sync;
pub mod checkpoints;
pub mod delivery;
pub mod digests;
pub mod exports;
pub mod heartbeat;
pub mod judgements;
pub mod keys;
pub mod message_feed;
pub mod posture;
pub mod primary;
pub mod quotas;
pub mod reevaluation;
pub mod registry;
pub mod relay;
pub mod reports;
pub mod retention;
pub mod scans;
pub mod schedules;

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The signal a worker watches: set once, when the server stops.
#[derive(Debug, Clone)]
pub struct Shutdown(watch::Receiver<bool>);

impl Shutdown {
    /// Whether the server is stopping.
    pub fn is_set(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves when the server starts stopping.
    pub async fn wait(&mut self) {
        while !*self.0.borrow() {
            if self.0.changed().await.is_err() {
                return;
            }
        }
    }
}

/// The registry of running workers.
#[derive(Debug)]
pub struct Workers {
    stop: watch::Sender<bool>,
    running: Vec<(&'static str, JoinHandle<()>)>,
}

impl Default for Workers {
    fn default() -> Self {
        Workers::new()
    }
}

impl Workers {
    /// An empty registry.
    pub fn new() -> Self {
        let (stop, _) = watch::channel(false);
        Workers {
            stop,
            running: Vec::new(),
        }
    }

    /// Starts a worker; it receives the shutdown signal.
    pub fn spawn<F, Fut>(&mut self, name: &'static str, worker: F)
    where
        F: FnOnce(Shutdown) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let shutdown = Shutdown(self.stop.subscribe());
        tracing::info!(worker = name, "worker started");
        self.running.push((name, tokio::spawn(worker(shutdown))));
    }

    /// Signals every worker to stop and waits for them, at most `deadline` in all;
    /// a worker still running then is aborted (what it left in the database is picked
    /// up at the next start).
    pub async fn drain(self, deadline: Duration) {
        let _ = self.stop.send(true);
        let until = tokio::time::Instant::now() + deadline;
        for (name, handle) in self.running {
            let abort = handle.abort_handle();
            match tokio::time::timeout_at(until, handle).await {
                Ok(_) => tracing::info!(worker = name, "worker stopped"),
                Err(_) => {
                    abort.abort();
                    tracing::warn!(worker = name, "worker did not stop in time: aborted");
                }
            }
        }
    }
}

/// Hands back everything `holder` (this process) holds when it stops: its leases are
/// deleted, and its claims on scans and exports expire now, so that another replica
/// takes them over at once. Answers how many.
pub async fn hand_back(
    store: &crate::storage::Store,
    holder: &str,
) -> crate::storage::StoreResult<u64> {
    let now = chrono::Utc::now();
    crate::storage::unit_of_work!(store, |tx| -> crate::storage::StoreError {
        tx.hand_back_leases(holder, now).await
    })
}
