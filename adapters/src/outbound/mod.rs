//! Clients of the services the server calls out to, each over the wire format of its
//! peer, with a timeout and a bound on what it reads.
//!
//! - `ai`: AI providers (OpenAI-compatible, Anthropic, Ollama) for generation.
//! - `git`: a bounded, shallow view of a Git repository.
//! - `oidc`: OpenID Connect providers (single sign-on).
//! - `dns`: TXT records that prove a claimed domain.
//! - `registry`: an OCI distribution registry (`REGISTRY_URL`).

pub mod ai;
pub mod dns;
pub mod git;
pub mod oidc;
pub mod registry;

use std::sync::Arc;

/// The clients of other services a process holds (a part of `AppState`).
#[derive(Debug)]
pub struct Outbound {
    /// The image registry's client, when `REGISTRY_URL` is set.
    pub registry: Option<Arc<registry::RegistryClient>>,
    /// The AI providers' client (one connection pool).
    pub ai: ai::AiClient,
    /// The key providers' client, with the data keys this replica unwrapped.
    pub keyring: Arc<crate::keys::Keyring>,
    /// Single sign-on's identity providers and TXT lookups.
    pub sso: Arc<oidc::SsoClients>,
}
