//! Accounts, their sessions, verifications and mail written in a unit of work.

use super::*;

impl crate::storage::Transaction<'_> {
    /// An account as this unit sees it (its own writes included).
    pub(crate) async fn account(&mut self, user_id: &str) -> StoreResult<AccountRecord> {
        let row = sqlx::query(&self.store.sql(&format!("{ACCOUNT} WHERE a.user_id = $1")))
            .bind(user_id)
            .fetch_one(&mut *self.tx)
            .await?;
        account_from_row(&row)
    }

    /// Creates an account (and its user), its first e-mail verification with its mail
    /// when `verification` is given. An address taken by a live account is a
    /// conflict.
    pub async fn create_account(
        &mut self,
        new: &NewAccount<'_>,
        verification: Option<&Verification<'_>>,
        now: DateTime<Utc>,
    ) -> StoreResult<AccountRecord> {
        let at = stamp(now);
        sqlx::query(
            &self.store.sql(
                "INSERT INTO users (id, email, super_admin, created_at) VALUES ($1, $2, $3, $4)",
            ),
        )
        .bind(new.user_id)
        .bind(new.email)
        .bind(i64::from(new.super_admin))
        .bind(&at)
        .execute(&mut *self.tx)
        .await?;
        sqlx::query(&self.store.sql(
                "INSERT INTO accounts (user_id, email, name, password_hash, email_verified_at, generation, created_at, updated_at, password_change_required)
                 VALUES ($1, $2, $3, $4, $5, 0, $6, $6, $7)",
            ))
            .bind(new.user_id)
            .bind(new.email)
            .bind(new.name)
            .bind(new.password_hash)
            .bind(new.verified.then(|| at.clone()))
            .bind(&at)
            .bind(i64::from(new.password_change_required))
            .execute(&mut *self.tx)
            .await
            .map_err(taken(|| "an account with this e-mail exists"))?;
        if let Some(v) = verification {
            self.store
                .insert_verification(&mut self.tx, new.user_id, v, now)
                .await?;
        }
        self.account(new.user_id).await
    }

    /// Uses an e-mail verification that is unused and unexpired at `now`: the
    /// account's address (if still the one verified) is marked verified. `None` when
    /// no such verification is live (one used for an address that is no longer the
    /// account's is used all the same).
    pub async fn verify_email(
        &mut self,
        token_hash: &str,
        password_hash: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<AccountRecord>> {
        let at = stamp(now);

        let used = sqlx::query(&self.store.sql(
            "UPDATE email_verifications SET used_at = $2
             WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2
             RETURNING user_id, email",
        ))
        .bind(token_hash)
        .bind(&at)
        .fetch_optional(&mut *self.tx)
        .await?;
        let Some(used) = used else {
            return Ok(None);
        };
        let user_id: String = used.try_get("user_id")?;
        let email: String = used.try_get("email")?;
        let done = sqlx::query(&self.store.sql(
            "UPDATE accounts SET email_verified_at = $3, updated_at = $3,
                password_hash = COALESCE($4, password_hash),
                password_change_required = CASE WHEN $4 IS NULL THEN password_change_required ELSE 0 END
             WHERE user_id = $1 AND email = $2 AND deleted_at IS NULL",
        ))
        .bind(&user_id)
        .bind(&email)
        .bind(&at)
        .bind(password_hash)
        .execute(&mut *self.tx)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(None);
        }
        let account = self.account(&user_id).await?;
        Ok(Some(account))
    }

    /// Changes an account's name and address; a new address is unverified and gets
    /// a verification with its mail.
    pub async fn update_account(
        &mut self,
        user_id: &str,
        (name, email): (Option<&str>, Option<&str>),
        verification: Option<&Verification<'_>>,
        now: DateTime<Utc>,
    ) -> StoreResult<AccountRecord> {
        let at = stamp(now);

        let done = sqlx::query(&self.store.sql(
            "UPDATE accounts SET name = COALESCE($2, name), updated_at = $3
             WHERE user_id = $1 AND deleted_at IS NULL",
        ))
        .bind(user_id)
        .bind(name)
        .bind(&at)
        .execute(&mut *self.tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("account".to_owned()));
        }
        if let Some(email) = email {
            sqlx::query(&self.store.sql(
                "UPDATE accounts SET email = $2, email_verified_at = NULL WHERE user_id = $1",
            ))
            .bind(user_id)
            .bind(email)
            .execute(&mut *self.tx)
            .await
            .map_err(taken(|| "an account with this e-mail exists"))?;
            sqlx::query(&self.store.sql("UPDATE users SET email = $2 WHERE id = $1"))
                .bind(user_id)
                .bind(email)
                .execute(&mut *self.tx)
                .await?;
        }
        if let Some(v) = verification {
            self.store
                .insert_verification(&mut self.tx, user_id, v, now)
                .await?;
        }
        let account = self.account(user_id).await?;
        Ok(account)
    }

    /// Ends every session of the user: the generation rises (every access token
    /// issued before fails), every refresh family ends, and, when `tokens`, every
    /// personal access token is revoked; `password_hash` replaces the password,
    /// `delete` deletes the account.
    pub async fn end_sessions(
        &mut self,
        user_id: &str,
        (tokens, password_hash, delete): (bool, Option<&str>, bool),
        reason: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let at = stamp(now);

        let done = sqlx::query(&self.store.sql(
            "UPDATE accounts SET generation = generation + 1, revoked_at = $2, updated_at = $2,
                password_hash = COALESCE($3, password_hash),
                password_change_required = CASE WHEN $3 IS NULL THEN password_change_required ELSE 0 END,
                deleted_at = CASE WHEN $4 = 1 THEN $2 ELSE deleted_at END
             WHERE user_id = $1 AND deleted_at IS NULL",
        ))
        .bind(user_id)
        .bind(&at)
        .bind(password_hash)
        .bind(i64::from(delete))
        .execute(&mut *self.tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("account".to_owned()));
        }
        self.store
            .end_credentials(&mut self.tx, user_id, (&at, reason), tokens)
            .await?;
        Ok(())
    }

    /// Makes the waiting authenticator the account's (its first code's `step` used),
    /// or removes the account's (`step` `None`), with the mail telling the account;
    /// `false` when the pending one changed meanwhile.
    pub async fn settle_totp(
        &mut self,
        user_id: &str,
        confirmed: Option<(&str, i64)>,
        now: DateTime<Utc>,
        mail: &NewAccountMail<'_>,
    ) -> StoreResult<bool> {
        let done = match confirmed {
            Some((pending, step)) => sqlx::query(&self.store.sql(
                "UPDATE accounts SET totp_secret = totp_pending, totp_pending = NULL, totp_last_step = $3, updated_at = $4
                 WHERE user_id = $1 AND totp_pending = $2 AND deleted_at IS NULL",
            ))
            .bind(user_id)
            .bind(pending)
            .bind(step)
            .bind(stamp(now))
            .execute(&mut *self.tx)
            .await?,
            None => sqlx::query(&self.store.sql(
                "UPDATE accounts SET totp_secret = NULL, totp_pending = NULL, totp_last_step = NULL, updated_at = $2
                 WHERE user_id = $1 AND deleted_at IS NULL",
            ))
            .bind(user_id)
            .bind(stamp(now))
            .execute(&mut *self.tx)
            .await?,
        };
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        self.store
            .insert_account_mail(&mut self.tx, user_id, mail, now)
            .await?;
        Ok(true)
    }
}
