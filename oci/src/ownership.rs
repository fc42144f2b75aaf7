//! Which organization a repository belongs to, and the labels of its log lines.
//! (Whether a copy promotes to `system/` is the event's own rule:
//! `audit_chain::TagCopy::is_promotion_to_system`.)
//!
//! A repository's first path component names its organization: `system/...` is
//! the system organization's (visible to every authenticated user), any other
//! first component is the name of a root organization (organization names are
//! unique among roots, compared without case). A repository whose first component
//! names no organization belongs to the platform, and its events are chained in the
//! system organization.

use crate::reference::Repository;

/// The first path component of the system organization's repositories.
pub const SYSTEM_COMPONENT: &str = "system";

/// Who a repository belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// The system organization (`system/...`).
    System,
    /// The root organization of this name (compared without case), if one exists.
    Organization(String),
}

/// The owner a repository names.
///
/// ```
/// use oci::{owner_of, Owner, Repository};
/// let repo = |n| Repository::parse(n).unwrap();
/// assert_eq!(owner_of(&repo("system/plugin")), Owner::System);
/// assert_eq!(owner_of(&repo("org-a/tools/plugin")), Owner::Organization("org-a".into()));
/// assert_eq!(owner_of(&repo("plugin")), Owner::Organization("plugin".into()));
/// ```
pub fn owner_of(repository: &Repository) -> Owner {
    match repository.components().next() {
        Some(SYSTEM_COMPONENT) => Owner::System,
        first => Owner::Organization(first.unwrap_or_default().to_owned()),
    }
}

/// The `pluginName` label of a repository's log lines: its last path component
/// (`org-a/plugin` is the plugin `plugin`).
///
/// ```
/// use oci::{plugin_name, Repository};
/// assert_eq!(plugin_name(&Repository::parse("org-a/tools/lint").unwrap()), "lint");
/// ```
pub fn plugin_name(repository: &Repository) -> &str {
    repository.components().last().unwrap_or_default()
}
