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
