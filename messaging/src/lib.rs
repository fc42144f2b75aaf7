//! Announcements and conversations, pure: no I/O, no clock (instants are passed in).
//!
//! - `announcement`: `Severity`, `Window` (a start, an optional end: scheduled,
//!   active, ended), `Audience` (an organization with none, all or some of its
//!   teams; a list of organizations; every organization; one tier) and whether it
//!   reaches a viewer.
//! - `text`: titles and bodies as the limits allow them.
//! - `conversation`: who takes part (the author and the others named, each once,
//!   at most the limit).
//! - `markdown`: a safe subset of Markdown to HTML: raw HTML escaped as text, links
//!   to `http`, `https` and `mailto` only, images as their text.

pub mod announcement;
pub mod conversation;
pub mod markdown;
pub mod text;

pub use announcement::{Audience, Phase, Severity, Teams, Viewer, Window};
pub use conversation::participants;
pub use markdown::render;
pub use text::{check_text, TITLE_MAX};

/// A value refused, with the request's field that holds it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct MessageError {
    /// The field, as the API spells it.
    pub field: &'static str,
    /// Why.
    pub message: String,
}

impl MessageError {
    pub(crate) fn new(field: &'static str, message: impl Into<String>) -> MessageError {
        MessageError {
            field,
            message: message.into(),
        }
    }
}
