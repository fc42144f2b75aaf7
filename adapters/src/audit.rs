//! The interface through which the server's own actions leave an audit event. The
//! audit trail (issue 7) plugs its appender in here; until then events are logged.

use std::sync::{Arc, Mutex};

use audit_chain::AuditEvent;
use chrono::Utc;
use serde_json::Value;

type Emit = dyn Fn(AuditEvent) + Send + Sync;

/// Where audit events go. Emitting never fails the operation that caused it.
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
    /// A sink that writes events to the log (target `audit`).
    pub fn logging() -> Self {
        AuditSink::new(|event| {
            tracing::info!(target: "audit", action = %event.action, actor = %event.actor_id,
                org = %event.org_id, target = ?event.target_id, outcome = ?event.outcome, "audit event");
        })
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
        (self.emit)(event);
    }
}
