//! Roles and their members, always scoped by organization.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::Row;
use tenancy::{Permission, Role};

use super::decode::Decoder;
use super::orgs::{found, permissions_json};
use super::{new_id, stamp, taken, Store, StoreResult};

/// A Role with its members.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleRecord {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// What it grants.
    pub permissions: BTreeSet<Permission>,
    /// Seeded by the platform.
    pub built_in: bool,
    /// The users holding it.
    pub members: Vec<String>,
}

impl RoleRecord {
    /// The tenancy crate's view of it.
    pub fn role(&self) -> Role {
        Role {
            id: self.id.clone(),
            name: self.name.clone(),
            permissions: self.permissions.clone(),
            built_in: self.built_in,
        }
    }
}

/// A Role's stored permissions: every one must be in the catalog.
pub(super) fn permissions_of(d: &Decoder<'_>) -> StoreResult<BTreeSet<Permission>> {
    let names: Vec<String> = d.json("permissions")?;
    names
        .iter()
        .map(|p| {
            Permission::parse(p)
                .map_err(|_| d.reject("permissions", format_args!("unknown permission `{p}`")))
        })
        .collect()
}

pub(super) fn role_from_row(row: &sqlx::any::AnyRow) -> StoreResult<Role> {
    let d = Decoder::new(row, "roles", &["id"]);
    Ok(Role {
        id: d.get("id")?,
        name: d.get("name")?,
        permissions: permissions_of(&d)?,
        built_in: d.flag("built_in")?,
    })
}

impl Store {
    /// The Roles a user holds in an organization.
    pub async fn roles_of(&self, org_id: &str, user_id: &str) -> StoreResult<Vec<Role>> {
        let rows = sqlx::query(&self.sql(
            "SELECT r.id, r.name, r.permissions, r.built_in FROM roles r
             JOIN role_members rm ON rm.role_id = r.id
             WHERE rm.org_id = $1 AND rm.user_id = $2 AND r.org_id = $1",
        ))
        .bind(org_id)
        .bind(user_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(role_from_row).collect()
    }

    /// Every Role of an organization with its members.
    pub async fn roles(&self, org_id: &str) -> StoreResult<Vec<RoleRecord>> {
        self.roles_where(org_id, "id", None).await
    }

    /// The names and ids of an organization's Roles (without their members).
    pub async fn role_names(&self, org_id: &str) -> StoreResult<Vec<(String, String)>> {
        let rows =
            sqlx::query(&self.sql("SELECT id, name FROM roles WHERE org_id = $1 ORDER BY name"))
                .bind(org_id)
                .fetch_all(self.pool())
                .await?;
        rows.iter()
            .map(|row| {
                let d = super::decode::Decoder::new(row, "roles", &["id"]);
                Ok((d.get("name")?, d.get("id")?))
            })
            .collect()
    }

    /// One Role of an organization.
    pub async fn role(&self, org_id: &str, role_id: &str) -> StoreResult<Option<RoleRecord>> {
        Ok(self
            .roles_where(org_id, "id", Some(role_id))
            .await?
            .into_iter()
            .next())
    }

    /// A built-in Role by name.
    pub async fn role_named(&self, org_id: &str, name: &str) -> StoreResult<Option<RoleRecord>> {
        Ok(self
            .roles_where(org_id, "name", Some(name))
            .await?
            .into_iter()
            .next())
    }

    /// The Roles of an organization whose `column` (`id` or `name`, never user input)
    /// equals `value`, or all of them, each with its members: two queries whatever
    /// the number of Roles.
    pub(super) async fn roles_where(
        &self,
        org_id: &str,
        column: &str,
        value: Option<&str>,
    ) -> StoreResult<Vec<RoleRecord>> {
        let rows = sqlx::query(&self.sql(&format!(
            "SELECT r.id, r.name, r.permissions, r.built_in FROM roles r
             WHERE r.org_id = $1 AND ($2 IS NULL OR r.{column} = $2) ORDER BY r.built_in DESC, r.created_at, r.name"
        )))
        .bind(org_id)
        .bind(value)
        .fetch_all(self.pool())
        .await?;
        let members = sqlx::query(&self.sql(&format!(
            "SELECT rm.role_id, rm.user_id FROM role_members rm JOIN roles r ON r.id = rm.role_id
             WHERE rm.org_id = $1 AND ($2 IS NULL OR r.{column} = $2) ORDER BY rm.user_id"
        )))
        .bind(org_id)
        .bind(value)
        .fetch_all(self.pool())
        .await?;
        let mut holders: std::collections::HashMap<String, Vec<String>> =
            std::collections::HashMap::new();
        for m in &members {
            holders
                .entry(m.try_get("role_id")?)
                .or_default()
                .push(m.try_get("user_id")?);
        }
        rows.iter()
            .map(|row| {
                let role = role_from_row(row)?;
                Ok(RoleRecord {
                    members: holders.remove(&role.id).unwrap_or_default(),
                    id: role.id,
                    name: role.name,
                    permissions: role.permissions,
                    built_in: role.built_in,
                })
            })
            .collect()
    }

    /// Gives `user_id` the Role `role_id` of `org_id` inside the caller's transaction
    /// (held already: nothing changes).
    pub(super) async fn grant_role(
        &self,
        conn: &mut sqlx::AnyConnection,
        (org_id, role_id, user_id): (&str, &str, &str),
    ) -> StoreResult<()> {
        sqlx::query(&self.sql(
            "INSERT INTO role_members (role_id, org_id, user_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        ))
        .bind(role_id)
        .bind(org_id)
        .bind(user_id)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }
}

impl super::Transaction<'_> {
    /// Renames or re-permissions a custom Role.
    pub async fn update_role(
        &mut self,
        org_id: &str,
        role_id: &str,
        name: Option<&str>,
        permissions: Option<&BTreeSet<Permission>>,
    ) -> StoreResult<()> {
        let done = sqlx::query(&self.store.sql(
            "UPDATE roles SET name = COALESCE($3, name), permissions = COALESCE($4, permissions)
             WHERE org_id = $1 AND id = $2 AND built_in = 0",
        ))
        .bind(org_id)
        .bind(role_id)
        .bind(name)
        .bind(permissions.map(permissions_json))
        .execute(&mut *self.tx)
        .await
        .map_err(taken(|| "a role with that name already exists"))?;
        found(done.rows_affected(), "role")?;
        Ok(())
    }

    /// Deletes a custom Role and its assignments.
    pub async fn delete_role(&mut self, org_id: &str, role_id: &str) -> StoreResult<()> {
        sqlx::query(
            &self
                .store
                .sql("DELETE FROM role_members WHERE org_id = $1 AND role_id = $2"),
        )
        .bind(org_id)
        .bind(role_id)
        .execute(&mut *self.tx)
        .await?;
        let done = sqlx::query(
            &self
                .store
                .sql("DELETE FROM roles WHERE org_id = $1 AND id = $2 AND built_in = 0"),
        )
        .bind(org_id)
        .bind(role_id)
        .execute(&mut *self.tx)
        .await?;
        found(done.rows_affected(), "role")?;
        Ok(())
    }

    /// Gives a member a Role.
    pub async fn add_role_member(
        &mut self,
        org_id: &str,
        role_id: &str,
        user_id: &str,
    ) -> StoreResult<()> {
        self.store
            .grant_role(&mut self.tx, (org_id, role_id, user_id))
            .await?;
        Ok(())
    }

    /// Takes a Role from a member.
    pub async fn remove_role_member(
        &mut self,
        org_id: &str,
        role_id: &str,
        user_id: &str,
    ) -> StoreResult<()> {
        let done =
            sqlx::query(&self.store.sql(
                "DELETE FROM role_members WHERE org_id = $1 AND role_id = $2 AND user_id = $3",
            ))
            .bind(org_id)
            .bind(role_id)
            .bind(user_id)
            .execute(&mut *self.tx)
            .await?;
        found(done.rows_affected(), "role member")?;
        Ok(())
    }

    /// Creates a custom Role.
    pub async fn create_role(
        &mut self,
        org_id: &str,
        name: &str,
        permissions: &BTreeSet<Permission>,
        now: DateTime<Utc>,
    ) -> StoreResult<String> {
        let id = new_id();
        sqlx::query(&self.store.sql(
            "INSERT INTO roles (id, org_id, name, permissions, built_in, created_at) VALUES ($1, $2, $3, $4, 0, $5)",
        ))
        .bind(&id)
        .bind(org_id)
        .bind(name)
        .bind(permissions_json(permissions))
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await
        .map_err(taken(|| format!("a role named `{name}` already exists")))?;
        Ok(id)
    }
}
