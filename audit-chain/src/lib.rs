//! A tamper-evident, per-tenant audit trail.
//!
//! Each event is redacted ([`redact_details`]), linked after the head of its chain
//! (the chain key is `affectedOrgId`, or `orgId` when that is empty) and hashed:
//! `hash = hex(SHA-256(prevHash || JCS(immutable fields)))` ([`seal`]). A stored
//! chain is checked by pushing its rows, in `seq` order, through a
//! [`ChainVerifier`], whose memory does not grow with the chain and which tolerates
//! a pruned prefix.
//!
//! The crate does no I/O: no database, no clock, no environment. The caller
//! supplies the chain head, the event id and the time.

mod action;
mod build;
mod canonical;
mod chain;
mod checkpoint;
mod error;
mod event;
mod integers;
pub mod metrics;
mod redact;
mod registry;
mod verify;

pub use action::{
    check_remote_action, is_platform_action, is_platform_authority, platform_actions,
    validate_action_name, ActionError, PLATFORM_AUTHORITY_ACTIONS, REMOTE_ALLOW_LIST,
};
pub use build::{AlreadyEnded, Attempt, BuildOutcome, BuildState};
pub use canonical::canonical_json;
pub use chain::{seal, ChainHead, GENESIS_HASH};
pub use checkpoint::{
    checkpoint_due, Checkpoint, CheckpointCheck, CheckpointError, CheckpointProblem,
    CheckpointVerdict, NoteSigner, NoteVerifier,
};
pub use error::Error;
pub use event::{format_timestamp, to_micros, AuditEvent, SealedEvent, MAX_DETAILS_DEPTH};
pub use integers::quote_unsafe_integers;
pub use redact::{redact_details, redact_text, REDACTED, REDACTION_VERSION};
pub use registry::{repository_of, LogLabels, Mounted, RegistryEvent, TagCopy, TagDelete};
pub use verify::{verify, BreakReason, ChainVerifier, Verification};
