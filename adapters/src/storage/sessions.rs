//! Sessions: refresh-token families and their single-use tokens (a rotation is one
//! conditional update and the successor's insert, in one transaction), and the
//! failed sign-ins that throttle the next ones.

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::decode::Decoder;
use super::{stamp, Store, StoreResult};

/// A refresh family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyRecord {
    /// Its id (the access tokens' `sid`).
    pub id: String,
    /// The user.
    pub user_id: String,
    /// The organization the session signed into.
    pub org_id: Option<String>,
    /// When it ends for good.
    pub expires_at: DateTime<Utc>,
    /// When it was ended early.
    pub revoked_at: Option<DateTime<Utc>>,
}

fn family_from_row(row: &sqlx::any::AnyRow) -> StoreResult<FamilyRecord> {
    let d = Decoder::new(row, "refresh_families", &["id"]);
    Ok(FamilyRecord {
        id: d.get("id")?,
        user_id: d.get("user_id")?,
        org_id: d.get("org_id")?,
        expires_at: d.stamp("expires_at")?,
        revoked_at: d.opt_stamp("revoked_at")?,
    })
}

/// What presenting a refresh token did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rotation {
    /// It was unused and its family live: it is used now, and its successor stored.
    Rotated(FamilyRecord),
    /// It had been used at that instant (its family, live or not).
    AlreadyUsed(DateTime<Utc>, FamilyRecord),
    /// Its family had ended or expired.
    Ended(FamilyRecord),
    /// No such token.
    Unknown,
}

impl Store {
    /// Inserts a refresh family (with the root organization whose single sign-on
    /// issued it, if one did) and its first token.
    pub(super) async fn insert_family(
        &self,
        conn: &mut sqlx::AnyConnection,
        family: &FamilyRecord,
        (token_hash, sso_org): (&str, Option<&str>),
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let at = stamp(now);
        sqlx::query(&self.sql(
            "INSERT INTO refresh_families (id, user_id, org_id, created_at, expires_at, sso_org_id) VALUES ($1, $2, $3, $4, $5, $6)",
        ))
        .bind(&family.id)
        .bind(&family.user_id)
        .bind(&family.org_id)
        .bind(&at)
        .bind(stamp(family.expires_at))
        .bind(sso_org)
        .execute(&mut *conn)
        .await?;
        sqlx::query(&self.sql(
            "INSERT INTO refresh_tokens (token_hash, family_id, issued_at) VALUES ($1, $2, $3)",
        ))
        .bind(token_hash)
        .bind(&family.id)
        .bind(&at)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }

    /// Why a refresh token did not rotate: used at that instant, its family ended or
    /// expired, or no such token (`None`).
    pub async fn refresh_standing(&self, token_hash: &str) -> StoreResult<Option<Rotation>> {
        let row = sqlx::query(&self.sql(
            "SELECT t.used_at AS token_used_at, f.* FROM refresh_tokens t
             JOIN refresh_families f ON f.id = t.family_id WHERE t.token_hash = $1",
        ))
        .bind(token_hash)
        .fetch_optional(self.pool())
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let family = family_from_row(&row)?;
        let used_at = Decoder::new(&row, "refresh_tokens", &[]).opt_stamp("token_used_at")?;
        Ok(Some(match used_at {
            Some(used) => Rotation::AlreadyUsed(used, family),
            None => Rotation::Ended(family),
        }))
    }

    /// The family of a refresh token.
    pub async fn family_of(&self, token_hash: &str) -> StoreResult<Option<FamilyRecord>> {
        let row = sqlx::query(&self.sql(
            "SELECT f.* FROM refresh_tokens t JOIN refresh_families f ON f.id = t.family_id WHERE t.token_hash = $1",
        ))
        .bind(token_hash)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(family_from_row).transpose()
    }

    /// The failures recorded against each key that has some.
    pub async fn signin_failures(
        &self,
        keys: &[&str],
    ) -> StoreResult<Vec<(String, tenancy::Failures)>> {
        let mut found = Vec::new();
        for key in keys {
            let row = sqlx::query(&self.sql(
                "SELECT key, failures, first_at, last_at FROM signin_failures WHERE key = $1",
            ))
            .bind(*key)
            .fetch_optional(self.pool())
            .await?;
            if let Some(row) = row {
                let d = Decoder::new(&row, "signin_failures", &["key"]);
                found.push((
                    d.get("key")?,
                    tenancy::Failures {
                        count: d.u32("failures")?,
                        first_at: d.stamp("first_at")?,
                        last_at: d.stamp("last_at")?,
                    },
                ));
            }
        }
        Ok(found)
    }

    /// Forgets failure runs whose latest failure is older than `before`, account
    /// mail created before it (its link long expired) and verification links that
    /// expired before it; how many rows.
    pub async fn prune_signin(&self, before: DateTime<Utc>) -> StoreResult<u64> {
        let mut rows = 0;
        for statement in [
            "DELETE FROM signin_failures WHERE last_at < $1",
            "DELETE FROM account_mail WHERE created_at < $1 AND status <> 'pending'",
            "DELETE FROM email_verifications WHERE expires_at < $1",
            "DELETE FROM console_sessions WHERE expires_at < $1",
        ] {
            let done = sqlx::query(&self.sql(statement))
                .bind(stamp(before))
                .execute(self.pool())
                .await?;
            rows += done.rows_affected();
        }
        Ok(rows)
    }
}

impl super::Transaction<'_> {
    /// Clears the sign-in failures counted against `key` (a sign-in succeeded).
    pub async fn clear_signin_failures(&mut self, key: &str) -> StoreResult<()> {
        sqlx::query(&self.store.sql("DELETE FROM signin_failures WHERE key = $1"))
            .bind(key)
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }

    /// Presents a refresh token: when unused and its family live at `now`, it is
    /// used and `successor` stored in its family (of two concurrent presentations
    /// one rotates, the other finds it used): its family. `None` when it did not
    /// rotate ([`Store::refresh_standing`] says why).
    pub async fn rotate_refresh(
        &mut self,
        token_hash: &str,
        successor: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<FamilyRecord>> {
        let at = stamp(now);
        let claimed = sqlx::query(&self.store.sql(
                "UPDATE refresh_tokens SET used_at = $2
                 WHERE token_hash = $1 AND used_at IS NULL
                   AND family_id IN (SELECT id FROM refresh_families WHERE revoked_at IS NULL AND expires_at > $2)
                 RETURNING family_id",
            ))
            .bind(token_hash)
            .bind(&at)
            .fetch_optional(&mut *self.tx)
            .await?;
        if let Some(claimed) = claimed {
            let family_id: String = claimed.try_get("family_id")?;
            sqlx::query(&self.store.sql(
                "INSERT INTO refresh_tokens (token_hash, family_id, issued_at) VALUES ($1, $2, $3)",
            ))
            .bind(successor)
            .bind(&family_id)
            .bind(&at)
            .execute(&mut *self.tx)
            .await?;
            let row = sqlx::query(
                &self
                    .store
                    .sql("SELECT * FROM refresh_families WHERE id = $1"),
            )
            .bind(&family_id)
            .fetch_one(&mut *self.tx)
            .await?;
            return Ok(Some(family_from_row(&row)?));
        }
        Ok(None)
    }

    /// Ends a refresh family (logout, reuse detected); `false` when it had ended
    /// already.
    pub async fn end_family(
        &mut self,
        family_id: &str,
        reason: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let done = sqlx::query(&self.store.sql(
                "UPDATE refresh_families SET revoked_at = $2, revoked_reason = $3 WHERE id = $1 AND revoked_at IS NULL",
            ))
            .bind(family_id)
            .bind(stamp(now))
            .bind(reason)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Charges one attempt against every key before it is judged, each key in one
    /// statement (`tenancy::ThrottlePolicy::charge`, which a test holds this SQL to):
    /// a run that began before `forgotten` or whose lockout passed starts again at
    /// one. `None` when a key is locked (failures at `lock_after` or more, the latest
    /// after `locked_since`): the caller keeps nothing of its unit. Otherwise each
    /// key's failures counting this attempt.
    pub async fn charge_signin_attempt(
        &mut self,
        keys: &[&str],
        (forgotten, lock_after, locked_since): (DateTime<Utc>, u32, DateTime<Utc>),
        now: DateTime<Utc>,
    ) -> StoreResult<Option<Vec<tenancy::Failures>>> {
        let at = stamp(now);
        let mut charged = Vec::with_capacity(keys.len());
        for key in keys {
            let row = sqlx::query(&self.store.sql(
                    "INSERT INTO signin_failures (key, failures, first_at, last_at) VALUES ($1, 1, $2, $2)
                     ON CONFLICT (key) DO UPDATE SET
                       failures = CASE WHEN signin_failures.first_at >= $3 AND signin_failures.failures < $4
                                       THEN signin_failures.failures + 1 ELSE 1 END,
                       first_at = CASE WHEN signin_failures.first_at >= $3 AND signin_failures.failures < $4
                                       THEN signin_failures.first_at ELSE excluded.first_at END,
                       last_at = excluded.last_at
                     WHERE NOT (signin_failures.failures >= $4 AND signin_failures.last_at > $5)
                     RETURNING failures, first_at, last_at",
                ))
                .bind(*key)
                .bind(&at)
                .bind(stamp(forgotten))
                .bind(i64::from(lock_after))
                .bind(stamp(locked_since))
                .fetch_optional(&mut *self.tx)
                .await?;
            let Some(row) = row else {
                // Throttled: nothing of this attempt is counted.
                return Ok(None);
            };
            let d = Decoder::new(&row, "signin_failures", &[]);
            charged.push(tenancy::Failures {
                count: d.u32("failures")?,
                first_at: d.stamp("first_at")?,
                last_at: d.stamp("last_at")?,
            });
        }
        Ok(Some(charged))
    }

    /// Gives back an attempt charged by [`Transaction::charge_signin_attempt`] that
    /// succeeded.
    pub async fn refund_signin_attempt(&mut self, keys: &[&str]) -> StoreResult<()> {
        for key in keys {
            sqlx::query(&self.store.sql(
                "UPDATE signin_failures SET failures = failures - 1 WHERE key = $1 AND failures > 0",
            ))
            .bind(*key)
            .execute(&mut *self.tx)
            .await?;
        }
        Ok(())
    }
}
