//! Single sign-on's sign-ins: attempts in flight at a provider, linked identities,
//! links waiting for a password, and what a first sign-in provisions. SQL only: the
//! workflow (`services::sso::signin`) opens the transactions and decides.

use chrono::{DateTime, Utc};

use tenancy::MembershipRole;

use super::super::decode::Decoder;
use super::super::orgs::membership_role_name;
use super::super::{stamp, taken, FamilyRecord, Store, StoreResult, Transaction};
use super::{json, NO_PASSWORD};

/// A sign-in started at a provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignInAttemptRow {
    /// The configuration.
    pub config_id: String,
    /// The hash of the browser's cookie it is bound to.
    pub browser_hash: String,
    /// The nonce sent.
    pub nonce: String,
    /// The PKCE verifier.
    pub pkce_verifier: String,
    /// Where the person goes afterwards: `api` (the tokens as JSON) or `console`.
    pub return_to: String,
    /// When it stops being accepted.
    pub expires_at: DateTime<Utc>,
}

/// A linked identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityRow {
    /// The configuration.
    pub config_id: String,
    /// The issuer.
    pub issuer: String,
    /// The subject.
    pub subject: String,
    /// The account.
    pub user_id: String,
}

/// An identity waiting for its account's password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingLinkRow {
    /// The identity to link.
    pub identity: IdentityRow,
    /// The groups the token carried (applied when the link is made).
    pub groups: Vec<String>,
}

/// An account created at a first sign-in.
#[derive(Debug, Clone, Copy)]
pub struct ProvisionedAccount<'a> {
    /// Its user id.
    pub user_id: &'a str,
    /// Its e-mail (verified by the provider).
    pub email: &'a str,
    /// Its name, when the provider gave one.
    pub name: Option<&'a str>,
}

/// Roles to set on a member: the membership role and the Roles' ids.
#[derive(Debug, Clone)]
pub struct MemberRoles {
    /// Owner, Admin or Member.
    pub role: MembershipRole,
    /// Exactly the Roles to hold.
    pub role_ids: Vec<String>,
}

impl Store {
    /// The account an identity is linked to.
    pub async fn sso_identity(
        &self,
        config_id: &str,
        issuer: &str,
        subject: &str,
    ) -> StoreResult<Option<String>> {
        Ok(sqlx::query_scalar(&self.sql(
            "SELECT user_id FROM sso_identities WHERE config_id = $1 AND issuer = $2 AND subject = $3",
        ))
        .bind(config_id)
        .bind(issuer)
        .bind(subject)
        .fetch_optional(self.pool())
        .await?)
    }

    /// A pending link, unused and unexpired (not used by this read).
    pub async fn pending_link(
        &self,
        token_hash: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<PendingLinkRow>> {
        let row = sqlx::query(&self.sql(
            "SELECT config_id, issuer, subject, user_id, groups FROM sso_pending_links
             WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2",
        ))
        .bind(token_hash)
        .bind(stamp(now))
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(pending_of).transpose()
    }

    /// Forgets sign-ins and pending links past their time (a sweep).
    pub async fn prune_sso_attempts(&self, before: DateTime<Utc>) -> StoreResult<u64> {
        let attempts = sqlx::query(&self.sql("DELETE FROM sso_attempts WHERE expires_at < $1"))
            .bind(stamp(before))
            .execute(self.pool())
            .await?;
        let links = sqlx::query(&self.sql("DELETE FROM sso_pending_links WHERE expires_at < $1"))
            .bind(stamp(before))
            .execute(self.pool())
            .await?;
        Ok(attempts.rows_affected() + links.rows_affected())
    }
}

impl Transaction<'_> {
    /// Records a sign-in started at a provider.
    pub async fn insert_attempt(
        &mut self,
        state_hash: &str,
        a: &SignInAttemptRow,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(&self.store.sql(
            "INSERT INTO sso_attempts (state_hash, config_id, browser_hash, nonce, pkce_verifier, return_to,
               created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        ))
        .bind(state_hash)
        .bind(&a.config_id)
        .bind(&a.browser_hash)
        .bind(&a.nonce)
        .bind(&a.pkce_verifier)
        .bind(&a.return_to)
        .bind(stamp(now))
        .bind(stamp(a.expires_at))
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    /// Uses a sign-in in flight: once, before it expires (a second use, a late one or
    /// an unknown state finds nothing).
    pub async fn use_attempt(
        &mut self,
        state_hash: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<SignInAttemptRow>> {
        let row = sqlx::query(&self.store.sql(
            "UPDATE sso_attempts SET used_at = $2
             WHERE state_hash = $1 AND used_at IS NULL AND expires_at > $2
             RETURNING config_id, browser_hash, nonce, pkce_verifier, return_to, expires_at",
        ))
        .bind(state_hash)
        .bind(stamp(now))
        .fetch_optional(&mut *self.tx)
        .await?;
        row.map(|row| {
            let d = Decoder::new(&row, "sso_attempts", &[]);
            Ok(SignInAttemptRow {
                config_id: d.get("config_id")?,
                browser_hash: d.get("browser_hash")?,
                nonce: d.get("nonce")?,
                pkce_verifier: d.get("pkce_verifier")?,
                return_to: d.get("return_to")?,
                expires_at: d.stamp("expires_at")?,
            })
        })
        .transpose()
    }

    /// Links an identity to an account (linked already: a conflict).
    pub async fn link_identity(&mut self, i: &IdentityRow, now: DateTime<Utc>) -> StoreResult<()> {
        sqlx::query(&self.store.sql(
            "INSERT INTO sso_identities (config_id, issuer, subject, user_id, linked_at, last_sign_in_at)
             VALUES ($1, $2, $3, $4, $5, $5)",
        ))
        .bind(&i.config_id)
        .bind(&i.issuer)
        .bind(&i.subject)
        .bind(&i.user_id)
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await
        .map_err(taken(|| "this identity is linked already"))?;
        Ok(())
    }

    /// Records a sign-in of a linked identity.
    pub async fn touch_identity(&mut self, i: &IdentityRow, now: DateTime<Utc>) -> StoreResult<()> {
        sqlx::query(&self.store.sql(
            "UPDATE sso_identities SET last_sign_in_at = $4 WHERE config_id = $1 AND issuer = $2 AND subject = $3",
        ))
        .bind(&i.config_id)
        .bind(&i.issuer)
        .bind(&i.subject)
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    /// Records an identity waiting for its account's password.
    pub async fn insert_pending_link(
        &mut self,
        token_hash: &str,
        link: &PendingLinkRow,
        (now, expires_at): (DateTime<Utc>, DateTime<Utc>),
    ) -> StoreResult<()> {
        let i = &link.identity;
        sqlx::query(&self.store.sql(
            "INSERT INTO sso_pending_links (token_hash, config_id, issuer, subject, user_id, groups, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        ))
        .bind(token_hash)
        .bind(&i.config_id)
        .bind(&i.issuer)
        .bind(&i.subject)
        .bind(&i.user_id)
        .bind(json(&link.groups)?)
        .bind(stamp(now))
        .bind(stamp(expires_at))
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    /// Uses a pending link: once, before it expires.
    pub async fn use_pending_link(
        &mut self,
        token_hash: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<PendingLinkRow>> {
        let row = sqlx::query(&self.store.sql(
            "UPDATE sso_pending_links SET used_at = $2
             WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2
             RETURNING config_id, issuer, subject, user_id, groups",
        ))
        .bind(token_hash)
        .bind(stamp(now))
        .fetch_optional(&mut *self.tx)
        .await?;
        row.as_ref().map(pending_of).transpose()
    }

    /// Creates an account that signs in only through a provider (its e-mail
    /// verified by it). An address taken meanwhile: a conflict.
    pub async fn insert_provisioned_account(
        &mut self,
        a: ProvisionedAccount<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let at = stamp(now);
        sqlx::query(
            &self.store.sql(
                "INSERT INTO users (id, email, super_admin, created_at) VALUES ($1, $2, 0, $3)",
            ),
        )
        .bind(a.user_id)
        .bind(a.email)
        .bind(&at)
        .execute(&mut *self.tx)
        .await?;
        sqlx::query(&self.store.sql(
            "INSERT INTO accounts (user_id, email, name, password_hash, email_verified_at, generation, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, 0, $5, $5)",
        ))
        .bind(a.user_id)
        .bind(a.email)
        .bind(a.name)
        .bind(NO_PASSWORD)
        .bind(&at)
        .execute(&mut *self.tx)
        .await
        .map_err(taken(|| "an account with this e-mail exists"))?;
        Ok(())
    }

    /// The member's membership role in `org_id`, if a member.
    pub async fn membership_role(
        &mut self,
        org_id: &str,
        user_id: &str,
    ) -> StoreResult<Option<String>> {
        Ok(sqlx::query_scalar(
            &self
                .store
                .sql("SELECT role FROM memberships WHERE org_id = $1 AND user_id = $2"),
        )
        .bind(org_id)
        .bind(user_id)
        .fetch_optional(&mut *self.tx)
        .await?)
    }

    /// Makes `user_id` a member of `org_id` (when not one) holding exactly `roles`.
    /// The caller never passes the Owner.
    pub async fn set_member_roles(
        &mut self,
        (org_id, user_id): (&str, &str),
        roles: &MemberRoles,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(&self.store.sql(
            "INSERT INTO memberships (org_id, user_id, role, active, created_at) VALUES ($1, $2, $3, 1, $4)
             ON CONFLICT (org_id, user_id) DO UPDATE SET role = excluded.role",
        ))
        .bind(org_id)
        .bind(user_id)
        .bind(membership_role_name(roles.role))
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        sqlx::query(
            &self
                .store
                .sql("DELETE FROM role_members WHERE org_id = $1 AND user_id = $2"),
        )
        .bind(org_id)
        .bind(user_id)
        .execute(&mut *self.tx)
        .await?;
        for role_id in &roles.role_ids {
            self.store
                .grant_role(&mut self.tx, (org_id, role_id, user_id))
                .await?;
        }
        Ok(())
    }

    /// Starts a refresh family (with the root organization whose single sign-on
    /// issued it) and its first token.
    pub async fn start_family(
        &mut self,
        family: &FamilyRecord,
        (token_hash, sso_org): (&str, Option<&str>),
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        self.store
            .insert_family(&mut self.tx, family, (token_hash, sso_org), now)
            .await
    }
}

fn pending_of(row: &sqlx::any::AnyRow) -> StoreResult<PendingLinkRow> {
    let d = Decoder::new(row, "sso_pending_links", &[]);
    Ok(PendingLinkRow {
        identity: IdentityRow {
            config_id: d.get("config_id")?,
            issuer: d.get("issuer")?,
            subject: d.get("subject")?,
            user_id: d.get("user_id")?,
        },
        groups: d.json("groups")?,
    })
}
