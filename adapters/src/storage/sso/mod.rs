//! Single sign-on's rows: identity-provider configurations, claimed domains, the
//! enforcement policy and its break-glass accounts; the sign-ins' own in `signin`. SQL only: the workflows (`services::sso`) open
//! the transactions and decide (`tenancy::sso`).

use chrono::{DateTime, Utc};
use tenancy::sso::RoleMapping;

mod signin;

pub use signin::{IdentityRow, MemberRoles, PendingLinkRow, ProvisionedAccount, SignInAttemptRow};

use super::decode::Decoder;
use super::{stamp, taken, Store, StoreError, StoreResult, Transaction};

/// An identity-provider configuration, as stored (the client secret sealed).
#[derive(Clone, PartialEq, Eq)]
pub struct IdpConfigRow {
    /// Its id.
    pub id: String,
    /// The root organization.
    pub org_id: String,
    /// Its name, unique in the organization.
    pub name: String,
    /// The issuer, exactly as the discovery document says it.
    pub issuer: String,
    /// The client id at the provider.
    pub client_id: String,
    /// The client secret, sealed.
    pub client_secret: String,
    /// The scopes asked for (`openid` first).
    pub scopes: Vec<String>,
    /// The ID token's claim that lists the person's groups.
    pub groups_claim: String,
    /// Groups given Roles.
    pub role_mappings: Vec<RoleMapping>,
    /// The Role given when no group is mapped.
    pub default_role: String,
    /// The e-mail domains it serves.
    pub domains: Vec<String>,
    /// Whether accounts are created at the first sign-in.
    pub jit_provisioning: bool,
    /// Whether it may be used.
    pub enabled: bool,
    /// Raised by each change (a stale one is 409).
    pub version: u32,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

impl std::fmt::Debug for IdpConfigRow {
    /// The client secret (sealed as it is) never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdpConfigRow")
            .field("id", &self.id)
            .field("org_id", &self.org_id)
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("enabled", &self.enabled)
            .finish_non_exhaustive()
    }
}

fn config_of(row: &sqlx::any::AnyRow) -> StoreResult<IdpConfigRow> {
    let d = Decoder::new(row, "org_idp_configs", &["id"]);
    Ok(IdpConfigRow {
        id: d.get("id")?,
        org_id: d.get("org_id")?,
        name: d.get("name")?,
        issuer: d.get("issuer")?,
        client_id: d.get("client_id")?,
        client_secret: d.get("client_secret")?,
        scopes: d.json("scopes")?,
        groups_claim: d.get("groups_claim")?,
        role_mappings: d.json("role_mappings")?,
        default_role: d.get("default_role")?,
        domains: d.json("domains")?,
        jit_provisioning: d.flag("jit_provisioning")?,
        enabled: d.flag("enabled")?,
        version: d.u32("version")?,
        created_at: d.stamp("created_at")?,
        updated_at: d.stamp("updated_at")?,
    })
}

/// A domain an organization claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainRow {
    /// The organization.
    pub org_id: String,
    /// The domain.
    pub domain: String,
    /// The token its TXT record must carry.
    pub token: String,
    /// When it was claimed.
    pub created_at: DateTime<Utc>,
    /// When it was proven.
    pub verified_at: Option<DateTime<Utc>>,
    /// When its record was last looked up.
    pub checked_at: Option<DateTime<Utc>>,
}

fn domain_of(row: &sqlx::any::AnyRow) -> StoreResult<DomainRow> {
    let d = Decoder::new(row, "org_domains", &["org_id", "domain"]);
    Ok(DomainRow {
        org_id: d.get("org_id")?,
        domain: d.get("domain")?,
        token: d.get("token")?,
        created_at: d.stamp("created_at")?,
        verified_at: d.opt_stamp("verified_at")?,
        checked_at: d.opt_stamp("checked_at")?,
    })
}

/// An organization's enforcement and its armed break-glass accounts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SsoPolicyRow {
    /// Whether its single sign-on is required.
    pub required: bool,
    /// From when (after the grace period).
    pub enforce_from: Option<DateTime<Utc>>,
    /// When it last changed.
    pub updated_at: Option<DateTime<Utc>>,
    /// Break-glass accounts: (user, armed until, armed by, reason).
    pub break_glass: Vec<BreakGlassRow>,
}

/// A break-glass account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BreakGlassRow {
    /// The account.
    pub user_id: String,
    /// Until when it keeps password access.
    pub armed_until: DateTime<Utc>,
    /// Who armed it.
    pub armed_by: String,
    /// Why.
    pub reason: String,
}

/// The password hash of an account that signs in only through a provider: not a
/// hash, so that no password ever matches it.
pub const NO_PASSWORD: &str = "!sso-only";

impl Store {
    /// A root organization's configurations, by name.
    pub async fn idp_configs(&self, org_id: &str) -> StoreResult<Vec<IdpConfigRow>> {
        let rows = sqlx::query(
            &self.sql("SELECT * FROM org_idp_configs WHERE org_id = $1 ORDER BY name, id"),
        )
        .bind(org_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(config_of).collect()
    }

    /// One configuration.
    pub async fn idp_config(&self, id: &str) -> StoreResult<Option<IdpConfigRow>> {
        let row = sqlx::query(&self.sql("SELECT * FROM org_idp_configs WHERE id = $1"))
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(config_of).transpose()
    }

    /// An organization's claimed domains.
    pub async fn domains(&self, org_id: &str) -> StoreResult<Vec<DomainRow>> {
        let rows =
            sqlx::query(&self.sql("SELECT * FROM org_domains WHERE org_id = $1 ORDER BY domain"))
                .bind(org_id)
                .fetch_all(self.pool())
                .await?;
        rows.iter().map(domain_of).collect()
    }

    /// The organization that verified `domain`, if any.
    pub async fn domain_owner(&self, domain: &str) -> StoreResult<Option<String>> {
        Ok(sqlx::query_scalar(&self.sql(
            "SELECT d.org_id FROM org_domains d JOIN organizations o ON o.id = d.org_id
             WHERE d.domain = $1 AND d.verified_at IS NOT NULL AND o.deleted_at IS NULL",
        ))
        .bind(domain)
        .fetch_optional(self.pool())
        .await?)
    }

    /// An organization's enforcement and break-glass accounts.
    pub async fn sso_policy(&self, org_id: &str) -> StoreResult<SsoPolicyRow> {
        let row = sqlx::query(&self.sql("SELECT * FROM org_sso_policies WHERE org_id = $1"))
            .bind(org_id)
            .fetch_optional(self.pool())
            .await?;
        let mut policy = match row {
            Some(row) => {
                let d = Decoder::new(&row, "org_sso_policies", &["org_id"]);
                SsoPolicyRow {
                    required: d.flag("required")?,
                    enforce_from: d.opt_stamp("enforce_from")?,
                    updated_at: Some(d.stamp("updated_at")?),
                    break_glass: Vec::new(),
                }
            }
            None => SsoPolicyRow::default(),
        };
        let rows = sqlx::query(
            &self.sql("SELECT * FROM org_break_glass WHERE org_id = $1 ORDER BY user_id"),
        )
        .bind(org_id)
        .fetch_all(self.pool())
        .await?;
        for row in &rows {
            let d = Decoder::new(row, "org_break_glass", &["org_id", "user_id"]);
            policy.break_glass.push(BreakGlassRow {
                user_id: d.get("user_id")?,
                armed_until: d.stamp("armed_until")?,
                armed_by: d.get("armed_by")?,
                reason: d.get("reason")?,
            });
        }
        Ok(policy)
    }
}

impl Transaction<'_> {
    /// Takes the organization's row lock, so that counts compared with caps
    /// (configurations, break-glass accounts, seats) are decided one at a time.
    pub async fn lock_organization(&mut self, org_id: &str) -> StoreResult<()> {
        self.store.lock_organization(&mut self.tx, org_id).await
    }

    /// How many configurations the organization holds (after the lock).
    pub async fn count_idp_configs(&mut self, org_id: &str) -> StoreResult<usize> {
        let n: i64 = sqlx::query_scalar(
            &self
                .store
                .sql("SELECT COUNT(*) FROM org_idp_configs WHERE org_id = $1"),
        )
        .bind(org_id)
        .fetch_one(&mut *self.tx)
        .await?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// Inserts a configuration (a name taken is a conflict).
    pub async fn insert_idp_config(&mut self, c: &IdpConfigRow) -> StoreResult<()> {
        sqlx::query(&self.store.sql(
            "INSERT INTO org_idp_configs (id, org_id, name, issuer, client_id, client_secret, scopes,
               groups_claim, role_mappings, default_role, domains, jit_provisioning, enabled, version,
               created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)",
        ))
        .bind(&c.id)
        .bind(&c.org_id)
        .bind(&c.name)
        .bind(&c.issuer)
        .bind(&c.client_id)
        .bind(&c.client_secret)
        .bind(json(&c.scopes)?)
        .bind(&c.groups_claim)
        .bind(json(&c.role_mappings)?)
        .bind(&c.default_role)
        .bind(json(&c.domains)?)
        .bind(i64::from(c.jit_provisioning))
        .bind(i64::from(c.enabled))
        .bind(i64::from(c.version))
        .bind(stamp(c.created_at))
        .bind(stamp(c.updated_at))
        .execute(&mut *self.tx)
        .await
        .map_err(taken(|| format!(
                "the organization has a configuration named `{}`",
                c.name
            )))?;
        Ok(())
    }

    /// Replaces a configuration if it is still at `read_version`; whether it was.
    pub async fn update_idp_config(
        &mut self,
        c: &IdpConfigRow,
        read_version: u32,
    ) -> StoreResult<bool> {
        let done = sqlx::query(&self.store.sql(
            "UPDATE org_idp_configs SET name = $3, issuer = $4, client_id = $5, client_secret = $6,
               scopes = $7, groups_claim = $8, role_mappings = $9, default_role = $10, domains = $11,
               jit_provisioning = $12, enabled = $13, version = $14, updated_at = $15
             WHERE id = $1 AND version = $2",
        ))
        .bind(&c.id)
        .bind(i64::from(read_version))
        .bind(&c.name)
        .bind(&c.issuer)
        .bind(&c.client_id)
        .bind(&c.client_secret)
        .bind(json(&c.scopes)?)
        .bind(&c.groups_claim)
        .bind(json(&c.role_mappings)?)
        .bind(&c.default_role)
        .bind(json(&c.domains)?)
        .bind(i64::from(c.jit_provisioning))
        .bind(i64::from(c.enabled))
        .bind(i64::from(c.version))
        .bind(stamp(c.updated_at))
        .execute(&mut *self.tx)
        .await
        .map_err(taken(|| format!(
                "the organization has a configuration named `{}`",
                c.name
            )))?;
        Ok(done.rows_affected() == 1)
    }

    /// Deletes a configuration (its identities and pending links with it).
    pub async fn delete_idp_config(&mut self, id: &str) -> StoreResult<bool> {
        for statement in [
            "DELETE FROM sso_identities WHERE config_id = $1",
            "DELETE FROM sso_pending_links WHERE config_id = $1",
            "DELETE FROM sso_attempts WHERE config_id = $1",
        ] {
            sqlx::query(&self.store.sql(statement))
                .bind(id)
                .execute(&mut *self.tx)
                .await?;
        }
        let done = sqlx::query(&self.store.sql("DELETE FROM org_idp_configs WHERE id = $1"))
            .bind(id)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Records a claim of a domain (claimed already by this organization: conflict).
    pub async fn insert_domain(&mut self, row: &DomainRow) -> StoreResult<()> {
        sqlx::query(&self.store.sql(
            "INSERT INTO org_domains (org_id, domain, token, created_at) VALUES ($1, $2, $3, $4)",
        ))
        .bind(&row.org_id)
        .bind(&row.domain)
        .bind(&row.token)
        .bind(stamp(row.created_at))
        .execute(&mut *self.tx)
        .await
        .map_err(taken(|| {
            format!("the organization claimed `{}` already", row.domain)
        }))?;
        Ok(())
    }

    /// Marks a domain proven (or only looked up, when `verified` is false). Verified
    /// by another organization meanwhile: a conflict (one organization at most).
    pub async fn domain_checked(
        &mut self,
        (org_id, domain): (&str, &str),
        verified: bool,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let sql = if verified {
            "UPDATE org_domains SET verified_at = COALESCE(verified_at, $3), checked_at = $3
             WHERE org_id = $1 AND domain = $2"
        } else {
            "UPDATE org_domains SET checked_at = $3 WHERE org_id = $1 AND domain = $2"
        };
        sqlx::query(&self.store.sql(sql))
            .bind(org_id)
            .bind(domain)
            .bind(stamp(now))
            .execute(&mut *self.tx)
            .await
            .map_err(taken(|| {
                format!("`{domain}` is verified by another organization")
            }))?;
        Ok(())
    }

    /// Removes a claim; whether there was one.
    pub async fn delete_domain(&mut self, org_id: &str, domain: &str) -> StoreResult<bool> {
        let done = sqlx::query(
            &self
                .store
                .sql("DELETE FROM org_domains WHERE org_id = $1 AND domain = $2"),
        )
        .bind(org_id)
        .bind(domain)
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Stores an organization's enforcement.
    pub async fn save_sso_policy(
        &mut self,
        org_id: &str,
        (required, enforce_from): (bool, Option<DateTime<Utc>>),
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(&self.store.sql(
            "INSERT INTO org_sso_policies (org_id, required, enforce_from, updated_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (org_id) DO UPDATE SET required = excluded.required,
               enforce_from = excluded.enforce_from, updated_at = excluded.updated_at",
        ))
        .bind(org_id)
        .bind(i64::from(required))
        .bind(enforce_from.map(stamp))
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    /// The organization's break-glass accounts other than `user_id` armed at `now`
    /// (after the lock).
    pub async fn armed_break_glass_others(
        &mut self,
        org_id: &str,
        user_id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<usize> {
        let n: i64 = sqlx::query_scalar(&self.store.sql(
            "SELECT COUNT(*) FROM org_break_glass WHERE org_id = $1 AND user_id <> $2 AND armed_until > $3",
        ))
        .bind(org_id)
        .bind(user_id)
        .bind(stamp(now))
        .fetch_one(&mut *self.tx)
        .await?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// Arms (or re-arms) a break-glass account.
    pub async fn arm_break_glass(&mut self, org_id: &str, row: &BreakGlassRow) -> StoreResult<()> {
        sqlx::query(&self.store.sql(
            "INSERT INTO org_break_glass (org_id, user_id, armed_until, armed_by, reason) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (org_id, user_id) DO UPDATE SET armed_until = excluded.armed_until,
               armed_by = excluded.armed_by, reason = excluded.reason",
        ))
        .bind(org_id)
        .bind(&row.user_id)
        .bind(stamp(row.armed_until))
        .bind(&row.armed_by)
        .bind(&row.reason)
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    /// Disarms a break-glass account; whether it was one.
    pub async fn disarm_break_glass(&mut self, org_id: &str, user_id: &str) -> StoreResult<bool> {
        let done = sqlx::query(
            &self
                .store
                .sql("DELETE FROM org_break_glass WHERE org_id = $1 AND user_id = $2"),
        )
        .bind(org_id)
        .bind(user_id)
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }
}

fn json<T: serde::Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|e| StoreError::Other(e.to_string()))
}
