//! The permission gate: who may act in which organization, and why.

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use crate::org::{Membership, Organization};
use crate::permission::Permission;
use crate::role::Role;

/// Default freshness window of a step-up verification.
pub const DEFAULT_STEP_UP_WINDOW: Duration = Duration::minutes(5);

/// Who is asking, as the verified token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The token subject.
    pub user_id: String,
    /// The global super-admin flag.
    pub super_admin: bool,
    /// When the user last passed step-up verification, if ever.
    pub stepped_up_at: Option<DateTime<Utc>>,
}

/// How the principal stands towards an organization.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Standing {
    /// The global super-admin flag.
    SuperAdmin,
    /// An active member of the organization.
    Member,
    /// An active Owner or Admin of the team's parent organization.
    Manager,
}

/// The one answer for an organization that does not exist and for one that is not
/// the principal's, so that ids leak nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the organization does not exist or is not yours")]
pub struct NotYourOrganization;

/// What the caller loaded about the principal and one organization.
#[derive(Debug, Clone, Copy)]
pub struct OrgAccess<'a> {
    /// The organization, if it exists.
    pub organization: Option<&'a Organization>,
    /// The principal's membership of it.
    pub membership: Option<&'a Membership>,
    /// The Roles the principal holds in it.
    pub roles: &'a [Role],
    /// For a team: the principal's membership of the parent organization.
    pub parent_membership: Option<&'a Membership>,
    /// For a team: the Roles the principal holds in the parent organization.
    pub parent_roles: &'a [Role],
}

impl<'a> OrgAccess<'a> {
    /// Whether (and how) the principal may act in the organization through
    /// `x-org-id`. A deactivated member is no member.
    ///
    /// ```
    /// use tenancy::*;
    /// let alice = Principal { user_id: "alice".into(), super_admin: false, stepped_up_at: None };
    /// let nothing = OrgAccess { organization: None, membership: None, roles: &[],
    ///                           parent_membership: None, parent_roles: &[] };
    /// assert_eq!(nothing.standing(&alice), Err(NotYourOrganization));
    /// ```
    pub fn standing(&self, principal: &Principal) -> Result<Standing, NotYourOrganization> {
        let organization = self.organization.ok_or(NotYourOrganization)?;
        if principal.super_admin {
            return Ok(Standing::SuperAdmin);
        }
        let belongs = |m: &Membership, org_id: &str| {
            m.active && m.user_id == principal.user_id && m.org_id == org_id
        };
        if self
            .membership
            .is_some_and(|m| belongs(m, &organization.id))
        {
            return Ok(Standing::Member);
        }
        if let (Some(parent_id), Some(parent)) =
            (&organization.parent_org_id, self.parent_membership)
        {
            if belongs(parent, parent_id) && parent.manages_teams() {
                return Ok(Standing::Manager);
            }
        }
        Err(NotYourOrganization)
    }

    /// The Roles that count for the principal here: their own, or, for a manager of a
    /// team, the ones they hold in the parent.
    fn effective_roles(&self, standing: Standing) -> &'a [Role] {
        match standing {
            Standing::Manager => self.parent_roles,
            _ => self.roles,
        }
    }
}

/// What an operation needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requirement {
    /// The permission needed; `None` when membership suffices.
    pub permission: Option<Permission>,
    /// Only a super-admin may do it ("system admin" in document 2).
    pub super_admin_only: bool,
    /// Whether the request changes state (non-GET): a denial is audited.
    pub changes_state: bool,
    /// Whether it needs a fresh step-up verification.
    pub step_up: bool,
}

/// Why the gate decided as it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Reason {
    /// A super-admin passes every check.
    SuperAdmin,
    /// A Role granted the permission.
    Granted,
    /// Membership (or management) was all it needed.
    Membership,
    /// Not a member, not a manager: 403 `TENANT_FORBIDDEN` for `x-org-id`, 404 for a
    /// path id.
    NotYourOrganization,
    /// No Role grants the permission: 403 `FORBIDDEN`.
    PermissionMissing,
    /// Only a super-admin may do this: 403 `FORBIDDEN`.
    SuperAdminOnly,
    /// Step-up verification missing or stale: 403 `STEP_UP_REQUIRED`.
    StepUpRequired,
}

/// Whether a required step-up verification is fresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum StepUp {
    /// The operation needs none.
    NotRequired,
    /// Verified within the window.
    Fresh,
    /// Never verified.
    Missing,
    /// Verified too long ago (or at a time in the future).
    Stale,
}

/// A decision that explains itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// Whether the request may proceed.
    pub allowed: bool,
    /// Why.
    pub reason: Reason,
    /// How the principal stands towards the organization, if at all.
    pub standing: Option<Standing>,
    /// The Roles that grant the permission.
    pub granted_by: Vec<String>,
    /// The permission that was missing.
    pub missing: Option<Permission>,
    /// A denied state-changing request must be audited as `authz.denied`.
    pub audit_as_denied: bool,
    /// The step-up check.
    pub step_up: StepUp,
}

/// Decides whether `principal` may do an operation with `requirement` in the
/// organization described by `access`, at `now`.
///
/// ```
/// use std::collections::BTreeSet;
/// use chrono::{TimeZone, Utc};
/// use tenancy::*;
///
/// let org = Organization { id: "o1".into(), name: "acme".into(), parent_org_id: None, is_system: false };
/// let member = Membership { user_id: "bob".into(), org_id: "o1".into(), role: MembershipRole::Member, active: true };
/// let roles = [Role { id: "r".into(), name: "Member".into(), built_in: true,
///                     permissions: BTreeSet::from([Permission::PipelinesWrite]) }];
/// let access = OrgAccess { organization: Some(&org), membership: Some(&member), roles: &roles,
///                          parent_membership: None, parent_roles: &[] };
/// let bob = Principal { user_id: "bob".into(), super_admin: false, stepped_up_at: None };
/// let now = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
///
/// let write = Requirement { permission: Some(Permission::PipelinesWrite), super_admin_only: false,
///                           changes_state: true, step_up: false };
/// let d = authorize(&bob, &access, write, now, DEFAULT_STEP_UP_WINDOW);
/// assert!(d.allowed);
/// assert_eq!(d.granted_by, ["Member"]);
///
/// let settings = Requirement { permission: Some(Permission::OrgSettings), ..write };
/// let d = authorize(&bob, &access, settings, now, DEFAULT_STEP_UP_WINDOW);
/// assert!(!d.allowed && d.audit_as_denied);
/// assert_eq!(d.missing, Some(Permission::OrgSettings));
/// ```
pub fn authorize(
    principal: &Principal,
    access: &OrgAccess<'_>,
    requirement: Requirement,
    now: DateTime<Utc>,
    step_up_window: Duration,
) -> Decision {
    let deny = |reason: Reason,
                standing: Option<Standing>,
                missing: Option<Permission>,
                step_up: StepUp| Decision {
        allowed: false,
        reason,
        standing,
        granted_by: Vec::new(),
        missing,
        audit_as_denied: requirement.changes_state,
        step_up,
    };
    let standing = match access.standing(principal) {
        Ok(standing) => standing,
        Err(NotYourOrganization) => {
            return deny(
                Reason::NotYourOrganization,
                None,
                requirement.permission,
                StepUp::NotRequired,
            )
        }
    };
    let (reason, granted_by) = if standing == Standing::SuperAdmin {
        (Reason::SuperAdmin, Vec::new())
    } else if requirement.super_admin_only {
        return deny(
            Reason::SuperAdminOnly,
            Some(standing),
            None,
            StepUp::NotRequired,
        );
    } else {
        match requirement.permission {
            None => (Reason::Membership, Vec::new()),
            Some(permission) => {
                let granted_by: Vec<String> = access
                    .effective_roles(standing)
                    .iter()
                    .filter(|r| r.permissions.contains(&permission))
                    .map(|r| r.name.clone())
                    .collect();
                if granted_by.is_empty() {
                    return deny(
                        Reason::PermissionMissing,
                        Some(standing),
                        Some(permission),
                        StepUp::NotRequired,
                    );
                }
                (Reason::Granted, granted_by)
            }
        }
    };
    let step_up = step_up_status(principal, requirement.step_up, now, step_up_window);
    if matches!(step_up, StepUp::Missing | StepUp::Stale) {
        return deny(Reason::StepUpRequired, Some(standing), None, step_up);
    }
    Decision {
        allowed: true,
        reason,
        standing: Some(standing),
        granted_by,
        missing: None,
        audit_as_denied: false,
        step_up,
    }
}

/// Whether `principal` has the step-up verification an operation asks for: fresh
/// when verified within `window` before `now` (never in the future).
pub fn step_up_status(
    principal: &Principal,
    required: bool,
    now: DateTime<Utc>,
    window: Duration,
) -> StepUp {
    if !required {
        return StepUp::NotRequired;
    }
    match principal.stepped_up_at {
        None => StepUp::Missing,
        Some(at) if at <= now && now - at <= window => StepUp::Fresh,
        Some(_) => StepUp::Stale,
    }
}
