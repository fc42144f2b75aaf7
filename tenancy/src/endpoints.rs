//! What a route of document 2 needs, in the words of its "Permission" column. The
//! server's route table states one of these per route; the gate reads it.

use crate::gate::Requirement;
use crate::permission::Permission;

/// What an endpoint's Permission column says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// "-": authentication only.
    Authenticated,
    /// "member": membership of the organization.
    Member,
    /// "own organization, managed team or system admin".
    OwnManagedOrSuperAdmin,
    /// A permission.
    Permission(Permission),
    /// "system admin": the global super-admin flag.
    SuperAdmin,
}

impl Access {
    /// The gate's requirement of a route with this access: `changes_state` for a
    /// request that is not a read (a denial is audited), `step_up` when it needs a
    /// fresh step-up verification.
    ///
    /// ```
    /// use tenancy::{Access, Permission};
    /// let r = Access::Permission(Permission::MembersManage).requirement(true, false);
    /// assert_eq!(r.permission, Some(Permission::MembersManage));
    /// assert!(r.changes_state && !r.super_admin_only && !r.step_up);
    /// assert!(Access::SuperAdmin.requirement(false, true).super_admin_only);
    /// assert_eq!(Access::Member.requirement(false, false).permission, None);
    /// ```
    pub fn requirement(self, changes_state: bool, step_up: bool) -> Requirement {
        Requirement {
            permission: match self {
                Access::Permission(p) => Some(p),
                _ => None,
            },
            super_admin_only: self == Access::SuperAdmin,
            changes_state,
            step_up,
        }
    }
}
