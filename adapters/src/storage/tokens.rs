//! Personal access tokens: recorded hashed, listed, found by their hash, revoked,
//! and touched at most once a minute when used.

use chrono::{DateTime, Utc};

use super::decode::Decoder;
use super::{stamp, Store, StoreError, StoreResult};

/// A personal access token as stored (never its secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersonalTokenRecord {
    /// Its id.
    pub id: String,
    /// Its owner.
    pub user_id: String,
    /// Its name.
    pub name: String,
    /// Its last four characters.
    pub hint: String,
    /// The organization it is bound to.
    pub org_id: Option<String>,
    /// The permissions it is bound to, as stored (`resource:action` names).
    pub permissions: Option<Vec<String>>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it stops working.
    pub expires_at: DateTime<Utc>,
    /// When it was last used (recorded at most once a minute).
    pub last_used_at: Option<DateTime<Utc>>,
    /// When it was revoked.
    pub revoked_at: Option<DateTime<Utc>>,
    /// The root organization whose single sign-on issued the session it was made in.
    pub sso_org_id: Option<String>,
}

fn personal_token_from_row(row: &sqlx::any::AnyRow) -> StoreResult<PersonalTokenRecord> {
    let d = Decoder::new(row, "personal_tokens", &["id"]);
    Ok(PersonalTokenRecord {
        id: d.get("id")?,
        user_id: d.get("user_id")?,
        name: d.get("name")?,
        hint: d.get("hint")?,
        org_id: d.get("org_id")?,
        permissions: d.opt_json("permissions")?,
        created_at: d.stamp("created_at")?,
        expires_at: d.stamp("expires_at")?,
        last_used_at: d.opt_stamp("last_used_at")?,
        revoked_at: d.opt_stamp("revoked_at")?,
        sso_org_id: d.get("sso_org_id")?,
    })
}

impl Store {
    /// A user's personal access tokens (revoked ones included), newest first.
    pub async fn personal_tokens(&self, user_id: &str) -> StoreResult<Vec<PersonalTokenRecord>> {
        let rows = sqlx::query(&self.sql(
            "SELECT * FROM personal_tokens WHERE user_id = $1 ORDER BY created_at DESC, id LIMIT 1000",
        ))
        .bind(user_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(personal_token_from_row).collect()
    }

    /// A personal access token by the hash of its secret.
    pub async fn personal_token_by_hash(
        &self,
        token_hash: &str,
    ) -> StoreResult<Option<PersonalTokenRecord>> {
        let row = sqlx::query(&self.sql("SELECT * FROM personal_tokens WHERE token_hash = $1"))
            .bind(token_hash)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(personal_token_from_row).transpose()
    }

    /// Revokes one of the user's personal access tokens; `false` when it is not
    /// theirs or was revoked already.
    pub async fn revoke_personal_token(
        &self,
        user_id: &str,
        id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let done = sqlx::query(&self.sql(
            "UPDATE personal_tokens SET revoked_at = $3 WHERE user_id = $1 AND id = $2 AND revoked_at IS NULL",
        ))
        .bind(user_id)
        .bind(id)
        .bind(stamp(now))
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Records a personal access token's use at `now` unless one after `since` is
    /// recorded already (so a busy token writes at most once a minute).
    pub async fn touch_personal_token(
        &self,
        id: &str,
        since: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(&self.sql(
            "UPDATE personal_tokens SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $3)",
        ))
        .bind(id)
        .bind(stamp(now))
        .bind(stamp(since))
        .execute(self.pool())
        .await?;
        Ok(())
    }
}

impl super::Transaction<'_> {
    /// Records a personal access token.
    pub async fn create_personal_token(
        &mut self,
        token: &PersonalTokenRecord,
        token_hash: &str,
    ) -> StoreResult<()> {
        let permissions = token
            .permissions
            .as_ref()
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| StoreError::Invalid(e.to_string()))?;

        sqlx::query(&self.store.sql(
            "INSERT INTO personal_tokens (id, user_id, name, token_hash, hint, org_id, permissions, created_at, expires_at, sso_org_id)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        ))
        .bind(&token.id)
        .bind(&token.user_id)
        .bind(&token.name)
        .bind(token_hash)
        .bind(&token.hint)
        .bind(&token.org_id)
        .bind(permissions.as_deref())
        .bind(stamp(token.created_at))
        .bind(stamp(token.expires_at))
        .bind(&token.sso_org_id)
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }
}
