//! The adapters: HTTP, storage, configuration and the CLI around the pure crates.
//! The only crate of the workspace that touches the world.

pub mod audit;
pub mod auth;
pub mod cli;
pub mod compliance;
pub mod config;
pub mod cpu;
pub mod emitter;
pub mod error;
pub mod http;
pub mod metrics;
pub mod storage;
pub mod workers;
