//! The audit client's metric names (document 3), for the adapters to export.

/// Events handed to the client for delivery.
pub const AUDIT_EMITTED_TOTAL: &str = "audit_emitted_total";
/// Events lost (neither delivered nor spooled).
pub const AUDIT_DROPPED_TOTAL: &str = "audit_dropped_total";
/// Events written to the durable spool after a failed delivery.
pub const AUDIT_SPOOL_ENQUEUED_TOTAL: &str = "audit_spool_enqueued_total";
/// Events dropped because the spool was full.
pub const AUDIT_SPOOL_DROPPED_TOTAL: &str = "audit_spool_dropped_total";
/// Spooled events delivered later.
pub const AUDIT_SPOOL_REDELIVERED_TOTAL: &str = "audit_spool_redelivered_total";

/// All five, in the order above.
pub const ALL: [&str; 5] = [
    AUDIT_EMITTED_TOTAL,
    AUDIT_DROPPED_TOTAL,
    AUDIT_SPOOL_ENQUEUED_TOTAL,
    AUDIT_SPOOL_DROPPED_TOTAL,
    AUDIT_SPOOL_REDELIVERED_TOTAL,
];
