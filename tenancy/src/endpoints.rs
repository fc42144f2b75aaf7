//! The organization and access endpoints of document 2 with the permission each one
//! needs (its "Permission" column), as data: the server wires every route from here.

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

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    /// HTTP method.
    pub method: &'static str,
    /// Path under `/api`, with `:name` parameters.
    pub path: &'static str,
    /// Who may call it.
    pub access: Access,
    /// Whether it needs a fresh step-up verification.
    pub step_up: bool,
}

impl Endpoint {
    /// The gate's requirement for this endpoint.
    pub fn requirement(&self) -> Requirement {
        Requirement {
            permission: match self.access {
                Access::Permission(p) => Some(p),
                _ => None,
            },
            super_admin_only: self.access == Access::SuperAdmin,
            changes_state: self.method != "GET",
            step_up: self.step_up,
        }
    }
}

const fn row(method: &'static str, path: &'static str, access: Access) -> Endpoint {
    Endpoint {
        method,
        path,
        access,
        step_up: false,
    }
}

const fn step_up(method: &'static str, path: &'static str, access: Access) -> Endpoint {
    Endpoint {
        method,
        path,
        access,
        step_up: true,
    }
}

use Access::*;
use Permission::*;

/// Document 2's table for `/organization` and `/invitation`.
pub const ENDPOINTS: &[Endpoint] = &[
    row("GET", "/organization", Authenticated),
    row("POST", "/organization", Permission(OrgSettings)),
    row("GET", "/organization/:id", OwnManagedOrSuperAdmin),
    row("PUT", "/organization/:id", SuperAdmin),
    step_up("DELETE", "/organization/:id", SuperAdmin),
    step_up("PATCH", "/organization/:id/tier", SuperAdmin),
    row("GET", "/organization/:id/export", Permission(OrgSettings)),
    step_up(
        "PATCH",
        "/organization/:id/transfer-owner",
        Permission(OrgSettings),
    ),
    row("GET", "/organization/:id/members", Member),
    row(
        "POST",
        "/organization/:id/members",
        Permission(MembersManage),
    ),
    row(
        "DELETE",
        "/organization/:id/members/:userId",
        Permission(MembersManage),
    ),
    row(
        "PATCH",
        "/organization/:id/members/:userId",
        Permission(MembersManage),
    ),
    row(
        "PATCH",
        "/organization/:id/members/:userId/activate",
        Permission(MembersManage),
    ),
    row(
        "PATCH",
        "/organization/:id/members/:userId/deactivate",
        Permission(MembersManage),
    ),
    row(
        "POST",
        "/organization/:id/members/bulk-add",
        Permission(MembersManage),
    ),
    row("GET", "/organization/:id/teams", Member),
    row("GET", "/organization/:id/roles", Member),
    row("POST", "/organization/:id/roles", Permission(RolesManage)),
    row(
        "PUT",
        "/organization/:id/roles/:roleId",
        Permission(RolesManage),
    ),
    row(
        "DELETE",
        "/organization/:id/roles/:roleId",
        Permission(RolesManage),
    ),
    row(
        "POST",
        "/organization/:id/roles/:roleId/members",
        Permission(RolesManage),
    ),
    row(
        "DELETE",
        "/organization/:id/roles/:roleId/members/:userId",
        Permission(RolesManage),
    ),
    row("POST", "/invitation/send", Permission(InvitationsManage)),
    row("GET", "/invitation", Permission(InvitationsManage)),
    row("DELETE", "/invitation/:id", Permission(InvitationsManage)),
    row(
        "POST",
        "/invitation/:id/resend",
        Permission(InvitationsManage),
    ),
];

/// The row for a request, matching `:name` segments against any non-empty segment.
///
/// ```
/// use tenancy::{endpoint, Access, Permission};
/// let e = endpoint("DELETE", "/organization/o1/members/u7").unwrap();
/// assert_eq!(e.access, Access::Permission(Permission::MembersManage));
/// assert!(endpoint("PATCH", "/organization/o1/tier").unwrap().step_up);
/// assert!(endpoint("GET", "/organization/o1/unknown").is_none());
/// ```
pub fn endpoint(method: &str, path: &str) -> Option<&'static Endpoint> {
    let path = path.trim_end_matches('/');
    ENDPOINTS
        .iter()
        .find(|e| e.method.eq_ignore_ascii_case(method) && matches(e.path, path))
}

fn matches(pattern: &str, path: &str) -> bool {
    let mut pattern = pattern.split('/');
    let mut path = path.split('/');
    loop {
        match (pattern.next(), path.next()) {
            (None, None) => return true,
            (Some(p), Some(s)) if p.starts_with(':') && !s.is_empty() => {}
            (Some(p), Some(s)) if p == s => {}
            _ => return false,
        }
    }
}
