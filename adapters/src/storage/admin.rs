//! What platform administration reads and writes about accounts: the list a
//! super-admin searches, disabling, deleting (the account becomes a ghost: its
//! memberships end, its personal data is erased, its id stays for what it made and
//! for the audit chain), a user's own feature flags and its active organization.
//! Statements only; the services decide.

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::accounts::{account_from_row, AccountRecord, ACCOUNT};
use super::decode::Decoder;
use super::{stamp, taken, Store, StoreError, StoreResult};

/// An account's state, as the administration list filters it and names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccountState {
    /// Verified, not disabled, not deleted.
    Active,
    /// Its e-mail is not verified yet.
    Unverified,
    /// Disabled by a super-admin.
    Disabled,
    /// Deleted (a ghost).
    Deleted,
}

impl AccountState {
    /// Every state, in the order the API names them.
    pub const ALL: [AccountState; 4] = [
        AccountState::Active,
        AccountState::Unverified,
        AccountState::Disabled,
        AccountState::Deleted,
    ];

    /// The state named `name` on the wire.
    pub fn named(name: &str) -> Option<AccountState> {
        AccountState::ALL
            .into_iter()
            .find(|state| state.name() == name)
    }

    /// The state's name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            AccountState::Active => "active",
            AccountState::Unverified => "unverified",
            AccountState::Disabled => "disabled",
            AccountState::Deleted => "deleted",
        }
    }
}

/// What the administration list is filtered by.
#[derive(Debug, Clone, Default)]
pub struct AccountFilter<'a> {
    /// A part of the e-mail (lower-cased).
    pub email: Option<&'a str>,
    /// The state.
    pub state: Option<AccountState>,
    /// A member of this organization.
    pub org_id: Option<&'a str>,
}

/// An account in the administration list, with how many organizations it is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminAccountRow {
    /// The account.
    pub account: AccountRecord,
    /// Its memberships.
    pub organizations: u64,
}

/// A user's membership, as administration sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserMembership {
    /// The organization.
    pub org_id: String,
    /// Whether the user is its owner.
    pub owner: bool,
}

/// `LIKE` text for a part of a value: `%`, `_` and `\` taken literally.
fn contains_pattern(part: &str) -> String {
    let mut pattern = String::with_capacity(part.len() + 2);
    pattern.push('%');
    for c in part.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

impl Store {
    /// A page of accounts, newest first, and how many match.
    pub async fn admin_accounts(
        &self,
        filter: &AccountFilter<'_>,
        limit: u32,
        offset: u64,
    ) -> StoreResult<(Vec<AdminAccountRow>, u64)> {
        let state = match filter.state {
            None => "",
            Some(AccountState::Active) => {
                " AND a.deleted_at IS NULL AND a.disabled_at IS NULL AND a.email_verified_at IS NOT NULL"
            }
            Some(AccountState::Unverified) => {
                " AND a.deleted_at IS NULL AND a.disabled_at IS NULL AND a.email_verified_at IS NULL"
            }
            Some(AccountState::Disabled) => " AND a.deleted_at IS NULL AND a.disabled_at IS NOT NULL",
            Some(AccountState::Deleted) => " AND a.deleted_at IS NOT NULL",
        };
        let condition = format!(
            "($1 = '' OR a.email LIKE $1 ESCAPE '\\')
             AND ($2 = '' OR EXISTS (SELECT 1 FROM memberships m WHERE m.user_id = a.user_id AND m.org_id = $2)){state}"
        );
        let pattern = filter.email.map(contains_pattern).unwrap_or_default();
        let org = filter.org_id.unwrap_or_default();
        let rows = sqlx::query(&self.sql(&format!(
            "SELECT x.*, (SELECT COUNT(*) FROM memberships m WHERE m.user_id = x.user_id) AS organizations
             FROM ({ACCOUNT} WHERE {condition}) x
             ORDER BY x.created_at DESC, x.user_id DESC LIMIT $3 OFFSET $4"
        )))
        .bind(&pattern)
        .bind(org)
        .bind(i64::from(limit))
        .bind(i64::try_from(offset).unwrap_or(i64::MAX))
        .fetch_all(self.pool())
        .await?;
        let total = sqlx::query(&self.sql(&format!(
            "SELECT COUNT(*) AS n FROM accounts a WHERE {condition}"
        )))
        .bind(&pattern)
        .bind(org)
        .fetch_one(self.pool())
        .await?
        .try_get::<i64, _>("n")?;
        let accounts = rows
            .iter()
            .map(|row| {
                let organizations: i64 =
                    Decoder::new(row, "accounts", &["user_id"]).get("organizations")?;
                Ok(AdminAccountRow {
                    account: account_from_row(row)?,
                    organizations: organizations.unsigned_abs(),
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((accounts, total.unsigned_abs()))
    }

    /// The organizations a user is a member of (live ones), and whether it owns each.
    pub async fn user_memberships(&self, user_id: &str) -> StoreResult<Vec<UserMembership>> {
        let rows = sqlx::query(&self.sql(
            "SELECT m.org_id, o.owner_id FROM memberships m JOIN organizations o ON o.id = m.org_id
             WHERE m.user_id = $1 AND o.deleted_at IS NULL ORDER BY m.org_id",
        ))
        .bind(user_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let d = Decoder::new(row, "memberships", &["org_id"]);
                let owner: String = d.get("owner_id")?;
                Ok(UserMembership {
                    org_id: d.get("org_id")?,
                    owner: owner == user_id,
                })
            })
            .collect()
    }

    /// A user's own feature flags: (feature name, enabled).
    pub async fn user_features(&self, user_id: &str) -> StoreResult<Vec<(String, bool)>> {
        let rows =
            sqlx::query(&self.sql(
                "SELECT feature, enabled FROM user_features WHERE user_id = $1 ORDER BY feature",
            ))
            .bind(user_id)
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|row| {
                let d = Decoder::new(row, "user_features", &["feature"]);
                Ok((d.get("feature")?, d.flag("enabled")?))
            })
            .collect()
    }
}

/// An impersonation as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImpersonationRow {
    /// Its id (the token's `imp`).
    pub id: String,
    /// The super-admin.
    pub admin_id: String,
    /// The user seen as.
    pub user_id: String,
    /// Why.
    pub reason: String,
    /// Reads only.
    pub read_only: bool,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// When it ends by itself.
    pub expires_at: DateTime<Utc>,
    /// When it was ended, if it was.
    pub ended_at: Option<DateTime<Utc>>,
}

fn impersonation_from_row(row: &sqlx::any::AnyRow) -> StoreResult<ImpersonationRow> {
    let d = Decoder::new(row, "impersonations", &["id"]);
    Ok(ImpersonationRow {
        id: d.get("id")?,
        admin_id: d.get("admin_id")?,
        user_id: d.get("user_id")?,
        reason: d.get("reason")?,
        read_only: d.flag("read_only")?,
        started_at: d.stamp("started_at")?,
        expires_at: d.stamp("expires_at")?,
        ended_at: d.opt_stamp("ended_at")?,
    })
}

impl Store {
    /// An impersonation by id.
    pub async fn impersonation(&self, id: &str) -> StoreResult<Option<ImpersonationRow>> {
        let row = sqlx::query(&self.sql("SELECT * FROM impersonations WHERE id = $1"))
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(impersonation_from_row).transpose()
    }
}

impl super::Transaction<'_> {
    /// Changes an account's name and e-mail (the address is verified again), and
    /// disables it (`Some(true)`: its sessions, refresh families and personal access
    /// tokens end at once, on every replica) or enables it again (`Some(false)`).
    pub async fn admin_update_account(
        &mut self,
        user_id: &str,
        (name, email, disabled): (Option<&str>, Option<&str>, Option<bool>),
        now: DateTime<Utc>,
    ) -> StoreResult<AccountRecord> {
        let at = stamp(now);

        let done = sqlx::query(&self.store.sql(
            "UPDATE accounts SET name = COALESCE($2, name), updated_at = $3,
                email = COALESCE($4, email),
                email_verified_at = CASE WHEN $4 IS NULL THEN email_verified_at ELSE $3 END
             WHERE user_id = $1 AND deleted_at IS NULL",
        ))
        .bind(user_id)
        .bind(name)
        .bind(&at)
        .bind(email)
        .execute(&mut *self.tx)
        .await
        .map_err(taken(|| "an account with this e-mail exists"))?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("account".to_owned()));
        }
        if let Some(email) = email {
            sqlx::query(&self.store.sql("UPDATE users SET email = $2 WHERE id = $1"))
                .bind(user_id)
                .bind(email)
                .execute(&mut *self.tx)
                .await?;
        }
        match disabled {
            Some(true) => {
                sqlx::query(&self.store.sql(
                    "UPDATE accounts SET disabled_at = $2, generation = generation + 1, revoked_at = $2
                     WHERE user_id = $1",
                ))
                .bind(user_id)
                .bind(&at)
                .execute(&mut *self.tx)
                .await?;
                self.store
                    .end_credentials(&mut self.tx, user_id, (&at, "admin.user.disable"), true)
                    .await?;
            }
            Some(false) => {
                sqlx::query(
                    &self
                        .store
                        .sql("UPDATE accounts SET disabled_at = NULL WHERE user_id = $1"),
                )
                .bind(user_id)
                .execute(&mut *self.tx)
                .await?;
            }
            None => {}
        }
        let account = self.account(user_id).await?;
        Ok(account)
    }

    /// Deletes an account as a super-admin: its memberships and Role grants end, its
    /// sessions and tokens end, its personal data (e-mail, name, password,
    /// authenticator, feature flags) is erased and the account stays as a ghost
    /// under `ghost_email`, so that what it made and the audit chain still name an
    /// id that resolves. Fails (conflict) when it owns a live organization at the
    /// moment of the delete.
    pub async fn delete_account_as_admin(
        &mut self,
        user_id: &str,
        ghost_email: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let at = stamp(now);

        // The write comes first: on SQLite a transaction that read before it writes
        // fails at once (busy, not waited for) when another connection wrote since.
        let done = sqlx::query(&self.store.sql(
            "UPDATE accounts SET generation = generation + 1, revoked_at = $2, updated_at = $2,
                deleted_at = $2, email = $3, name = NULL, password_hash = '!',
                email_verified_at = NULL, totp_secret = NULL, totp_pending = NULL,
                password_change_required = 0
             WHERE user_id = $1 AND deleted_at IS NULL",
        ))
        .bind(user_id)
        .bind(&at)
        .bind(ghost_email)
        .execute(&mut *self.tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("account".to_owned()));
        }
        let owned = sqlx::query(&self.store.sql(
            "SELECT COUNT(*) AS n FROM organizations WHERE owner_id = $1 AND deleted_at IS NULL",
        ))
        .bind(user_id)
        .fetch_one(&mut *self.tx)
        .await?
        .try_get::<i64, _>("n")?;
        if owned > 0 {
            // Dropped, the transaction rolls the write back.
            return Err(StoreError::Conflict(
                "the account owns an organization: transfer its ownership first".to_owned(),
            ));
        }
        self.store
            .end_credentials(&mut self.tx, user_id, (&at, "admin.user.delete"), true)
            .await?;
        for statement in [
            "DELETE FROM role_members WHERE user_id = $1",
            "DELETE FROM memberships WHERE user_id = $1",
            "DELETE FROM user_features WHERE user_id = $1",
            "UPDATE users SET email = NULL, active_org_id = NULL WHERE id = $1",
        ] {
            sqlx::query(&self.store.sql(statement))
                .bind(user_id)
                .execute(&mut *self.tx)
                .await?;
        }
        Ok(())
    }

    /// Replaces a user's feature flags with `flags`.
    pub async fn set_user_features(
        &mut self,
        user_id: &str,
        flags: &[(&str, bool)],
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let at = stamp(now);

        sqlx::query(
            &self
                .store
                .sql("DELETE FROM user_features WHERE user_id = $1"),
        )
        .bind(user_id)
        .execute(&mut *self.tx)
        .await?;
        for (feature, enabled) in flags {
            sqlx::query(&self.store.sql(
                "INSERT INTO user_features (user_id, feature, enabled, updated_at) VALUES ($1, $2, $3, $4)",
            ))
            .bind(user_id)
            .bind(*feature)
            .bind(i64::from(*enabled))
            .bind(&at)
            .execute(&mut *self.tx)
            .await?;
        }
        Ok(())
    }

    /// Records the organization a user acts in by default.
    pub async fn set_active_organization(
        &mut self,
        user_id: &str,
        org_id: &str,
    ) -> StoreResult<()> {
        let done = sqlx::query(
            &self
                .store
                .sql("UPDATE users SET active_org_id = $2 WHERE id = $1"),
        )
        .bind(user_id)
        .bind(org_id)
        .execute(&mut *self.tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("user".to_owned()));
        }
        Ok(())
    }

    /// Records an impersonation.
    pub async fn start_impersonation(&mut self, row: &ImpersonationRow) -> StoreResult<()> {
        sqlx::query(&self.store.sql(
            "INSERT INTO impersonations (id, admin_id, user_id, reason, read_only, started_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        ))
        .bind(&row.id)
        .bind(&row.admin_id)
        .bind(&row.user_id)
        .bind(&row.reason)
        .bind(i64::from(row.read_only))
        .bind(stamp(row.started_at))
        .bind(stamp(row.expires_at))
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    /// Ends an impersonation that has not ended (`false`: it had).
    pub async fn end_impersonation(
        &mut self,
        id: &str,
        ended_by: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let done = sqlx::query(&self.store.sql(
            "UPDATE impersonations SET ended_at = $2, ended_by = $3 WHERE id = $1 AND ended_at IS NULL",
        ))
        .bind(id)
        .bind(stamp(now))
        .bind(ended_by)
        .execute(&mut *self.tx)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::{contains_pattern, AccountState};

    #[test]
    fn a_search_takes_wildcards_literally() {
        assert_eq!(contains_pattern("a_b%c\\"), "%a\\_b\\%c\\\\%");
    }

    #[test]
    fn every_state_is_read_back_by_its_wire_name() {
        for state in AccountState::ALL {
            assert_eq!(AccountState::named(state.name()), Some(state));
            assert_eq!(serde_json::to_value(state).unwrap(), state.name());
        }
        for unknown in ["Active", "", "ghost", "active "] {
            assert_eq!(AccountState::named(unknown), None, "{unknown}");
        }
    }
}
