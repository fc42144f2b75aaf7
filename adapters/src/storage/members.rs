//! Memberships and the seats they take, always scoped by organization.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{AnyConnection, Row};
use tenancy::MembershipRole;

use super::decode::Decoder;
use super::orgs::{found, membership_role, membership_role_name};
use super::{stamp, taken, Store, StoreResult};

pub(super) const MEMBER_SELECT: &str =
    "SELECT m.org_id, m.user_id, u.email, m.role, m.active, m.created_at
    FROM memberships m LEFT JOIN users u ON u.id = m.user_id";

/// A member of an organization.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberRecord {
    /// The organization.
    pub org_id: String,
    /// The user.
    pub user_id: String,
    /// Their e-mail, when known.
    pub email: Option<String>,
    /// Owner, admin or member.
    pub role: MembershipRole,
    /// Whether the membership is active.
    pub active: bool,
    /// When they joined.
    pub created_at: DateTime<Utc>,
}

impl MemberRecord {
    /// The tenancy crate's view of it.
    pub fn membership(&self) -> tenancy::Membership {
        tenancy::Membership {
            user_id: self.user_id.clone(),
            org_id: self.org_id.clone(),
            role: self.role,
            active: self.active,
        }
    }
}

pub(super) fn member_from_row(row: &sqlx::any::AnyRow) -> StoreResult<MemberRecord> {
    let d = Decoder::new(row, "memberships", &["org_id", "user_id"]);
    Ok(MemberRecord {
        org_id: d.get("org_id")?,
        user_id: d.get("user_id")?,
        email: d.get("email")?,
        role: d.named("role", membership_role)?,
        active: d.flag("active")?,
        created_at: d.stamp("created_at")?,
    })
}

impl Store {
    /// A user's membership of an organization.
    pub async fn membership(
        &self,
        org_id: &str,
        user_id: &str,
    ) -> StoreResult<Option<MemberRecord>> {
        let row = sqlx::query(&self.sql(&format!(
            "{MEMBER_SELECT} WHERE m.org_id = $1 AND m.user_id = $2"
        )))
        .bind(org_id)
        .bind(user_id)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(member_from_row).transpose()
    }

    /// A page of an organization's members and how many there are.
    pub async fn members(
        &self,
        org_id: &str,
        limit: u32,
        offset: u64,
        ascending: bool,
    ) -> StoreResult<(Vec<MemberRecord>, u64)> {
        let order = if ascending { "ASC" } else { "DESC" };
        let rows = sqlx::query(&self.sql(&format!(
            "{MEMBER_SELECT} WHERE m.org_id = $1 ORDER BY m.created_at {order}, m.user_id {order} LIMIT $2 OFFSET $3"
        )))
        .bind(org_id)
        .bind(i64::from(limit))
        .bind(i64::try_from(offset).unwrap_or(i64::MAX))
        .fetch_all(self.pool())
        .await?;
        let total =
            sqlx::query(&self.sql("SELECT COUNT(*) AS n FROM memberships WHERE org_id = $1"))
                .bind(org_id)
                .fetch_one(self.pool())
                .await?
                .try_get::<i64, _>("n")?;
        let members = rows
            .iter()
            .map(member_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((members, total.unsigned_abs()))
    }

    /// Inserts `user_id`'s memberships and the Roles they imply.
    pub(super) async fn insert_memberships(
        &self,
        tx: &mut AnyConnection,
        user_id: &str,
        role: MembershipRole,
        grants: &[(String, String)],
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        for (org_id, role_id) in grants {
            sqlx::query(&self.sql(
                "INSERT INTO memberships (org_id, user_id, role, active, created_at) VALUES ($1, $2, $3, 1, $4)",
            ))
            .bind(org_id)
            .bind(user_id)
            .bind(membership_role_name(role))
            .bind(stamp(now))
            .execute(&mut *tx)
            .await
            .map_err(taken(|| format!("`{user_id}` is already a member")))?;
            self.grant_role(&mut *tx, (org_id, role_id, user_id))
                .await?;
        }
        Ok(())
    }

    /// Takes an organization's row lock for the rest of the transaction, so that the
    /// checks of one organization that compare a count with a cap (seats of an
    /// account root, active schedules) run one after the other (PostgreSQL; SQLite
    /// has one writer anyway).
    pub(crate) async fn lock_organization(
        &self,
        conn: &mut AnyConnection,
        org_id: &str,
    ) -> StoreResult<()> {
        sqlx::query(&self.sql("UPDATE organizations SET seat_limit = seat_limit WHERE id = $1"))
            .bind(org_id)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    /// The seats of an account root: its limit (`None` before the entitlement is
    /// synchronized; -1 unlimited) and how many distinct people hold an active
    /// membership in it or its teams, as `conn` sees them.
    pub(super) async fn seats(
        &self,
        conn: &mut AnyConnection,
        root_id: &str,
    ) -> StoreResult<Seats> {
        let row = sqlx::query(&self.sql(
            "SELECT o.seat_limit, (SELECT COUNT(DISTINCT m.user_id) FROM memberships m JOIN organizations t ON t.id = m.org_id
                WHERE (t.id = $1 OR t.parent_org_id = $1) AND t.deleted_at IS NULL AND m.active = 1) AS used
             FROM organizations o WHERE o.id = $1",
        ))
        .bind(root_id)
        .fetch_one(&mut *conn)
        .await?;
        let d = Decoder::new(&row, "organizations", &[]);
        let used: i64 = d.get("used")?;
        Ok(Seats {
            limit: d.get("seat_limit")?,
            used: used.unsigned_abs(),
        })
    }
}

/// An account's seats, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seats {
    /// The limit in force (-1 unlimited; `None` before the entitlement is synchronized).
    pub limit: Option<i64>,
    /// Distinct people with an active membership in the root or its teams.
    pub used: u64,
}

impl super::Transaction<'_> {
    /// Inserts `user_id`'s memberships (organization, Role to grant) and the Roles
    /// they imply.
    pub async fn insert_memberships(
        &mut self,
        user_id: &str,
        role: MembershipRole,
        grants: &[(String, String)],
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        self.store
            .insert_memberships(&mut self.tx, user_id, role, grants, now)
            .await
    }

    /// Activates or deactivates a member; `NotFound` when there is none.
    pub async fn set_member_active(
        &mut self,
        (org_id, user_id): (&str, &str),
        active: bool,
    ) -> StoreResult<()> {
        let done = sqlx::query(
            &self
                .store
                .sql("UPDATE memberships SET active = $3 WHERE org_id = $1 AND user_id = $2"),
        )
        .bind(org_id)
        .bind(user_id)
        .bind(i64::from(active))
        .execute(&mut *self.tx)
        .await?;
        found(done.rows_affected(), "member")
    }

    /// The seats of an account root as the unit sees them (after its lock, with
    /// what it added).
    pub async fn seats(&mut self, root_id: &str) -> StoreResult<Seats> {
        self.store.seats(&mut self.tx, root_id).await
    }

    /// Removes a member and their Roles in the organization.
    pub async fn remove_member(&mut self, org_id: &str, user_id: &str) -> StoreResult<()> {
        sqlx::query(
            &self
                .store
                .sql("DELETE FROM role_members WHERE org_id = $1 AND user_id = $2"),
        )
        .bind(org_id)
        .bind(user_id)
        .execute(&mut *self.tx)
        .await?;
        let done = sqlx::query(
            &self
                .store
                .sql("DELETE FROM memberships WHERE org_id = $1 AND user_id = $2"),
        )
        .bind(org_id)
        .bind(user_id)
        .execute(&mut *self.tx)
        .await?;
        found(done.rows_affected(), "member")?;
        Ok(())
    }

    /// Changes a member's membership role, swapping the built-in Role it implies.
    pub async fn set_member_role(
        &mut self,
        org_id: &str,
        user_id: &str,
        role: MembershipRole,
        drop_role_id: &str,
        grant_role_id: &str,
    ) -> StoreResult<()> {
        let done = sqlx::query(
            &self
                .store
                .sql("UPDATE memberships SET role = $3 WHERE org_id = $1 AND user_id = $2"),
        )
        .bind(org_id)
        .bind(user_id)
        .bind(membership_role_name(role))
        .execute(&mut *self.tx)
        .await?;
        found(done.rows_affected(), "member")?;
        sqlx::query(
            &self.store.sql(
                "DELETE FROM role_members WHERE org_id = $1 AND user_id = $2 AND role_id = $3",
            ),
        )
        .bind(org_id)
        .bind(user_id)
        .bind(drop_role_id)
        .execute(&mut *self.tx)
        .await?;
        self.store
            .grant_role(&mut self.tx, (org_id, grant_role_id, user_id))
            .await?;
        Ok(())
    }
}
