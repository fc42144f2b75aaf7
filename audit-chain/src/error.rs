//! The crate's error type.

use crate::action::ActionError;

/// Everything that can go wrong when sealing an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The action name is malformed.
    #[error(transparent)]
    Action(#[from] ActionError),
    /// `orgId` is empty, so the event has no chain.
    #[error("orgId is empty")]
    MissingOrgId,
    /// `id` is empty.
    #[error("the event id is empty")]
    MissingId,
    /// The event belongs to another chain than the head it was sealed onto.
    #[error("the event belongs to chain `{event}`, not `{head}`")]
    WrongChain {
        /// The event's chain key.
        event: String,
        /// The head's chain key.
        head: String,
    },
    /// `details` is neither an object nor null.
    #[error("details must be a JSON object")]
    DetailsNotObject,
    /// `details` nests too deeply.
    #[error("details nest deeper than {max} levels")]
    DetailsTooDeep {
        /// The limit.
        max: usize,
    },
    /// The chain is full (its sequence number would overflow).
    #[error("the chain's sequence number is exhausted")]
    SequenceExhausted,
}
