//! Roles: named sets of permissions, the built-in ones, and the escalation guard.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::error::TenancyError;
use crate::permission::Permission;

/// A Role of an organization.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Role {
    /// Its id.
    pub id: String,
    /// Its name, unique in the organization.
    pub name: String,
    /// What it grants.
    pub permissions: BTreeSet<Permission>,
    /// Seeded by the platform; not editable.
    #[serde(default)]
    pub built_in: bool,
}

/// The built-in Roles seeded for every organization, and Super Admin for the system
/// organization: (name, permissions).
///
/// ```
/// use tenancy::{builtin_roles, Permission};
/// let roles = builtin_roles(false);
/// assert_eq!(roles.iter().map(|r| r.0).collect::<Vec<_>>(),
///            ["Admin", "Member", "Compliance Viewer", "Compliance Editor", "Compliance Admin"]);
/// assert!(builtin_roles(true).iter().any(|r| r.0 == "Super Admin" && r.1.contains(&Permission::RegistryWrite)));
/// ```
pub fn builtin_roles(system: bool) -> Vec<(&'static str, BTreeSet<Permission>)> {
    use Permission::*;
    let mut roles = vec![
        ("Admin", Permission::org_assignable().collect()),
        (
            "Member",
            [PipelinesWrite, PluginsWrite, ComplianceRead, ReportsRead].into(),
        ),
        ("Compliance Viewer", [ComplianceRead].into()),
        (
            "Compliance Editor",
            [ComplianceRead, ComplianceWrite].into(),
        ),
        (
            "Compliance Admin",
            [ComplianceRead, ComplianceWrite, ComplianceReview].into(),
        ),
    ];
    if system {
        roles.push(("Super Admin", Permission::ALL.into_iter().collect()));
    }
    roles
}

/// The effective permissions of a set of Roles: their union.
pub fn union_of<'a>(roles: impl IntoIterator<Item = &'a Role>) -> BTreeSet<Permission> {
    roles
        .into_iter()
        .flat_map(|r| r.permissions.iter().copied())
        .collect()
}

/// Who is defining or handing out a Role.
#[derive(Debug, Clone, Copy)]
pub struct Author<'a> {
    /// A super-admin holds every permission.
    pub super_admin: bool,
    /// The author's effective permissions in the organization.
    pub permissions: &'a BTreeSet<Permission>,
}

impl Author<'_> {
    fn holds(&self, permission: Permission) -> bool {
        self.super_admin || self.permissions.contains(&permission)
    }
}

/// The guard for creating or updating a custom Role: `registry:*` is never
/// assignable (400 `PERMISSION_NOT_ASSIGNABLE`), and every other permission must be
/// held by the author (403 `PERMISSION_ESCALATION`, listing what is missing).
pub fn guard_role_definition(
    author: Author<'_>,
    permissions: &BTreeSet<Permission>,
) -> Result<(), TenancyError> {
    let not_assignable: Vec<Permission> = permissions
        .iter()
        .copied()
        .filter(|p| !p.is_org_assignable())
        .collect();
    if !not_assignable.is_empty() {
        return Err(TenancyError::NotAssignable(not_assignable));
    }
    guard(author, permissions)
}

/// The guard for assigning a Role to a member: the author must hold everything the
/// Role grants. Removing a Role from a member is not guarded.
pub fn guard_role_assignment(author: Author<'_>, role: &Role) -> Result<(), TenancyError> {
    guard(author, &role.permissions)
}

/// The guard for updating or deleting a Role: built-in Roles are fixed.
pub fn guard_role_mutation(role: &Role) -> Result<(), TenancyError> {
    if role.built_in {
        Err(TenancyError::BuiltInRole(role.name.clone()))
    } else {
        Ok(())
    }
}

fn guard(author: Author<'_>, permissions: &BTreeSet<Permission>) -> Result<(), TenancyError> {
    let missing: Vec<Permission> = permissions
        .iter()
        .copied()
        .filter(|p| !author.holds(*p))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(TenancyError::Escalation(missing))
    }
}
