//! Users and organizations.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use entitlements::Tier;
use serde::Serialize;
use sqlx::Row;
use tenancy::{MembershipRole, Permission};

use super::decode::Decoder;
use super::{new_id, stamp, taken, Store, StoreError, StoreResult};

/// An organization as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OrgRecord {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its display name.
    pub display_name: Option<String>,
    /// The parent of a team.
    pub parent_org_id: Option<String>,
    /// Its tier.
    pub tier: Tier,
    /// Whether it is the system organization.
    pub is_system: bool,
    /// Its Owner.
    pub owner_id: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

impl OrgRecord {
    /// The tenancy crate's view of it.
    pub fn organization(&self) -> tenancy::Organization {
        tenancy::Organization {
            id: self.id.clone(),
            name: self.name.clone(),
            parent_org_id: self.parent_org_id.clone(),
            is_system: self.is_system,
        }
    }
}

/// What creating an organization stores, in one transaction.
#[derive(Debug, Clone)]
pub struct NewOrganization {
    /// Name.
    pub name: String,
    /// Display name.
    pub display_name: Option<String>,
    /// Parent, for a team.
    pub parent_org_id: Option<String>,
    /// Tier.
    pub tier: Tier,
    /// Whether it is the system organization.
    pub is_system: bool,
    /// The creator, who becomes its Owner and holds the Admin Role.
    pub owner_id: String,
    /// The built-in Roles to seed.
    pub builtin_roles: Vec<(&'static str, BTreeSet<Permission>)>,
}

pub(super) fn tier_name(tier: Tier) -> &'static str {
    match tier {
        Tier::Developer => "developer",
        Tier::Pro => "pro",
        Tier::Team => "team",
        Tier::Enterprise => "enterprise",
    }
}

pub(super) const ORG_COLUMNS: &str =
    "id, name, display_name, parent_org_id, tier, is_system, owner_id, created_at, updated_at";

pub(super) fn org_from_row(row: &sqlx::any::AnyRow) -> StoreResult<OrgRecord> {
    let d = Decoder::new(row, "organizations", &["id"]);
    Ok(OrgRecord {
        id: d.get("id")?,
        name: d.get("name")?,
        display_name: d.get("display_name")?,
        parent_org_id: d.get("parent_org_id")?,
        tier: d.named("tier", Tier::parse)?,
        is_system: d.flag("is_system")?,
        owner_id: d.get("owner_id")?,
        created_at: d.stamp("created_at")?,
        updated_at: d.stamp("updated_at")?,
    })
}

impl Store {
    /// Records a user the first time their token is seen.
    pub async fn ensure_user(
        &self,
        id: &str,
        email: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(&self.sql(
            "INSERT INTO users (id, email, super_admin, created_at) VALUES ($1, $2, 0, $3)
             ON CONFLICT (id) DO UPDATE SET email = COALESCE(users.email, excluded.email)",
        ))
        .bind(id)
        .bind(email)
        .bind(stamp(now))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// An organization that is not deleted.
    pub async fn organization(&self, id: &str) -> StoreResult<Option<OrgRecord>> {
        let row = sqlx::query(&self.sql(&format!(
            "SELECT {ORG_COLUMNS} FROM organizations WHERE id = $1 AND deleted_at IS NULL"
        )))
        .bind(id)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(org_from_row).transpose()
    }

    /// Whether the system organization exists.
    pub async fn system_exists(&self) -> StoreResult<bool> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM organizations WHERE is_system = 1")
            .fetch_one(self.pool())
            .await?;
        Ok(row.try_get::<i64, _>("n")? > 0)
    }

    /// The teams of a root organization, newest first, and how many there are.
    pub async fn teams(
        &self,
        parent_id: &str,
        limit: u32,
        offset: u64,
        ascending: bool,
    ) -> StoreResult<(Vec<OrgRecord>, u64)> {
        let order = if ascending { "ASC" } else { "DESC" };
        let rows = sqlx::query(&self.sql(&format!(
            "SELECT {ORG_COLUMNS} FROM organizations WHERE parent_org_id = $1 AND deleted_at IS NULL
             ORDER BY created_at {order}, id {order} LIMIT $2 OFFSET $3"
        )))
        .bind(parent_id)
        .bind(i64::from(limit))
        .bind(i64::try_from(offset).unwrap_or(i64::MAX))
        .fetch_all(self.pool())
        .await?;
        let total = sqlx::query(&self.sql(
            "SELECT COUNT(*) AS n FROM organizations WHERE parent_org_id = $1 AND deleted_at IS NULL",
        ))
        .bind(parent_id)
        .fetch_one(self.pool())
        .await?
        .try_get::<i64, _>("n")?;
        let teams = rows
            .iter()
            .map(org_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((teams, total.unsigned_abs()))
    }
}

pub(super) fn permissions_json(permissions: &BTreeSet<Permission>) -> String {
    serde_json::to_string(permissions).unwrap_or_else(|_| "[]".to_owned())
}

pub(super) fn found(rows: u64, what: &str) -> StoreResult<()> {
    if rows == 0 {
        Err(StoreError::NotFound(what.to_owned()))
    } else {
        Ok(())
    }
}

pub(super) fn membership_role(text: &str) -> Option<MembershipRole> {
    match text {
        "owner" => Some(MembershipRole::Owner),
        "admin" => Some(MembershipRole::Admin),
        "member" => Some(MembershipRole::Member),
        _ => None,
    }
}

pub(super) fn membership_role_name(role: MembershipRole) -> &'static str {
    match role {
        MembershipRole::Owner => "owner",
        MembershipRole::Admin => "admin",
        MembershipRole::Member => "member",
    }
}

impl Store {
    /// The users whose super-admin flag is set, by id.
    pub async fn super_admins(&self) -> StoreResult<Vec<String>> {
        let rows = sqlx::query("SELECT id FROM users WHERE super_admin = 1 ORDER BY id")
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|row| row.try_get::<String, _>("id").map_err(StoreError::from))
            .collect()
    }

    /// Whether the stored super-admin flag is set for a user.
    pub async fn is_super_admin(&self, user_id: &str) -> StoreResult<bool> {
        let row = sqlx::query(&self.sql("SELECT super_admin FROM users WHERE id = $1"))
            .bind(user_id)
            .fetch_optional(self.pool())
            .await?;
        Ok(match row {
            Some(row) => row.try_get::<i64, _>("super_admin")? != 0,
            None => false,
        })
    }
}

impl Store {
    /// The system organization, if it was created.
    pub async fn system_organization(&self) -> StoreResult<Option<OrgRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {ORG_COLUMNS} FROM organizations WHERE is_system = 1 AND deleted_at IS NULL"
        ))
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(org_from_row).transpose()
    }
}

impl Store {
    /// The live root organization of this name, compared without case (root names
    /// are unique that way).
    pub async fn root_organization_named(&self, name: &str) -> StoreResult<Option<OrgRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {ORG_COLUMNS} FROM organizations \
             WHERE parent_org_id IS NULL AND lower(name) = lower($1) AND deleted_at IS NULL"
        ))
        .bind(name)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(org_from_row).transpose()
    }
}

impl super::Transaction<'_> {
    /// Creates an organization with its Owner, its built-in Roles and the Owner in the
    /// Admin Role: its id. A system organization also makes the Owner a super-admin.
    pub async fn create_organization(
        &mut self,
        new: &NewOrganization,
        now: DateTime<Utc>,
    ) -> StoreResult<String> {
        let id = new_id();
        let at = stamp(now);

        sqlx::query(&self.store.sql(
                "INSERT INTO organizations (id, name, display_name, parent_org_id, tier, is_system, owner_id, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)",
            ))
            .bind(&id)
            .bind(&new.name)
            .bind(&new.display_name)
            .bind(&new.parent_org_id)
            .bind(tier_name(new.tier))
            .bind(i64::from(new.is_system))
            .bind(&new.owner_id)
            .bind(&at)
            .execute(&mut *self.tx)
            .await
            .map_err(taken(|| format!("an organization named `{}` already exists", new.name)))?;
        sqlx::query(&self.store.sql(
                "INSERT INTO memberships (org_id, user_id, role, active, created_at) VALUES ($1, $2, 'owner', 1, $3)",
            ))
            .bind(&id)
            .bind(&new.owner_id)
            .bind(&at)
            .execute(&mut *self.tx)
            .await?;
        for (name, permissions) in &new.builtin_roles {
            let role_id = new_id();
            sqlx::query(&self.store.sql(
                    "INSERT INTO roles (id, org_id, name, permissions, built_in, created_at) VALUES ($1, $2, $3, $4, 1, $5)",
                ))
                .bind(&role_id)
                .bind(&id)
                .bind(*name)
                .bind(permissions_json(permissions))
                .bind(&at)
                .execute(&mut *self.tx)
                .await?;
            if *name == "Admin" || *name == "Super Admin" {
                sqlx::query(&self.store.sql(
                    "INSERT INTO role_members (role_id, org_id, user_id) VALUES ($1, $2, $3)",
                ))
                .bind(&role_id)
                .bind(&id)
                .bind(&new.owner_id)
                .execute(&mut *self.tx)
                .await?;
            }
        }
        if new.is_system {
            sqlx::query(
                &self
                    .store
                    .sql("UPDATE users SET super_admin = 1 WHERE id = $1"),
            )
            .bind(&new.owner_id)
            .execute(&mut *self.tx)
            .await?;
        }
        Ok(id)
    }

    /// Renames an organization.
    pub async fn update_organization(
        &mut self,
        id: &str,
        name: Option<&str>,
        display_name: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let done = sqlx::query(&self.store.sql(
            "UPDATE organizations SET name = COALESCE($2, name), display_name = COALESCE($3, display_name), updated_at = $4
             WHERE id = $1 AND deleted_at IS NULL",
        ))
        .bind(id)
        .bind(name)
        .bind(display_name)
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        found(done.rows_affected(), "organization")?;
        Ok(())
    }

    /// Makes `to` the Owner with the Admin Role (`grant`), giving up the Role its
    /// old membership implied (`revoke`); the previous Owner stays an Admin member
    /// with the Admin Role. One transaction.
    pub async fn transfer_owner(
        &mut self,
        id: &str,
        (from, to): (&str, &str),
        (grant, revoke): (&str, Option<&str>),
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(
            &self
                .store
                .sql("UPDATE memberships SET role = 'admin' WHERE org_id = $1 AND user_id = $2"),
        )
        .bind(id)
        .bind(from)
        .execute(&mut *self.tx)
        .await?;
        sqlx::query(
            &self
                .store
                .sql("UPDATE memberships SET role = 'owner' WHERE org_id = $1 AND user_id = $2"),
        )
        .bind(id)
        .bind(to)
        .execute(&mut *self.tx)
        .await?;
        sqlx::query(
            &self
                .store
                .sql("UPDATE organizations SET owner_id = $2, updated_at = $3 WHERE id = $1"),
        )
        .bind(id)
        .bind(to)
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        if let Some(revoke) = revoke {
            sqlx::query(&self.store.sql(
                "DELETE FROM role_members WHERE org_id = $1 AND user_id = $2 AND role_id = $3",
            ))
            .bind(id)
            .bind(to)
            .bind(revoke)
            .execute(&mut *self.tx)
            .await?;
        }
        for user in [to, from] {
            self.store
                .grant_role(&mut self.tx, (id, grant, user))
                .await?;
        }
        Ok(())
    }

    /// Sets or clears a user's super-admin flag (creating the user record if it was
    /// never seen). Clearing is refused when it would leave no super-admin, checked in
    /// the same statement so that two revocations cannot race past it.
    pub async fn set_super_admin(
        &mut self,
        user_id: &str,
        flag: bool,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        if flag {
            sqlx::query(&self.store.sql(
                "INSERT INTO users (id, email, super_admin, created_at) VALUES ($1, NULL, 1, $2)
                 ON CONFLICT (id) DO UPDATE SET super_admin = 1",
            ))
            .bind(user_id)
            .bind(stamp(now))
            .execute(&mut *self.tx)
            .await?;
        } else {
            let done = sqlx::query(&self.store.sql(
                "UPDATE users SET super_admin = 0 WHERE id = $1 AND super_admin = 1
                 AND (SELECT COUNT(*) FROM users WHERE super_admin = 1) > 1",
            ))
            .bind(user_id)
            .execute(&mut *self.tx)
            .await?;
            if done.rows_affected() == 0 {
                return Err(StoreError::Conflict(format!(
                    "`{user_id}` is not a super-admin, or is the last one"
                )));
            }
        }
        Ok(())
    }
}
