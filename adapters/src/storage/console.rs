//! The console's sessions: an opaque id's hash, the refresh family it rides on and
//! what the console's access tokens claim.

use chrono::{DateTime, Utc};

use super::decode::Decoder;
use super::{stamp, Store, StoreResult};

/// A console session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleSessionRecord {
    /// SHA-256 of the cookie's id, hex.
    pub id_hash: String,
    /// The refresh family (the access tokens' `sid`).
    pub family_id: String,
    /// The account.
    pub user_id: String,
    /// Its e-mail, once verified (as the sign-in's access token claimed it).
    pub email: Option<String>,
    /// The account's generation at sign-in (a revoke-all raises it).
    pub generation: i64,
    /// When it ends.
    pub expires_at: DateTime<Utc>,
    /// Set when the session sees as its user for a super-admin.
    pub impersonation: Option<ConsoleImpersonation>,
}

/// The impersonation a console session is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleImpersonation {
    /// The impersonation's id.
    pub id: String,
    /// The super-admin.
    pub admin_id: String,
    /// The super-admin, as the banner names them (e-mail, else id).
    pub admin: String,
    /// Reads only.
    pub read_only: bool,
}

fn from_row(row: &sqlx::any::AnyRow) -> StoreResult<ConsoleSessionRecord> {
    let d = Decoder::new(row, "console_sessions", &["id_hash"]);
    Ok(ConsoleSessionRecord {
        id_hash: d.get("id_hash")?,
        family_id: d.get("family_id")?,
        user_id: d.get("user_id")?,
        email: d.get("email")?,
        generation: d.get("generation")?,
        expires_at: d.stamp("expires_at")?,
        impersonation: match d.get::<Option<String>>("impersonation_id")? {
            None => None,
            Some(id) => Some(ConsoleImpersonation {
                id,
                admin_id: d.get("impersonator_id")?,
                admin: d.get("impersonator")?,
                read_only: d.flag("impersonation_read_only")?,
            }),
        },
    })
}

impl Store {
    /// Keeps a console session.
    pub async fn open_console_session(
        &self,
        session: &ConsoleSessionRecord,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(&self.sql(
            "INSERT INTO console_sessions (id_hash, family_id, user_id, email, generation, created_at, expires_at,
                impersonation_id, impersonator_id, impersonator, impersonation_read_only)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        ))
        .bind(&session.id_hash)
        .bind(&session.family_id)
        .bind(&session.user_id)
        .bind(&session.email)
        .bind(session.generation)
        .bind(stamp(now))
        .bind(stamp(session.expires_at))
        .bind(session.impersonation.as_ref().map(|i| i.id.as_str()))
        .bind(session.impersonation.as_ref().map(|i| i.admin_id.as_str()))
        .bind(session.impersonation.as_ref().map(|i| i.admin.as_str()))
        .bind(i64::from(
            session.impersonation.as_ref().is_some_and(|i| i.read_only),
        ))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// The live console session of an id's hash: not expired at `now`, its family
    /// neither ended nor expired.
    pub async fn console_session(
        &self,
        id_hash: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<ConsoleSessionRecord>> {
        let row = sqlx::query(&self.sql(
            "SELECT s.* FROM console_sessions s JOIN refresh_families f ON f.id = s.family_id
             WHERE s.id_hash = $1 AND s.expires_at > $2 AND f.revoked_at IS NULL AND f.expires_at > $2",
        ))
        .bind(id_hash)
        .bind(stamp(now))
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// Forgets a console session; whether there was one.
    pub async fn close_console_session(&self, id_hash: &str) -> StoreResult<bool> {
        let done = sqlx::query(&self.sql("DELETE FROM console_sessions WHERE id_hash = $1"))
            .bind(id_hash)
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() > 0)
    }
}
