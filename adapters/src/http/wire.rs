//! The API's answer types that live beside their handlers, public under one name so
//! that whoever reads the API from Rust (the integration tests, an embedding service)
//! decodes an answer's `data` into the type the server serialized it from: a field
//! renamed or gone is a decoding error, not an empty value.

pub use super::announcements::{Announcement, AudienceKind};
pub use super::conversations::{Conversation, ConversationMessage, MessagePage, Participant};
pub use super::exemptions::Exemption;
pub use super::members::{Member, Role};
pub use super::organizations::{MyOrganization, Organization};
pub use super::pipelines::Pipeline;
pub use super::plugins::Plugin;
pub use super::policies::Policy;
pub use super::rules::{OrgRule, RuleVersion};
pub use super::validate::Verdict;
