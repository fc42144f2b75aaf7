//! Invitations: sent, accepted, revoked, resent.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::Row;
use tenancy::MembershipRole;

use super::decode::Decoder;
use super::orgs::{found, membership_role, membership_role_name};
use super::{new_id, stamp, Store, StoreError, StoreResult};

/// Where an invitation stands (its schema documents the answers that carry it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
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

pub(super) fn invitation_from_row(row: &sqlx::any::AnyRow) -> StoreResult<InvitationRecord> {
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

impl Store {
    /// An invitation by its id alone (its invitee is not a member yet).
    pub async fn invitation_by_id(&self, id: &str) -> StoreResult<Option<InvitationRecord>> {
        let row = sqlx::query(&self.sql("SELECT * FROM invitations WHERE id = $1"))
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(invitation_from_row).transpose()
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
}

impl super::Transaction<'_> {
    /// Records an invitation: its id.
    pub async fn create_invitation(
        &mut self,
        org_id: &str,
        email: &str,
        role: MembershipRole,
        invited_by: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<String> {
        let id = new_id();

        sqlx::query(&self.store.sql(
                "INSERT INTO invitations (id, org_id, email, role, status, invited_by, sent_count, created_at, last_sent_at)
                 VALUES ($1, $2, $3, $4, 'pending', $5, 1, $6, $6)",
            ))
            .bind(&id)
            .bind(org_id)
            .bind(email)
            .bind(membership_role_name(role))
            .bind(invited_by)
            .bind(stamp(now))
            .execute(&mut *self.tx)
            .await?;
        Ok(id)
    }

    /// Marks a pending invitation accepted; another acceptance (or a revocation)
    /// that committed first is a conflict (the same answer as a retry after it).
    pub async fn accept_invitation(
        &mut self,
        org_id: &str,
        invitation_id: &str,
    ) -> StoreResult<()> {
        let done = sqlx::query(&self.store.sql(
            "UPDATE invitations SET status = 'accepted' WHERE org_id = $1 AND id = $2 AND status = 'pending'",
        ))
        .bind(org_id)
        .bind(invitation_id)
        .execute(&mut *self.tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Conflict(
                "the invitation is no longer pending".to_owned(),
            ));
        }
        Ok(())
    }

    /// Revokes a pending invitation.
    pub async fn revoke_invitation(&mut self, org_id: &str, id: &str) -> StoreResult<()> {
        let done = sqlx::query(&self.store.sql(
            "UPDATE invitations SET status = 'revoked' WHERE org_id = $1 AND id = $2 AND status = 'pending'",
        ))
        .bind(org_id)
        .bind(id)
        .execute(&mut *self.tx)
        .await?;
        found(done.rows_affected(), "pending invitation")?;
        Ok(())
    }

    /// Counts another sending of a pending invitation.
    pub async fn resend_invitation(
        &mut self,
        org_id: &str,
        id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let done = sqlx::query(&self.store.sql(
            "UPDATE invitations SET sent_count = sent_count + 1, last_sent_at = $3
             WHERE org_id = $1 AND id = $2 AND status = 'pending'",
        ))
        .bind(org_id)
        .bind(id)
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        found(done.rows_affected(), "pending invitation")?;
        Ok(())
    }
}
