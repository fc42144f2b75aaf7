//! Memberships, Roles and invitations, always scoped by organization.

use audit_chain::AuditEvent;
use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{AnyConnection, Row};
use tenancy::{MembershipRole, Permission, Role};

use super::decode::Decoder;
use super::orgs::{found, membership_role, membership_role_name, permissions_json};
use super::quota::QuotaRefusal;
use super::{new_id, stamp, Store, StoreError, StoreResult};

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

/// Where an invitation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum InvitationStatus {
    /// Sent, not yet answered.
    Pending,
    /// Revoked by the organization.
    Revoked,
    /// Accepted by the invitee, who became a member.
    Accepted,
}

/// An invitation to join an organization.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InvitationRecord {
    /// Its id.
    pub id: String,
    /// The organization.
    pub org_id: String,
    /// Who is invited.
    pub email: String,
    /// The membership role offered.
    pub role: MembershipRole,
    /// Its state.
    pub status: InvitationStatus,
    /// Who sent it.
    pub invited_by: String,
    /// How many times it was sent.
    pub sent_count: i64,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it was last sent.
    pub last_sent_at: DateTime<Utc>,
}

fn member_from_row(row: &sqlx::any::AnyRow) -> StoreResult<MemberRecord> {
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

/// A Role's stored permissions: every one must be in the catalog.
fn permissions_of(d: &Decoder<'_>) -> StoreResult<BTreeSet<Permission>> {
    let names: Vec<String> = d.json("permissions")?;
    names
        .iter()
        .map(|p| {
            Permission::parse(p)
                .map_err(|_| d.reject("permissions", format_args!("unknown permission `{p}`")))
        })
        .collect()
}

fn role_from_row(row: &sqlx::any::AnyRow) -> StoreResult<Role> {
    let d = Decoder::new(row, "roles", &["id"]);
    Ok(Role {
        id: d.get("id")?,
        name: d.get("name")?,
        permissions: permissions_of(&d)?,
        built_in: d.flag("built_in")?,
    })
}

fn invitation_from_row(row: &sqlx::any::AnyRow) -> StoreResult<InvitationRecord> {
    let d = Decoder::new(row, "invitations", &["id"]);
    Ok(InvitationRecord {
        id: d.get("id")?,
        org_id: d.get("org_id")?,
        email: d.get("email")?,
        role: d.named("role", membership_role)?,
        status: d.named("status", |s| match s {
            "pending" => Some(InvitationStatus::Pending),
            "revoked" => Some(InvitationStatus::Revoked),
            "accepted" => Some(InvitationStatus::Accepted),
            _ => None,
        })?,
        invited_by: d.get("invited_by")?,
        sent_count: d.get("sent_count")?,
        created_at: d.stamp("created_at")?,
        last_sent_at: d.stamp("last_sent_at")?,
    })
}

const MEMBER_SELECT: &str = "SELECT m.org_id, m.user_id, u.email, m.role, m.active, m.created_at
    FROM memberships m LEFT JOIN users u ON u.id = m.user_id";

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

    /// Adds members to organizations with a membership role and the matching built-in
    /// Role, all or nothing. Each entry is (organization, Role to grant).
    pub async fn add_members(
        &self,
        user_id: &str,
        role: MembershipRole,
        grants: &[(String, String)],
        (seats_of, now): (&str, DateTime<Utc>),
        audit: &[AuditEvent],
    ) -> StoreResult<Result<(), QuotaRefusal>> {
        let mut tx = self.pool().begin().await?;
        self.lock_organization(&mut tx, seats_of).await?;
        self.insert_memberships(&mut tx, user_id, role, grants, now)
            .await?;
        if let Err(refusal) = self.check_seats(&mut tx, seats_of).await? {
            return Ok(Err(refusal));
        }
        self.enqueue(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(Ok(()))
    }

    /// Inserts `user_id`'s memberships and the Roles they imply.
    async fn insert_memberships(
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
            .map_err(|e| match StoreError::from(e) {
                StoreError::Conflict(_) => StoreError::Conflict(format!("`{user_id}` is already a member")),
                other => other,
            })?;
            sqlx::query(&self.sql(
                "INSERT INTO role_members (role_id, org_id, user_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
            ))
            .bind(role_id)
            .bind(org_id)
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        }
        Ok(())
    }

    /// Accepts a pending invitation: `user_id` joins with the invited role (its
    /// implied Role `role_id`), within the account's seats, in one transaction.
    /// `Ok(Err)` when no seat is left; 404 when the invitation is no longer pending.
    pub async fn accept_invitation(
        &self,
        (invitation_id, org_id, role_id): (&str, &str, &str),
        (user_id, role): (&str, MembershipRole),
        (seats_of, now): (&str, DateTime<Utc>),
        audit: &[AuditEvent],
    ) -> StoreResult<Result<(), QuotaRefusal>> {
        let mut tx = self.pool().begin().await?;
        self.lock_organization(&mut tx, seats_of).await?;
        let done = sqlx::query(&self.sql(
            "UPDATE invitations SET status = 'accepted' WHERE org_id = $1 AND id = $2 AND status = 'pending'",
        ))
        .bind(org_id)
        .bind(invitation_id)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            // Another acceptance (or a revocation) committed first: the same answer
            // as a retry after it.
            return Err(StoreError::Conflict(
                "the invitation is no longer pending".to_owned(),
            ));
        }
        let grants = [(org_id.to_owned(), role_id.to_owned())];
        self.insert_memberships(&mut tx, user_id, role, &grants, now)
            .await?;
        if let Err(refusal) = self.check_seats(&mut tx, seats_of).await? {
            return Ok(Err(refusal));
        }
        self.enqueue(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(Ok(()))
    }

    /// An invitation by its id alone (its invitee is not a member yet).
    pub async fn invitation_by_id(&self, id: &str) -> StoreResult<Option<InvitationRecord>> {
        let row = sqlx::query(&self.sql("SELECT * FROM invitations WHERE id = $1"))
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(invitation_from_row).transpose()
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

    /// Whether the account's distinct active members fit its seat limit, as the
    /// transaction sees them (after its own changes).
    async fn check_seats(
        &self,
        conn: &mut AnyConnection,
        root_id: &str,
    ) -> StoreResult<Result<(), QuotaRefusal>> {
        let row = sqlx::query(&self.sql(
            "SELECT o.seat_limit, (SELECT COUNT(DISTINCT m.user_id) FROM memberships m JOIN organizations t ON t.id = m.org_id
                WHERE (t.id = $1 OR t.parent_org_id = $1) AND t.deleted_at IS NULL AND m.active = 1) AS used
             FROM organizations o WHERE o.id = $1",
        ))
        .bind(root_id)
        .fetch_one(&mut *conn)
        .await?;
        let d = Decoder::new(&row, "organizations", &[]);
        let limit: Option<i64> = d.get("seat_limit")?;
        let used: i64 = d.get("used")?;
        match limit {
            None => Err(StoreError::Other(format!(
                "the seat limit of {root_id} is not synchronized"
            ))),
            // The count includes the member this transaction adds: entitlements
            // decides whether the seats take one more over the others.
            Some(limit) => match super::quota::refusal(used.saturating_sub(1), limit, 1) {
                Some(refusal) => Ok(Err(refusal)),
                None => Ok(Ok(())),
            },
        }
    }

    /// Removes a member and their Roles in the organization.
    pub async fn remove_member(
        &self,
        org_id: &str,
        user_id: &str,
        audit: &[AuditEvent],
    ) -> StoreResult<()> {
        let mut tx = self.pool().begin().await?;
        sqlx::query(&self.sql("DELETE FROM role_members WHERE org_id = $1 AND user_id = $2"))
            .bind(org_id)
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        let done =
            sqlx::query(&self.sql("DELETE FROM memberships WHERE org_id = $1 AND user_id = $2"))
                .bind(org_id)
                .bind(user_id)
                .execute(&mut *tx)
                .await?;
        found(done.rows_affected(), "member")?;
        self.enqueue(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Changes a member's membership role, swapping the built-in Role it implies.
    pub async fn set_member_role(
        &self,
        org_id: &str,
        user_id: &str,
        role: MembershipRole,
        drop_role_id: &str,
        grant_role_id: &str,
        audit: &[AuditEvent],
    ) -> StoreResult<()> {
        let mut tx = self.pool().begin().await?;
        let done = sqlx::query(
            &self.sql("UPDATE memberships SET role = $3 WHERE org_id = $1 AND user_id = $2"),
        )
        .bind(org_id)
        .bind(user_id)
        .bind(membership_role_name(role))
        .execute(&mut *tx)
        .await?;
        found(done.rows_affected(), "member")?;
        sqlx::query(
            &self.sql(
                "DELETE FROM role_members WHERE org_id = $1 AND user_id = $2 AND role_id = $3",
            ),
        )
        .bind(org_id)
        .bind(user_id)
        .bind(drop_role_id)
        .execute(&mut *tx)
        .await?;
        sqlx::query(&self.sql(
            "INSERT INTO role_members (role_id, org_id, user_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        ))
        .bind(grant_role_id)
        .bind(org_id)
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
        self.enqueue(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Activates or deactivates a member.
    pub async fn set_member_active(
        &self,
        org_id: &str,
        user_id: &str,
        (active, seats_of): (bool, &str),
        audit: &[AuditEvent],
    ) -> StoreResult<Result<(), QuotaRefusal>> {
        let mut tx = self.pool().begin().await?;
        self.lock_organization(&mut tx, seats_of).await?;
        let done = sqlx::query(
            &self.sql("UPDATE memberships SET active = $3 WHERE org_id = $1 AND user_id = $2"),
        )
        .bind(org_id)
        .bind(user_id)
        .bind(i64::from(active))
        .execute(&mut *tx)
        .await?;
        found(done.rows_affected(), "member")?;
        if active {
            if let Err(refusal) = self.check_seats(&mut tx, seats_of).await? {
                return Ok(Err(refusal));
            }
        }
        self.enqueue(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(Ok(()))
    }

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
    async fn roles_where(
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

    /// Creates a custom Role.
    pub async fn create_role(
        &self,
        org_id: &str,
        name: &str,
        permissions: &BTreeSet<Permission>,
        now: DateTime<Utc>,
        audit: &(dyn Fn(&str) -> Vec<AuditEvent> + Sync),
    ) -> StoreResult<String> {
        let mut tx = self.pool().begin().await?;
        let id = new_id();
        sqlx::query(&self.sql(
            "INSERT INTO roles (id, org_id, name, permissions, built_in, created_at) VALUES ($1, $2, $3, $4, 0, $5)",
        ))
        .bind(&id)
        .bind(org_id)
        .bind(name)
        .bind(permissions_json(permissions))
        .bind(stamp(now))
        .execute(&mut *tx)
        .await
        .map_err(|e| match StoreError::from(e) {
            StoreError::Conflict(_) => StoreError::Conflict(format!("a role named `{name}` already exists")),
            other => other,
        })?;
        self.enqueue(&mut tx, &audit(&id)).await?;
        tx.commit().await?;
        Ok(id)
    }

    /// Renames or re-permissions a custom Role.
    pub async fn update_role(
        &self,
        org_id: &str,
        role_id: &str,
        name: Option<&str>,
        permissions: Option<&BTreeSet<Permission>>,
        audit: &[AuditEvent],
    ) -> StoreResult<()> {
        let mut tx = self.pool().begin().await?;
        let done = sqlx::query(&self.sql(
            "UPDATE roles SET name = COALESCE($3, name), permissions = COALESCE($4, permissions)
             WHERE org_id = $1 AND id = $2 AND built_in = 0",
        ))
        .bind(org_id)
        .bind(role_id)
        .bind(name)
        .bind(permissions.map(permissions_json))
        .execute(&mut *tx)
        .await
        .map_err(|e| match StoreError::from(e) {
            StoreError::Conflict(_) => {
                StoreError::Conflict("a role with that name already exists".to_owned())
            }
            other => other,
        })?;
        found(done.rows_affected(), "role")?;
        self.enqueue(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Deletes a custom Role and its assignments.
    pub async fn delete_role(
        &self,
        org_id: &str,
        role_id: &str,
        audit: &[AuditEvent],
    ) -> StoreResult<()> {
        let mut tx = self.pool().begin().await?;
        sqlx::query(&self.sql("DELETE FROM role_members WHERE org_id = $1 AND role_id = $2"))
            .bind(org_id)
            .bind(role_id)
            .execute(&mut *tx)
            .await?;
        let done = sqlx::query(
            &self.sql("DELETE FROM roles WHERE org_id = $1 AND id = $2 AND built_in = 0"),
        )
        .bind(org_id)
        .bind(role_id)
        .execute(&mut *tx)
        .await?;
        found(done.rows_affected(), "role")?;
        self.enqueue(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Gives a member a Role.
    pub async fn add_role_member(
        &self,
        org_id: &str,
        role_id: &str,
        user_id: &str,
        audit: &[AuditEvent],
    ) -> StoreResult<()> {
        let mut tx = self.pool().begin().await?;
        sqlx::query(&self.sql(
            "INSERT INTO role_members (role_id, org_id, user_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        ))
        .bind(role_id)
        .bind(org_id)
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
        self.enqueue(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Takes a Role from a member.
    pub async fn remove_role_member(
        &self,
        org_id: &str,
        role_id: &str,
        user_id: &str,
        audit: &[AuditEvent],
    ) -> StoreResult<()> {
        let mut tx = self.pool().begin().await?;
        let done =
            sqlx::query(&self.sql(
                "DELETE FROM role_members WHERE org_id = $1 AND role_id = $2 AND user_id = $3",
            ))
            .bind(org_id)
            .bind(role_id)
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        found(done.rows_affected(), "role member")?;
        self.enqueue(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Records an invitation.
    pub async fn create_invitation(
        &self,
        org_id: &str,
        email: &str,
        role: MembershipRole,
        invited_by: &str,
        now: DateTime<Utc>,
        audit: &(dyn Fn(&str) -> Vec<AuditEvent> + Sync),
    ) -> StoreResult<InvitationRecord> {
        let id = new_id();
        let mut tx = self.pool().begin().await?;
        sqlx::query(&self.sql(
            "INSERT INTO invitations (id, org_id, email, role, status, invited_by, sent_count, created_at, last_sent_at)
             VALUES ($1, $2, $3, $4, 'pending', $5, 1, $6, $6)",
        ))
        .bind(&id)
        .bind(org_id)
        .bind(email)
        .bind(membership_role_name(role))
        .bind(invited_by)
        .bind(stamp(now))
        .execute(&mut *tx)
        .await?;
        self.enqueue(&mut tx, &audit(&id)).await?;
        tx.commit().await?;
        self.invitation(org_id, &id)
            .await?
            .ok_or_else(|| StoreError::Other("the new invitation vanished".to_owned()))
    }

    /// One invitation of an organization.
    pub async fn invitation(
        &self,
        org_id: &str,
        id: &str,
    ) -> StoreResult<Option<InvitationRecord>> {
        let row = sqlx::query(&self.sql("SELECT * FROM invitations WHERE org_id = $1 AND id = $2"))
            .bind(org_id)
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(invitation_from_row).transpose()
    }

    /// A page of an organization's invitations and how many there are.
    pub async fn invitations(
        &self,
        org_id: &str,
        limit: u32,
        offset: u64,
        ascending: bool,
    ) -> StoreResult<(Vec<InvitationRecord>, u64)> {
        let order = if ascending { "ASC" } else { "DESC" };
        let rows = sqlx::query(&self.sql(&format!(
            "SELECT * FROM invitations WHERE org_id = $1 ORDER BY created_at {order}, id {order} LIMIT $2 OFFSET $3"
        )))
        .bind(org_id)
        .bind(i64::from(limit))
        .bind(i64::try_from(offset).unwrap_or(i64::MAX))
        .fetch_all(self.pool())
        .await?;
        let total =
            sqlx::query(&self.sql("SELECT COUNT(*) AS n FROM invitations WHERE org_id = $1"))
                .bind(org_id)
                .fetch_one(self.pool())
                .await?
                .try_get::<i64, _>("n")?;
        let items = rows
            .iter()
            .map(invitation_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((items, total.unsigned_abs()))
    }

    /// Revokes a pending invitation.
    pub async fn revoke_invitation(
        &self,
        org_id: &str,
        id: &str,
        audit: &[AuditEvent],
    ) -> StoreResult<()> {
        let mut tx = self.pool().begin().await?;
        let done = sqlx::query(&self.sql(
            "UPDATE invitations SET status = 'revoked' WHERE org_id = $1 AND id = $2 AND status = 'pending'",
        ))
        .bind(org_id)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        found(done.rows_affected(), "pending invitation")?;
        self.enqueue(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Counts another sending of a pending invitation.
    pub async fn resend_invitation(
        &self,
        org_id: &str,
        id: &str,
        now: DateTime<Utc>,
        audit: &[AuditEvent],
    ) -> StoreResult<()> {
        let mut tx = self.pool().begin().await?;
        let done = sqlx::query(&self.sql(
            "UPDATE invitations SET sent_count = sent_count + 1, last_sent_at = $3
             WHERE org_id = $1 AND id = $2 AND status = 'pending'",
        ))
        .bind(org_id)
        .bind(id)
        .bind(stamp(now))
        .execute(&mut *tx)
        .await?;
        found(done.rows_affected(), "pending invitation")?;
        self.enqueue(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(())
    }
}

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
