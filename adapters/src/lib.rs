//! The adapters: HTTP, storage, configuration and the CLI around the pure crates.
//! The only crate of the workspace that touches the world.

//!
//! Cargo features: `server` (the default) builds everything; `client` alone builds
//! only what other services embed, [`emitter::AuditClient`] and
//! [`client::ComplianceClient`], without axum or sqlx.

#[cfg(feature = "server")]
pub mod archive;
pub mod audit;
#[cfg(feature = "server")]
pub mod auth;
#[cfg(feature = "server")]
pub mod cli;
pub mod client;
#[cfg(feature = "server")]
pub mod compliance;
pub mod config;
#[cfg(feature = "server")]
pub mod cpu;
pub mod emitter;
#[cfg(feature = "server")]
pub mod error;
#[cfg(feature = "server")]
pub mod http;
pub mod metrics;
#[cfg(feature = "server")]
pub mod services;
#[cfg(feature = "server")]
pub mod storage;
#[cfg(feature = "server")]
pub mod workers;

/// A new random identifier (a UUID v4).
pub fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}
