//! The tamper-evident, per-tenant audit trail. Not built yet: see issue 3.
