//! The adapters: HTTP, storage, configuration and the CLI around the pure crates.
//! The only crate of the workspace that touches the world.

//!
//! Cargo features: `server` (the default) builds everything; `client` alone builds
//! only what other services embed, [`emitter::AuditClient`] and
//! [`client::ComplianceClient`], without axum or sqlx.

#[cfg(any(feature = "server", feature = "archive"))]
pub mod archive;
pub mod audit;
#[cfg(feature = "server")]
pub mod auth;
#[cfg(feature = "server")]
pub mod cli;
pub mod client;
pub mod code;
#[cfg(feature = "server")]
pub mod compliance;
pub mod config;
#[cfg(feature = "server")]
pub mod console;
#[cfg(feature = "server")]
pub mod cpu;
pub mod emitter;
#[cfg(feature = "server")]
pub mod http;
#[cfg(feature = "server")]
pub mod inventory;
pub mod keys;
#[cfg(feature = "server")]
pub mod logging;
pub mod metrics;
pub mod notify;
#[cfg(feature = "server")]
pub mod org_export;
#[cfg(feature = "server")]
pub mod outbound;
#[cfg(feature = "server")]
pub mod policy_report;
#[cfg(feature = "server")]
pub mod replica;
#[cfg(feature = "server")]
pub mod services;
#[cfg(feature = "server")]
pub mod storage;
#[cfg(feature = "server")]
pub mod workers;

/// A new random identifier: a UUID v4 that the audit trail's redaction leaves intact.
///
/// Redaction (SEMANTICS 2) replaces 12-digit runs and `dddd-dddd-dddd` in an event's
/// `targetId`; about one UUID in a hundred has such a run (a last group of twelve
/// decimal digits, say), and its audit events would name a target that does not
/// exist. Those are drawn again.
pub fn new_id() -> String {
    loop {
        let id = uuid::Uuid::new_v4().to_string();
        if audit_chain::redact_text(&id) == id.as_str() {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_survive_the_audit_redaction() {
        // About one UUID v4 in a hundred would not: 20,000 draws see hundreds.
        for _ in 0..20_000 {
            let id = super::new_id();
            assert_eq!(audit_chain::redact_text(&id), id.as_str());
            assert_eq!(
                uuid::Uuid::parse_str(&id).map(|u| u.get_version_num()),
                Ok(4)
            );
        }
        let shaped = "fe5b74e0-8248-45a1-b731-749643742123";
        assert_ne!(
            audit_chain::redact_text(shaped),
            shaped,
            "the shape it avoids"
        );
    }
}
