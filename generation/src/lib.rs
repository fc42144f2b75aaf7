//! AI generation of pipelines and plugins, pure: no I/O, no clock.
//!
//! - `conversation`: what a model is told ([`Kind`], the instructions with the
//!   JSON Schema of the body it must write, the user's prompt or a repository's
//!   survey) and how a retry names the problems of the last answer.
//! - `answer`: the JSON document in a model's answer (inside a Markdown fence, after
//!   some words, or cut off: a truncated answer is a problem to retry with).
//! - `problem`: what was wrong with an answer ([`Problem`]): unreadable JSON, a
//!   value the API's validation refuses, a compliance rule that blocks it.
//! - `wire`: the three providers' wire formats: a request body from a conversation,
//!   and what one event of the answer's stream means ([`Step`]).
//! - `lines`: newline-delimited framing with a bound on a line (Ollama's stream).
//! - `sse`: server-sent events read from bytes as they arrive, with a bound on a
//!   line and an event (the OpenAI-compatible and Anthropic streams).
//! - `repository`: what a repository's file listing says (languages, build files,
//!   CI definitions) and the bounded description a model is given.

pub mod answer;
pub mod conversation;
pub mod lines;
pub mod problem;
pub mod repository;
pub mod sse;
pub mod wire;

pub use answer::json_of;
pub use conversation::{Conversation, Kind, Role, Turn, MAX_ATTEMPTS};
pub use lines::{LineBuffer, LineTooLong};
pub use problem::{Problem, ProblemKind};
pub use repository::{Entry, Survey};
pub use sse::{Event, EventReader, EventTooLong};
pub use wire::{Step, Wire};
