//! The server's own audit events: what it knows of an action ([`Action`]) becomes an
//! [`AuditEvent`] that the storage call making the change writes to the outbox, in the
//! same transaction; `workers::relay` chains it. Also the emitter's counters.

use std::sync::atomic::{AtomicU64, Ordering};

use audit_chain::AuditEvent;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::Value;

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
        for (name, help, value) in [
            (
                AUDIT_EMITTED_TOTAL,
                "Audit events handed over for delivery.",
                &self.emitted,
            ),
            (
                AUDIT_DROPPED_TOTAL,
                "Audit events lost: refused for good, or not stored.",
                &self.dropped,
            ),
            (
                AUDIT_SPOOL_ENQUEUED_TOTAL,
                "Audit events written to the durable spool after a failed delivery.",
                &self.spool_enqueued,
            ),
            (
                AUDIT_SPOOL_DROPPED_TOTAL,
                "Audit events dropped because the spool was full.",
                &self.spool_dropped,
            ),
            (
                AUDIT_SPOOL_REDELIVERED_TOTAL,
                "Spooled audit events delivered later.",
                &self.spool_redelivered,
            ),
        ] {
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}\n",
                value.load(Ordering::Relaxed)
            ));
        }
        out
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

impl Action<'_> {
    /// The audit event of the action, as the server emits it (service `platform`).
    pub fn into_event(self) -> AuditEvent {
        AuditEvent {
            id: crate::new_id(),
            action: self.action.to_owned(),
            actor_id: self.actor_id.to_owned(),
            actor_email: self.actor_email.map(str::to_owned),
            org_id: self.org_id.to_owned(),
            affected_org_id: self.affected_org_id.map(str::to_owned),
            target_type: Some(self.target_type.to_owned()),
            target_id: Some(self.target_id.to_owned()),
            details: self.details,
            outcome: Some(self.outcome.to_owned()),
            occurred_at: Utc::now(),
            service: Some("platform".to_owned()),
            idempotency_key: None,
        }
    }
}

/// The audit event that stands for `count` denials folded into one, the first at
/// `first_at` and the last at `last_at` (`details.count`, `firstAt`, `lastAt`).
pub fn folded_denial(
    mut event: AuditEvent,
    count: u64,
    first_at: DateTime<Utc>,
    last_at: DateTime<Utc>,
) -> AuditEvent {
    if let Value::Object(details) = &mut event.details {
        details.insert("count".to_owned(), count.into());
        // As the fold's times are stored: RFC 3339, UTC, microseconds.
        let stamp = |at: DateTime<Utc>| at.to_rfc3339_opts(SecondsFormat::Micros, true);
        details.insert("firstAt".to_owned(), stamp(first_at).into());
        details.insert("lastAt".to_owned(), stamp(last_at).into());
    }
    event
}
