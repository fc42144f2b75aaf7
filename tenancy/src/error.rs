//! The crate's error type.

use crate::permission::Permission;

fn list(permissions: &[Permission]) -> String {
    permissions
        .iter()
        .map(|p| format!("`{p}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Refusals of organization and role changes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TenancyError {
    /// A team cannot hold teams (400 `VALIDATION_ERROR`).
    #[error("teams nest one level only: a team cannot have teams")]
    TeamUnderTeam,
    /// The system organization has no teams (400 `VALIDATION_ERROR`).
    #[error("the system organization cannot have teams")]
    TeamUnderSystem,
    /// The author lacks permissions the change would hand out (403 `PERMISSION_ESCALATION`).
    #[error("cannot grant permissions you do not hold: {}", list(.0))]
    Escalation(Vec<Permission>),
    /// `registry:*` in a custom Role (400 `PERMISSION_NOT_ASSIGNABLE`).
    #[error("permissions reserved to super-admins cannot be assigned: {}", list(.0))]
    NotAssignable(Vec<Permission>),
    /// Built-in Roles cannot be changed (409 `CONFLICT`).
    #[error("`{0}` is a built-in role and cannot be changed")]
    BuiltInRole(String),
    /// The system organization can only be created by a bootstrap identifier (403).
    #[error("only a bootstrap identifier can create the system organization")]
    NotBootstrapIdentifier,
    /// The system organization exists already (409 `CONFLICT`).
    #[error("the system organization already exists")]
    SystemExists,
    /// Only the current Owner or a super-admin transfers ownership (403 `FORBIDDEN`).
    #[error("only the owner or a super-admin may transfer ownership")]
    OwnerOnly,
    /// The new Owner must be an active member (400 `VALIDATION_ERROR`).
    #[error("the new owner must be an active member")]
    NewOwnerNotMember,
    /// The user owns the organization already (409 `CONFLICT`).
    #[error("that user already owns the organization")]
    AlreadyOwner,
    /// Only a super-admin may do this (403 `FORBIDDEN`).
    #[error("only a super-admin may do this")]
    SuperAdminOnly,
    /// A fresh step-up verification is needed (403 `STEP_UP_REQUIRED`).
    #[error("this operation needs a fresh step-up verification (X-Step-Up-Token)")]
    StepUpRequired,
    /// The last super-admin cannot be revoked (409 `CONFLICT`).
    #[error("the last super-admin cannot be revoked")]
    LastSuperAdmin,
}
