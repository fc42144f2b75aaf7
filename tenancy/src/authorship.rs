//! Own versus anyone's (document 2: a Member "manages own pipelines and plugins").
//!
//! `pipelines:write` and `plugins:write` let a member create, and change what they
//! created. Changing anyone's (update, delete, deactivate in bulk) takes the kind's
//! `publish` permission: `pipelines:publish` for pipelines, `plugins:publish` for
//! plugins. The built-in Admin Role (and so the Owner) holds both, Member neither;
//! a custom Role grants "all" by including them. A super-admin, and an admin of the
//! parent managing a team, hold every permission they are judged with.

use std::collections::BTreeSet;

use crate::Permission;

/// An organization's entity that records who created it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authored {
    /// A pipeline.
    Pipeline,
    /// A plugin.
    Plugin,
}

impl Authored {
    /// The permission that changes anyone's entity of this kind.
    ///
    /// ```
    /// use tenancy::{Authored, Permission};
    /// assert_eq!(Authored::Pipeline.anyones(), Permission::PipelinesPublish);
    /// assert_eq!(Authored::Plugin.anyones(), Permission::PluginsPublish);
    /// ```
    pub const fn anyones(self) -> Permission {
        match self {
            Authored::Pipeline => Permission::PipelinesPublish,
            Authored::Plugin => Permission::PluginsPublish,
        }
    }
}

/// Whether `actor`, holding `permissions` in the entity's organization, may change
/// an entity of `kind` that `author` created.
///
/// ```
/// use std::collections::BTreeSet;
/// use tenancy::{may_change, Authored, Permission};
/// let member: BTreeSet<_> = [Permission::PipelinesWrite].into();
/// assert!(may_change("bob", "bob", &member, Authored::Pipeline));
/// assert!(!may_change("bob", "alice", &member, Authored::Pipeline));
/// let admin: BTreeSet<_> = [Permission::PipelinesWrite, Permission::PipelinesPublish].into();
/// assert!(may_change("carol", "alice", &admin, Authored::Pipeline));
/// assert!(!may_change("carol", "alice", &admin, Authored::Plugin));
/// ```
pub fn may_change(
    actor: &str,
    author: &str,
    permissions: &BTreeSet<Permission>,
    kind: Authored,
) -> bool {
    (!actor.is_empty() && actor == author) || permissions.contains(&kind.anyones())
}
