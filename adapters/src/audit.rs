//! The interface through which the server's own actions leave an audit event. The
//! audit trail (issue 7) plugs its appender in here; until then events are logged.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use audit_chain::AuditEvent;
use chrono::Utc;
use serde_json::Value;

use crate::storage::Store;

/// The five audit counters of document 3.
#[derive(Debug, Default)]
pub struct AuditCounters {
    /// Events handed over for delivery.
    pub emitted: AtomicU64,
    /// Events lost: refused for good, or not stored.
    pub dropped: AtomicU64,
    /// Events written to the durable spool after a failed delivery.
    pub spool_enqueued: AtomicU64,
    /// Events dropped because the spool was full.
    pub spool_dropped: AtomicU64,
    /// Spooled events delivered later.
    pub spool_redelivered: AtomicU64,
}

impl AuditCounters {
    /// Adds one to a counter.
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters in Prometheus text format.
    pub fn render(&self) -> String {
        use audit_chain::metrics::*;
        let mut out = String::new();
        for (name, value) in [
            (AUDIT_EMITTED_TOTAL, &self.emitted),
            (AUDIT_DROPPED_TOTAL, &self.dropped),
            (AUDIT_SPOOL_ENQUEUED_TOTAL, &self.spool_enqueued),
            (AUDIT_SPOOL_DROPPED_TOTAL, &self.spool_dropped),
            (AUDIT_SPOOL_REDELIVERED_TOTAL, &self.spool_redelivered),
        ] {
            out.push_str(&format!(
                "# TYPE {name} counter\n{name} {}\n",
                value.load(Ordering::Relaxed)
            ));
        }
        out
    }
}

type Emit = dyn Fn(AuditEvent) + Send + Sync;

/// Where the server's own audit events go. Emitting never fails the operation that
/// caused it.
#[derive(Clone)]
pub struct AuditSink {
    emit: Arc<Emit>,
}

impl std::fmt::Debug for AuditSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuditSink")
    }
}

/// What the server knows of an action, before it becomes an [`AuditEvent`].
#[derive(Debug, Clone, Default)]
pub struct Action<'a> {
    /// `<area>.<entity>.<verb>`.
    pub action: &'a str,
    /// The actor.
    pub actor_id: &'a str,
    /// The actor's e-mail.
    pub actor_email: Option<&'a str>,
    /// The actor's organization.
    pub org_id: &'a str,
    /// The organization operated on, when different.
    pub affected_org_id: Option<&'a str>,
    /// The kind of object.
    pub target_type: &'a str,
    /// The object.
    pub target_id: &'a str,
    /// Context.
    pub details: Value,
    /// `success` or `failure`.
    pub outcome: &'a str,
}

impl AuditSink {
    /// The server's sink: events go, in order, to a background task that appends
    /// them to their chains. A failed append is logged and counted as dropped.
    pub fn appender(store: Store, counters: Arc<AuditCounters>) -> Self {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<AuditEvent>();
        let worker_counters = counters.clone();
        tokio::spawn(async move {
            while let Some(event) = rx.recv().await {
                let action = event.action.clone();
                if let Err(error) = store.append_audit(event, Utc::now()).await {
                    AuditCounters::bump(&worker_counters.dropped);
                    tracing::warn!(%action, %error, "audit event not stored");
                }
            }
        });
        AuditSink::new(move |event| {
            AuditCounters::bump(&counters.emitted);
            if tx.send(event).is_err() {
                AuditCounters::bump(&counters.dropped);
            }
        })
    }

    /// Hands an event to the sink.
    pub fn emit(&self, event: AuditEvent) {
        (self.emit)(event);
    }

    /// A sink that keeps events in memory (tests).
    pub fn memory() -> (Self, Arc<Mutex<Vec<AuditEvent>>>) {
        let events = Arc::new(Mutex::new(Vec::new()));
        let kept = events.clone();
        let sink = AuditSink::new(move |event| {
            if let Ok(mut events) = kept.lock() {
                events.push(event);
            }
        });
        (sink, events)
    }

    /// A sink calling `emit` for each event.
    pub fn new(emit: impl Fn(AuditEvent) + Send + Sync + 'static) -> Self {
        AuditSink {
            emit: Arc::new(emit),
        }
    }

    /// Records an action (after it succeeded, or as a denial).
    pub fn record(&self, action: Action<'_>) {
        let event = AuditEvent {
            id: crate::storage::new_id(),
            action: action.action.to_owned(),
            actor_id: action.actor_id.to_owned(),
            actor_email: action.actor_email.map(str::to_owned),
            org_id: action.org_id.to_owned(),
            affected_org_id: action.affected_org_id.map(str::to_owned),
            target_type: Some(action.target_type.to_owned()),
            target_id: Some(action.target_id.to_owned()),
            details: action.details,
            outcome: Some(action.outcome.to_owned()),
            occurred_at: Utc::now(),
            service: Some("platform".to_owned()),
            idempotency_key: None,
        };
        self.emit(event);
    }
}
