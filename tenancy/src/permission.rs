//! Permissions: parsed `resource:action` strings from a closed catalog.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A permission of the catalog (SEMANTICS.md 4): the ones document 2 names, plus
/// `plugins:write`, `compliance:read`, `compliance:review` and `audit:read`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Permission {
    /// `pipelines:write`
    PipelinesWrite,
    /// `pipelines:publish`
    PipelinesPublish,
    /// `plugins:write`
    PluginsWrite,
    /// `plugins:publish`
    PluginsPublish,
    /// `members:manage`
    MembersManage,
    /// `roles:manage`
    RolesManage,
    /// `compliance:read`
    ComplianceRead,
    /// `compliance:write`
    ComplianceWrite,
    /// `compliance:review`
    ComplianceReview,
    /// `billing:manage`
    BillingManage,
    /// `reports:rollup`
    ReportsRollup,
    /// `reports:read`
    ReportsRead,
    /// `org:settings`
    OrgSettings,
    /// `invitations:manage`
    InvitationsManage,
    /// `audit:read`
    AuditRead,
    /// `messages:manage`: post and manage the organization's announcements, delete
    /// its members' messages (held by Admin).
    MessagesManage,
    /// `dashboards:write`: create, change, clone and delete the organization's
    /// dashboards (held by Admin).
    DashboardsWrite,
    /// `alerts:write`: the organization's alert rules and destinations, and testing
    /// a destination (held by Admin).
    AlertsWrite,
    /// `registry:read` (super-admin only)
    RegistryRead,
    /// `registry:write` (super-admin only)
    RegistryWrite,
}

/// A string that is not a permission of the catalog.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a known permission")]
pub struct UnknownPermission(pub String);

impl Permission {
    /// Every permission.
    pub const ALL: [Permission; 20] = [
        Permission::PipelinesWrite,
        Permission::PipelinesPublish,
        Permission::PluginsWrite,
        Permission::PluginsPublish,
        Permission::MembersManage,
        Permission::RolesManage,
        Permission::ComplianceRead,
        Permission::ComplianceWrite,
        Permission::ComplianceReview,
        Permission::BillingManage,
        Permission::ReportsRollup,
        Permission::ReportsRead,
        Permission::OrgSettings,
        Permission::InvitationsManage,
        Permission::AuditRead,
        Permission::MessagesManage,
        Permission::DashboardsWrite,
        Permission::AlertsWrite,
        Permission::RegistryRead,
        Permission::RegistryWrite,
    ];

    /// `resource:action`.
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::PipelinesWrite => "pipelines:write",
            Permission::PipelinesPublish => "pipelines:publish",
            Permission::PluginsWrite => "plugins:write",
            Permission::PluginsPublish => "plugins:publish",
            Permission::MembersManage => "members:manage",
            Permission::RolesManage => "roles:manage",
            Permission::ComplianceRead => "compliance:read",
            Permission::ComplianceWrite => "compliance:write",
            Permission::ComplianceReview => "compliance:review",
            Permission::BillingManage => "billing:manage",
            Permission::ReportsRollup => "reports:rollup",
            Permission::ReportsRead => "reports:read",
            Permission::OrgSettings => "org:settings",
            Permission::InvitationsManage => "invitations:manage",
            Permission::AuditRead => "audit:read",
            Permission::MessagesManage => "messages:manage",
            Permission::DashboardsWrite => "dashboards:write",
            Permission::AlertsWrite => "alerts:write",
            Permission::RegistryRead => "registry:read",
            Permission::RegistryWrite => "registry:write",
        }
    }

    /// Parses `resource:action`.
    ///
    /// ```
    /// use tenancy::Permission;
    /// assert_eq!(Permission::parse("pipelines:write"), Ok(Permission::PipelinesWrite));
    /// assert!(Permission::parse("pipelines:delete").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<Permission, UnknownPermission> {
        Permission::ALL
            .into_iter()
            .find(|p| p.as_str() == text)
            .ok_or_else(|| UnknownPermission(text.to_owned()))
    }

    /// Whether an organization may grant it in a Role: everything but `registry:*`.
    pub fn is_org_assignable(self) -> bool {
        !matches!(self, Permission::RegistryRead | Permission::RegistryWrite)
    }

    /// The org-assignable permissions.
    pub fn org_assignable() -> impl Iterator<Item = Permission> {
        Permission::ALL
            .into_iter()
            .filter(|p| p.is_org_assignable())
    }
}

impl std::fmt::Display for Permission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Permission {
    type Err = UnknownPermission;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Permission::parse(s)
    }
}

/// The schema of a permission: one of the catalog's `resource:action` strings.
#[cfg(feature = "schema")]
impl utoipa::PartialSchema for Permission {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .enum_values(Some(Permission::ALL.map(Permission::as_str)))
            .into()
    }
}

#[cfg(feature = "schema")]
impl utoipa::ToSchema for Permission {}

impl Serialize for Permission {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Permission {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Permission::parse(&text).map_err(serde::de::Error::custom)
    }
}
