//! What one process keeps between requests: facts kept until they change, its
//! blocks of monthly units, the message feed of its live streams, the writers that
//! group work. Below the services (which use it through `AppState`): nothing here
//! imports a service.

pub mod allowance;
pub mod feed;
pub mod grouped;
pub mod kept;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use audit_chain::{AuditEvent, SealedEvent};

use crate::compliance::RuleCache;
use crate::storage::{LiveCheck, StoreResult};

/// The grouped writer of live checks' records.
pub type Recorder = grouped::Grouped<LiveCheck, StoreResult<()>>;

/// The grouped appender of audit events to their chains.
pub type Appender = grouped::Grouped<AuditEvent, StoreResult<(SealedEvent, bool)>>;

/// What this replica keeps for itself between requests (a part of `AppState`).
#[derive(Debug, Default)]
pub struct ReplicaState {
    /// Compiled effective rule sets.
    pub rule_cache: Arc<RuleCache>,
    /// The facts the gate and every check read, kept until they change.
    pub kept: Arc<kept::KeptFacts>,
    /// This replica's blocks of monthly units (API calls).
    pub allowances: Arc<allowance::Allowances>,
    /// Live checks waiting to be recorded together.
    pub recorder: Arc<Recorder>,
    /// Other services' audit events waiting to be sealed together.
    pub appender: Arc<Appender>,
    /// What is new in messages, handed to this replica's live streams.
    pub feed: Arc<feed::MessageFeed>,
    /// Users already recorded by this process, so that first sight writes once.
    seen: Mutex<HashSet<String>>,
    /// Set when the process starts stopping (SIGTERM): `/ready` fails from then on.
    draining: AtomicBool,
}

impl ReplicaState {
    /// The process starts stopping: `/ready` fails from now on, so that load
    /// balancers send nothing new while requests in flight finish.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::Release);
    }

    /// Whether the process is stopping.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Whether this process sees the user for the first time (so that first sight
    /// writes once).
    pub fn first_sight(&self, user_id: &str) -> bool {
        self.seen
            .lock()
            .map(|mut seen| seen.insert(user_id.to_owned()))
            .unwrap_or(true)
    }
}
