//! Clients of the services the server calls out to, each over the wire format of its
//! peer, with a timeout and a bound on what it reads.
//!
//! - `registry`: an OCI distribution registry (`REGISTRY_URL`).

pub mod registry;
