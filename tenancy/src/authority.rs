//! Authority beyond Roles: the Owner of an organization and the platform's
//! super-admins (document 2: "Owner (full control, transfer ownership, delete)";
//! super-admins exist only through the bootstrap allow-list or another super-admin).

use chrono::{DateTime, Duration, Utc};

use crate::error::TenancyError;
use crate::gate::Principal;
use crate::org::{Membership, MembershipRole};

/// The built-in Role a membership role implies: Owners and Admins hold the Admin Role,
/// Members the Member Role.
///
/// ```
/// use tenancy::{implied_role, MembershipRole};
/// assert_eq!(implied_role(MembershipRole::Owner), "Admin");
/// assert_eq!(implied_role(MembershipRole::Member), "Member");
/// ```
pub fn implied_role(role: MembershipRole) -> &'static str {
    match role {
        MembershipRole::Owner | MembershipRole::Admin => "Admin",
        MembershipRole::Member => "Member",
    }
}

/// What an ownership transfer changes, all in one transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnershipTransfer {
    /// The Owner until now: stays a member with the Admin membership and Admin Role.
    pub from: String,
    /// The new Owner.
    pub to: String,
    /// The built-in Role the new Owner gives up (the one their old membership implied),
    /// when it is not the one they get.
    pub revoke: Option<&'static str>,
    /// The built-in Role the new Owner gets: full control.
    pub grant: &'static str,
}

/// Checks an ownership transfer and says what it changes. Only the current Owner or a
/// super-admin transfers, with a fresh step-up; the new Owner must be an active member.
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use tenancy::*;
/// let now = Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap();
/// let alice = Principal { user_id: "alice".into(), super_admin: false, stepped_up_at: Some(now) };
/// let bob = Membership { user_id: "bob".into(), org_id: "o".into(), role: MembershipRole::Member, active: true };
/// let plan = plan_transfer(&alice, "alice", Some(&bob), now, DEFAULT_STEP_UP_WINDOW).unwrap();
/// assert_eq!((plan.revoke, plan.grant), (Some("Member"), "Admin"));
/// // An Admin who is not the Owner cannot take ownership.
/// let carol = Principal { user_id: "carol".into(), ..alice.clone() };
/// assert_eq!(plan_transfer(&carol, "alice", Some(&bob), now, DEFAULT_STEP_UP_WINDOW),
///            Err(TenancyError::OwnerOnly));
/// ```
pub fn plan_transfer(
    actor: &Principal,
    owner_id: &str,
    new_owner: Option<&Membership>,
    now: DateTime<Utc>,
    step_up_window: Duration,
) -> Result<OwnershipTransfer, TenancyError> {
    if actor.user_id != owner_id && !actor.super_admin {
        return Err(TenancyError::OwnerOnly);
    }
    if !fresh(actor, now, step_up_window) {
        return Err(TenancyError::StepUpRequired);
    }
    let member = new_owner
        .filter(|m| m.active)
        .ok_or(TenancyError::NewOwnerNotMember)?;
    if member.user_id == owner_id {
        return Err(TenancyError::AlreadyOwner);
    }
    let grant = implied_role(MembershipRole::Owner);
    let held = implied_role(member.role);
    Ok(OwnershipTransfer {
        from: owner_id.to_owned(),
        to: member.user_id.clone(),
        revoke: (held != grant).then_some(held),
        grant,
    })
}

/// Whether a super-admin may be granted or revoked by `actor`: only a super-admin,
/// with a fresh step-up; and a revocation may not leave the platform without one
/// (`super_admins` counts them before the change).
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use tenancy::*;
/// let now = Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap();
/// let root = Principal { user_id: "root".into(), super_admin: true, stepped_up_at: Some(now) };
/// assert!(check_super_admin_change(&root, false, 2, now, DEFAULT_STEP_UP_WINDOW).is_ok());
/// assert_eq!(check_super_admin_change(&root, false, 1, now, DEFAULT_STEP_UP_WINDOW),
///            Err(TenancyError::LastSuperAdmin));
/// ```
pub fn check_super_admin_change(
    actor: &Principal,
    grant: bool,
    super_admins: usize,
    now: DateTime<Utc>,
    step_up_window: Duration,
) -> Result<(), TenancyError> {
    if !actor.super_admin {
        return Err(TenancyError::SuperAdminOnly);
    }
    if !fresh(actor, now, step_up_window) {
        return Err(TenancyError::StepUpRequired);
    }
    if !grant && super_admins <= 1 {
        return Err(TenancyError::LastSuperAdmin);
    }
    Ok(())
}

fn fresh(actor: &Principal, now: DateTime<Utc>, window: Duration) -> bool {
    actor
        .stepped_up_at
        .is_some_and(|at| at <= now && now - at <= window)
}
