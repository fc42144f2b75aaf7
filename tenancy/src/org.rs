//! Organizations, teams and memberships.

use serde::{Deserialize, Serialize};

use crate::error::TenancyError;

/// The reserved name of the system organization.
pub const SYSTEM_ORG_NAME: &str = "system";

/// An organization; a team is one with a parent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Organization {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// The root organization a team is nested under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_org_id: Option<String>,
    /// Whether this is the reserved system organization.
    #[serde(default)]
    pub is_system: bool,
}

impl Organization {
    /// Whether the organization is a team.
    pub fn is_team(&self) -> bool {
        self.parent_org_id.is_some()
    }
}

/// Whether `name` is the reserved system name (any case).
pub fn is_reserved_name(name: &str) -> bool {
    name.trim().eq_ignore_ascii_case(SYSTEM_ORG_NAME)
}

/// Checks that a team may be created under `parent`: teams nest exactly one level
/// under a root organization.
///
/// ```
/// use tenancy::{check_team_parent, Organization};
/// let root = Organization { id: "r".into(), name: "acme".into(), parent_org_id: None, is_system: false };
/// let team = Organization { parent_org_id: Some("r".into()), id: "t".into(), ..root.clone() };
/// assert!(check_team_parent(&root).is_ok());
/// assert!(check_team_parent(&team).is_err());
/// ```
pub fn check_team_parent(parent: &Organization) -> Result<(), TenancyError> {
    if parent.is_team() {
        return Err(TenancyError::TeamUnderTeam);
    }
    if parent.is_system {
        return Err(TenancyError::TeamUnderSystem);
    }
    Ok(())
}

/// A user's role in an organization's membership (document 2).
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MembershipRole {
    /// Full control, transfer ownership, delete.
    Owner,
    /// Manages plugins, pipelines, compliance rules, quotas, invitations.
    Admin,
    /// Manages their own pipelines and plugins.
    Member,
}

/// A user's membership of one organization.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Membership {
    /// The user.
    pub user_id: String,
    /// The organization.
    pub org_id: String,
    /// Owner, Admin or Member.
    pub role: MembershipRole,
    /// A deactivated member counts as no member.
    pub active: bool,
}

impl Membership {
    /// Whether this membership makes its holder a manager of the organization's teams.
    pub fn manages_teams(&self) -> bool {
        self.active && matches!(self.role, MembershipRole::Owner | MembershipRole::Admin)
    }
}
