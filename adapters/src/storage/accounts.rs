//! Accounts that sign in here: the account, its e-mail verifications and the mail
//! that carries them, refresh-token families, and the failures that throttle
//! sign-in (personal access tokens are `tokens.rs`). Secrets arrive hashed; nothing here decides
//! (tenancy's `signin` does), statements only.

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::decode::Decoder;
use super::{stamp, taken, Store, StoreError, StoreResult};
mod writes;

/// An account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountRecord {
    /// The user's id (the tokens' `sub`).
    pub user_id: String,
    /// The sign-in e-mail, lower-cased.
    pub email: String,
    /// The display name.
    pub name: Option<String>,
    /// The argon2id PHC string.
    pub password_hash: String,
    /// When the e-mail was verified.
    pub email_verified_at: Option<DateTime<Utc>>,
    /// Raised by revoke-all, a password change and deletion.
    pub generation: i64,
    /// When the generation last rose.
    pub revoked_at: Option<DateTime<Utc>>,
    /// When the account was deleted.
    pub deleted_at: Option<DateTime<Utc>>,
    /// The confirmed authenticator's secret, as stored (sealed when a key is set).
    pub totp_secret: Option<String>,
    /// An authenticator waiting for its first code.
    pub totp_pending: Option<String>,
    /// The step of the last authenticator code used.
    pub totp_last_step: Option<i64>,
    /// The stored super-admin flag of its user.
    pub super_admin: bool,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
    /// When a super-admin disabled it (it cannot sign in while disabled).
    pub disabled_at: Option<DateTime<Utc>>,
    /// It must change its password before anything else.
    pub password_change_required: bool,
    /// The organization its user acts in by default.
    pub active_org_id: Option<String>,
}

pub(super) fn account_from_row(row: &sqlx::any::AnyRow) -> StoreResult<AccountRecord> {
    let d = Decoder::new(row, "accounts", &["user_id"]);
    Ok(AccountRecord {
        user_id: d.get("user_id")?,
        email: d.get("email")?,
        name: d.get("name")?,
        password_hash: d.get("password_hash")?,
        email_verified_at: d.opt_stamp("email_verified_at")?,
        generation: d.get("generation")?,
        revoked_at: d.opt_stamp("revoked_at")?,
        deleted_at: d.opt_stamp("deleted_at")?,
        totp_secret: d.get("totp_secret")?,
        totp_pending: d.get("totp_pending")?,
        totp_last_step: d.get("totp_last_step")?,
        super_admin: d.flag("super_admin")?,
        created_at: d.stamp("created_at")?,
        updated_at: d.stamp("updated_at")?,
        disabled_at: d.opt_stamp("disabled_at")?,
        password_change_required: d.flag("password_change_required")?,
        active_org_id: d.get("active_org_id")?,
    })
}

pub(super) const ACCOUNT: &str =
    "SELECT a.*, u.super_admin, u.active_org_id FROM accounts a JOIN users u ON u.id = a.user_id";

/// A new account, with its first verification and the mail that carries it.
#[derive(Debug, Clone)]
pub struct NewAccount<'a> {
    /// The user's new id.
    pub user_id: &'a str,
    /// The e-mail, lower-cased.
    pub email: &'a str,
    /// The display name.
    pub name: Option<&'a str>,
    /// The argon2id PHC string.
    pub password_hash: &'a str,
    /// Verified already (provisioning).
    pub verified: bool,
    /// The super-admin flag (provisioning of a bootstrap identifier).
    pub super_admin: bool,
    /// It must change its password before anything else (a password a super-admin
    /// set).
    pub password_change_required: bool,
}

/// An e-mail verification to record, and its mail.
#[derive(Debug, Clone)]
pub struct Verification<'a> {
    /// The SHA-256 of the link token.
    pub token_hash: &'a str,
    /// The address it verifies.
    pub email: &'a str,
    /// Until when the link works.
    pub expires_at: DateTime<Utc>,
    /// The mail: id, subject, body (which holds the link).
    pub mail: (&'a str, &'a str, &'a str),
}

/// What a session's credential stands on, read on every request (kept per replica).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionStanding {
    /// The account's generation, revocation and deletion (`None`: the user has no
    /// account here, as with an outside identity provider's tokens).
    pub account: Option<(i64, Option<DateTime<Utc>>, bool)>,
    /// The account's address when it is verified (`None`: no account, or its
    /// current address is not verified): what a token may claim.
    pub verified_email: Option<String>,
    /// Whether the session's refresh family has ended (`None`: no family named, or
    /// none found).
    pub family_ended: Option<bool>,
    /// The root organization whose single sign-on issued the session.
    pub sso_org: Option<String>,
    /// A super-admin disabled the account.
    pub disabled: bool,
    /// The account must change its password before anything else.
    pub password_change_required: bool,
}

/// A mail to an account: its id, kind (`verify-email`, `security`), address and text.
#[derive(Debug, Clone, Copy)]
pub struct NewAccountMail<'a> {
    /// The mail's id.
    pub id: &'a str,
    /// What it is about.
    pub kind: &'a str,
    /// The address.
    pub recipient: &'a str,
    /// The subject line.
    pub subject: &'a str,
    /// The text.
    pub body: &'a str,
}

/// A mail to an account, claimed for an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountMail {
    /// Its id (the `Message-ID`, the same on every attempt).
    pub id: String,
    /// The address.
    pub recipient: String,
    /// The subject.
    pub subject: String,
    /// The text.
    pub body: String,
    /// Attempts made before this one.
    pub attempts: u32,
}

impl Store {
    async fn insert_verification(
        &self,
        conn: &mut sqlx::AnyConnection,
        user_id: &str,
        v: &Verification<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let at = stamp(now);
        sqlx::query(&self.sql(
            "INSERT INTO email_verifications (token_hash, user_id, email, expires_at, used_at, created_at)
             VALUES ($1, $2, $3, $4, NULL, $5)",
        ))
        .bind(v.token_hash)
        .bind(user_id)
        .bind(v.email)
        .bind(stamp(v.expires_at))
        .bind(&at)
        .execute(&mut *conn)
        .await?;
        let (id, subject, body) = v.mail;
        sqlx::query(&self.sql(
            "INSERT INTO account_mail (id, user_id, kind, recipient, subject, body, status, attempts, run_after, created_at, updated_at)
             VALUES ($1, $2, 'verify-email', $3, $4, $5, 'pending', 0, $6, $6, $6)",
        ))
        .bind(id)
        .bind(user_id)
        .bind(v.email)
        .bind(subject)
        .bind(body)
        .bind(&at)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }

    /// A live or deleted account by its user id.
    pub async fn account(&self, user_id: &str) -> StoreResult<Option<AccountRecord>> {
        let row = sqlx::query(&self.sql(&format!("{ACCOUNT} WHERE a.user_id = $1")))
            .bind(user_id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(account_from_row).transpose()
    }

    /// The live account of an e-mail (lower-cased).
    pub async fn account_by_email(&self, email: &str) -> StoreResult<Option<AccountRecord>> {
        let row = sqlx::query(&self.sql(&format!(
            "{ACCOUNT} WHERE a.email = $1 AND a.deleted_at IS NULL"
        )))
        .bind(email)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(account_from_row).transpose()
    }

    /// The address an unused, unexpired verification is for, and whether its account
    /// was invited (created by a super-admin, with no password of its own yet).
    pub async fn pending_verification(
        &self,
        token_hash: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<(String, bool)>> {
        let row = sqlx::query(&self.sql(
            "SELECT v.email, a.password_change_required, a.email_verified_at
             FROM email_verifications v JOIN accounts a ON a.user_id = v.user_id
             WHERE v.token_hash = $1 AND v.used_at IS NULL AND v.expires_at > $2
               AND a.deleted_at IS NULL",
        ))
        .bind(token_hash)
        .bind(stamp(now))
        .fetch_optional(self.pool())
        .await?;
        row.map(|row| {
            let d = Decoder::new(&row, "email_verifications", &[]);
            let invited =
                d.flag("password_change_required")? && d.opt_stamp("email_verified_at")?.is_none();
            Ok((d.get("email")?, invited))
        })
        .transpose()
    }

    /// Ends every refresh family of a user and, when `tokens`, every personal access
    /// token, at `at` for `reason`.
    pub(super) async fn end_credentials(
        &self,
        conn: &mut sqlx::AnyConnection,
        user_id: &str,
        (at, reason): (&str, &str),
        tokens: bool,
    ) -> StoreResult<()> {
        sqlx::query(&self.sql(
            "UPDATE refresh_families SET revoked_at = $2, revoked_reason = $3
             WHERE user_id = $1 AND revoked_at IS NULL",
        ))
        .bind(user_id)
        .bind(at)
        .bind(reason)
        .execute(&mut *conn)
        .await?;
        if tokens {
            sqlx::query(&self.sql(
                "UPDATE personal_tokens SET revoked_at = $2 WHERE user_id = $1 AND revoked_at IS NULL",
            ))
            .bind(user_id)
            .bind(at)
            .execute(&mut *conn)
            .await?;
        }
        Ok(())
    }

    /// Sets (`Some`) or clears the authenticator waiting for its first code.
    pub async fn set_totp_pending(
        &self,
        user_id: &str,
        pending: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let done = sqlx::query(&self.sql(
            "UPDATE accounts SET totp_pending = $2, updated_at = $3 WHERE user_id = $1 AND deleted_at IS NULL",
        ))
        .bind(user_id)
        .bind(pending)
        .bind(stamp(now))
        .execute(self.pool())
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("account".to_owned()));
        }
        Ok(())
    }

    /// A mail to an account, sent by the account-mail worker.
    async fn insert_account_mail(
        &self,
        conn: &mut sqlx::AnyConnection,
        user_id: &str,
        mail: &NewAccountMail<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let at = stamp(now);
        sqlx::query(&self.sql(
            "INSERT INTO account_mail (id, user_id, kind, recipient, subject, body, status, attempts, run_after, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, 'pending', 0, $7, $7, $7)",
        ))
        .bind(mail.id)
        .bind(user_id)
        .bind(mail.kind)
        .bind(mail.recipient)
        .bind(mail.subject)
        .bind(mail.body)
        .bind(&at)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }

    /// Uses an authenticator code's step: `false` when that step (or a later one) was
    /// used already, on any replica.
    pub async fn use_totp_step(&self, user_id: &str, step: i64) -> StoreResult<bool> {
        let done = sqlx::query(&self.sql(
            "UPDATE accounts SET totp_last_step = $2
             WHERE user_id = $1 AND totp_secret IS NOT NULL AND (totp_last_step IS NULL OR totp_last_step < $2)",
        ))
        .bind(user_id)
        .bind(step)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// What a session's credential stands on: the account (if any) and the family.
    pub async fn session_standing(
        &self,
        user_id: &str,
        family_id: Option<&str>,
    ) -> StoreResult<SessionStanding> {
        let row = sqlx::query(&self.sql(
            "SELECT generation, revoked_at, deleted_at, email, email_verified_at, disabled_at,
                password_change_required
             FROM accounts WHERE user_id = $1",
        ))
        .bind(user_id)
        .fetch_optional(self.pool())
        .await?;
        let mut standing = SessionStanding::default();
        if let Some(row) = &row {
            let d = Decoder::new(row, "accounts", &[]);
            let verified = d.opt_stamp("email_verified_at")?.is_some();
            let email: String = d.get("email")?;
            standing.account = Some((
                d.get("generation")?,
                d.opt_stamp("revoked_at")?,
                d.opt_stamp("deleted_at")?.is_some(),
            ));
            standing.verified_email = verified.then_some(email);
            standing.disabled = d.opt_stamp("disabled_at")?.is_some();
            standing.password_change_required = d.flag("password_change_required")?;
        }
        let family = match family_id {
            Some(id) => sqlx::query(&self.sql(
                "SELECT revoked_at, sso_org_id FROM refresh_families WHERE id = $1 AND user_id = $2",
            ))
            .bind(id)
            .bind(user_id)
            .fetch_optional(self.pool())
            .await?
            .map(|row| {
                let d = Decoder::new(&row, "refresh_families", &[]);
                Ok::<_, StoreError>((
                    d.opt_stamp("revoked_at")?.is_some(),
                    d.get::<Option<String>>("sso_org_id")?,
                ))
            })
            .transpose()?,
            None => None,
        };
        let (family_ended, sso_org) = match family {
            Some((ended, sso)) => (Some(ended), sso),
            None => (None, None),
        };
        standing.family_ended = family_ended;
        standing.sso_org = sso_org;
        Ok(standing)
    }

    /// Claims up to `limit` due account mails for `lease` (until `lease_until`).
    pub async fn claim_account_mail(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<AccountMail>> {
        let lock = match self.dialect() {
            super::Dialect::Postgres => " FOR UPDATE SKIP LOCKED",
            super::Dialect::Sqlite => "",
        };
        let rows = sqlx::query(&self.sql(&format!(
            "UPDATE account_mail SET lease_until = $2, status = 'sending'
             WHERE id IN (SELECT id FROM account_mail
                          WHERE (status = 'pending' AND run_after <= $1) OR (status = 'sending' AND lease_until < $1)
                          ORDER BY run_after, id LIMIT $3{lock})
             RETURNING id, recipient, subject, body, attempts"
        )))
        .bind(stamp(now))
        .bind(stamp(lease_until))
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let d = Decoder::new(row, "account_mail", &["id"]);
                Ok(AccountMail {
                    id: d.get("id")?,
                    recipient: d.get("recipient")?,
                    subject: d.get("subject")?,
                    // A mail waiting to be sent keeps its text; one without is corrupt.
                    body: d
                        .get::<Option<String>>("body")?
                        .ok_or_else(|| d.reject("body", "a pending mail has no text"))?,
                    attempts: d.u32("attempts")?,
                })
            })
            .collect()
    }

    /// Records an attempt of an account mail: sent (its body is cleared), to be
    /// tried again at `retry_at`, or failed for good.
    pub async fn finish_account_mail(
        &self,
        id: &str,
        outcome: Result<(), (Option<DateTime<Utc>>, String)>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let (status, retry, error) = match outcome {
            Ok(()) => ("sent", None, None),
            Err((Some(retry), error)) => ("pending", Some(stamp(retry)), Some(error)),
            Err((None, error)) => ("failed", None, Some(error)),
        };
        sqlx::query(&self.sql(
            "UPDATE account_mail SET status = $2, attempts = attempts + 1, lease_until = NULL,
                run_after = COALESCE($3, run_after), last_error = $4, updated_at = $5,
                body = CASE WHEN $2 = 'pending' THEN body ELSE NULL END
             WHERE id = $1",
        ))
        .bind(id)
        .bind(status)
        .bind(retry)
        .bind(error)
        .bind(stamp(now))
        .execute(self.pool())
        .await?;
        Ok(())
    }
}
