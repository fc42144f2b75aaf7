//! The API's answer types that live beside their handlers, public under one name so
//! that whoever reads the API from Rust (the integration tests, an embedding service)
//! decodes an answer's `data` into the type the server serialized it from: a field
//! renamed or gone is a decoding error, not an empty value.

pub use super::admin::{SuperAdmin, SuperAdmins, UserFeatures};
pub use super::alerts::{DestinationList, History, RuleList};
pub use super::announcements::{Announcement, AudienceKind};
pub use super::audit::{AuditEvent, ChainVerdict, Checkpoint};
pub use super::billing::{BundleOffer, Bundles, Entitlement, Portal, Subscription};
pub use super::builds::{BuildJob, Purged, QueueCount, QueueStatus};
pub use super::catalog::{
    Activated, AutoSubscribed, CatalogRule, Pin, RuleImpact, RuleSubscription, Subscribed,
    Unsubscribed,
};
pub use super::conversations::{Conversation, ConversationMessage, MessagePage, Participant};
pub use super::exemptions::{Exemption, ExemptionIds};
pub use super::exports::ExportJob;
pub use super::generation::{
    AiProvider, AttemptEvent, GeneratedPipelineAnswer, GeneratedPluginAnswer,
};
pub use super::images::{ImageCopy, ImageDelete, MountedCount};
pub use super::invitations::Invitation;
pub use super::keys::{KeyConfiguration, KeyStatus};
pub use super::members::{Member, Role};
pub use super::messages::{Message, NotificationAttempt};
pub use super::organizations::{MyOrganization, Organization, OrganizationExport, TierChanged};
pub use super::pipelines::{Deregistered, Pipeline, Registration};
pub use super::plugins::{Changed, Plugin, PluginUsage};
pub use super::policies::Policy;
pub use super::preferences::Preference;
pub use super::reports::UnattributedList;
pub use super::response::{Deleted, Pagination};
pub use super::rules::{OrgRule, RuleVersion};
pub use super::scans::{
    CompliancePosture, FailingRuleCount, ResultCounts, Scan, ScanCounts, ScanEntityResult,
    ScanSchedule,
};
pub use super::signin::{ActiveOrganization, Revoked, SignedOut, Tokens};
pub use super::sso::{BreakGlass, Domain, Enforcement, IdentityProvider};
pub use super::templates::Templates;
pub use super::validate::Verdict;
pub use crate::services::accounts::{
    Account, Me, PersonalToken, Session, StepUpProof, TotpEnrollment,
};
pub use crate::services::invitations::InvitationStatus;
pub use crate::services::quotas::{OrgQuotas, QuotaStatus};
