//! What the permission gate reads about a user and an organization.

use sqlx::Row;
use tenancy::MembershipRole;

use super::decode::Decoder;
use super::orgs::membership_role;
use super::{Store, StoreResult};

/// What the permission gate needs about a user and an organization, in one query.
#[derive(Debug, Clone)]
pub struct AccessSnapshot {
    /// The organization (not deleted).
    pub org: super::OrgRecord,
    /// The user's membership of it.
    pub membership: Option<tenancy::Membership>,
    /// The user's stored super-admin flag.
    pub super_admin: bool,
}

impl Store {
    /// The organization, the user's membership of it and their super-admin flag, in
    /// one round trip; `None` when the organization does not exist.
    pub async fn access_snapshot(
        &self,
        org_id: &str,
        user_id: &str,
    ) -> StoreResult<Option<AccessSnapshot>> {
        let row = sqlx::query(&self.sql(
            "SELECT o.id, o.name, o.display_name, o.parent_org_id, o.tier, o.is_system, o.owner_id, o.created_at, o.updated_at,
                    m.role AS member_role, m.active AS member_active,
                    COALESCE((SELECT u.super_admin FROM users u WHERE u.id = $2), 0) AS super_admin
             FROM organizations o
             LEFT JOIN memberships m ON m.org_id = o.id AND m.user_id = $2
             WHERE o.id = $1 AND o.deleted_at IS NULL",
        ))
        .bind(org_id)
        .bind(user_id)
        .fetch_optional(self.pool())
        .await?;
        let Some(row) = row else { return Ok(None) };
        let org = super::orgs::org_from_row(&row)?;
        let membership = match row.try_get::<Option<String>, _>("member_role")? {
            Some(_) => {
                let d = Decoder::new(&row, "memberships", &["id"]);
                Some(tenancy::Membership {
                    user_id: user_id.to_owned(),
                    org_id: org_id.to_owned(),
                    role: d.named("member_role", membership_role)?,
                    active: d.flag("member_active")?,
                })
            }
            None => None,
        };
        Ok(Some(AccessSnapshot {
            org,
            membership,
            super_admin: Decoder::new(&row, "users", &["id"]).flag("super_admin")?,
        }))
    }
}

/// One organization a user belongs to, with their standing there.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MyOrganization {
    /// The organization.
    pub id: String,
    /// Its name.
    pub name: String,
    /// The root it is a team of.
    pub parent_org_id: Option<String>,
    /// Whether it is the system organization.
    pub is_system: bool,
    /// The membership role (owner, admin, member).
    pub role: MembershipRole,
    /// Whether the membership is active.
    pub active: bool,
    /// The Roles the user holds there, by name.
    pub roles: Vec<String>,
}

impl Store {
    /// A page of the organizations `user_id` is a member of (oldest first), with the
    /// membership and Roles there, and how many there are.
    pub async fn organizations_of(
        &self,
        user_id: &str,
        limit: u32,
        offset: u64,
    ) -> StoreResult<(Vec<MyOrganization>, u64)> {
        let (rows, total) = self
            .page(
                (
                    "o.id, o.name, o.parent_org_id, o.is_system, m.role, m.active",
                    "memberships m JOIN organizations o ON o.id = m.org_id",
                    "m.user_id = $1 AND o.deleted_at IS NULL",
                    "o.created_at, o.id",
                ),
                &[Some(user_id.to_owned())],
                limit,
                offset,
            )
            .await?;
        let names = sqlx::query(&self.sql(
            "SELECT rm.org_id, r.name FROM role_members rm JOIN roles r ON r.id = rm.role_id
             WHERE rm.user_id = $1 ORDER BY r.name",
        ))
        .bind(user_id)
        .fetch_all(self.pool())
        .await?;
        let mut roles: std::collections::HashMap<String, Vec<String>> =
            std::collections::HashMap::new();
        for row in &names {
            let d = Decoder::new(row, "role_members", &["org_id"]);
            roles
                .entry(d.get("org_id")?)
                .or_default()
                .push(d.get("name")?);
        }
        let items = rows
            .iter()
            .map(|row| {
                let d = Decoder::new(row, "memberships", &["id"]);
                let id: String = d.get("id")?;
                Ok(MyOrganization {
                    roles: roles.remove(&id).unwrap_or_default(),
                    id,
                    name: d.get("name")?,
                    parent_org_id: d.get("parent_org_id")?,
                    is_system: d.flag("is_system")?,
                    role: d.named("role", membership_role)?,
                    active: d.flag("active")?,
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((items, total))
    }
}
