//! Organizations and teams, roles and permissions, and the permission gate.
//!
//! The server loads the state (the organization, the principal's memberships and
//! Roles) and asks this crate what is allowed; the crate does no I/O and reads no
//! clock: `authorize` takes `now`. Decisions explain themselves (which Roles granted
//! a permission, what was missing, whether a denial is audited, whether step-up is
//! fresh). Semantics follow `SEMANTICS.md` section 4.

mod authority;
mod authorship;
mod bootstrap;
mod endpoints;
mod error;
mod gate;
pub mod impersonation;
mod lifecycle;
mod org;
mod permission;
mod role;
mod signin;
pub mod sso;

pub use authority::{check_super_admin_change, implied_role, plan_transfer, OwnershipTransfer};
pub use authorship::{may_change, Authored};
pub use bootstrap::{check_bootstrap, BootstrapList};
pub use endpoints::Access;
pub use error::TenancyError;
pub use gate::{
    authorize, step_up_status, Decision, NotYourOrganization, OrgAccess, Principal, Reason,
    Requirement, Standing, StepUp, DEFAULT_STEP_UP_WINDOW,
};
pub use lifecycle::RestoreWindow;
pub use org::{
    check_team_parent, is_reserved_name, Membership, MembershipRole, Organization, SYSTEM_ORG_NAME,
};
pub use permission::{Permission, UnknownPermission};
pub use role::{
    builtin_roles, guard_role_assignment, guard_role_definition, guard_role_mutation, union_of,
    Author, Role,
};
pub use signin::{
    check_password, check_personal_token, hash_password, is_personal_token, personal_token,
    second_use, token_hint, token_is_current, totp_code, totp_secret_bytes, totp_secret_text,
    totp_step, totp_uri, verify_password, Charge, Failures, SecondUse, SignInError, Throttle,
    ThrottlePolicy, TokenScope, ARGON2_MEMORY_KIB, ARGON2_PASSES, MAX_PASSWORD_CHARS,
    MAX_PERSONAL_TOKEN_LIFETIME, MIN_PASSWORD_CHARS, PERSONAL_TOKEN_PREFIX, PERSONAL_TOKEN_RANDOM,
    REFRESH_GRACE,
};
