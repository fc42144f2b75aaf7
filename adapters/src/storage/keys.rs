//! Organizations' data keys (wrapped) and customer key configurations: SQL only.
//! The workflows (`services::keys`) open the transactions and decide.

use chrono::{DateTime, Utc};

use super::decode::Decoder;
use super::{stamp, Store, StoreResult, Transaction};

/// One version of an organization's data key, wrapped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataKeyRow {
    /// Its version (1, 2, ...).
    pub version: u32,
    /// The key, wrapped by the key-encryption key `kek_ref` names.
    pub wrapped: String,
    /// `local:<fingerprint>`, `aws-kms:<arn>`, `vault-transit:<name>`.
    pub kek_ref: String,
}

/// An organization's customer key configuration, as stored.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyConfigRow {
    /// The organization.
    pub org_id: String,
    /// `aws-kms` or `vault-transit`.
    pub provider: String,
    /// The key's ARN, or the transit key's name.
    pub key_ref: String,
    /// Vault's address.
    pub address: Option<String>,
    /// Vault's token, sealed under the platform key.
    pub token: Option<String>,
    /// `active` or `orphaned`.
    pub state: String,
    /// Failed checks in a row.
    pub failures: u32,
    /// The last failure's class and what the provider said.
    pub last_error: Option<String>,
    /// When the key was last checked.
    pub checked_at: Option<DateTime<Utc>>,
    /// When it was orphaned (while it is).
    pub orphaned_at: Option<DateTime<Utc>>,
    /// When it was configured.
    pub created_at: DateTime<Utc>,
    /// When it was last changed.
    pub updated_at: DateTime<Utc>,
}

impl std::fmt::Debug for KeyConfigRow {
    /// The token (sealed as it is) never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyConfigRow")
            .field("org_id", &self.org_id)
            .field("provider", &self.provider)
            .field("key_ref", &self.key_ref)
            .field("address", &self.address)
            .field("state", &self.state)
            .field("failures", &self.failures)
            .finish_non_exhaustive()
    }
}

fn config_of(row: &sqlx::any::AnyRow) -> StoreResult<KeyConfigRow> {
    let d = Decoder::new(row, "org_key_configs", &["org_id"]);
    Ok(KeyConfigRow {
        org_id: d.get("org_id")?,
        provider: d.get("provider")?,
        key_ref: d.get("key_ref")?,
        address: d.get("address")?,
        token: d.get("token")?,
        state: d.get("state")?,
        failures: d.u32("failures")?,
        last_error: d.get("last_error")?,
        checked_at: d.opt_stamp("checked_at")?,
        orphaned_at: d.opt_stamp("orphaned_at")?,
        created_at: d.stamp("created_at")?,
        updated_at: d.stamp("updated_at")?,
    })
}

/// A secret column the background pass rewrites: its table, column and row key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SecretColumn {
    /// The table.
    pub table: &'static str,
    /// The column.
    pub column: &'static str,
    /// The column a value is bound to: its own, or the one it moves into unchanged
    /// (a waiting authenticator becomes the enrolled one).
    pub bound_as: &'static str,
    /// The row's key column.
    pub key: &'static str,
    /// The organization column, when the rows belong to organizations (else the
    /// platform's scope).
    pub org: Option<&'static str>,
}

/// Every column that holds a sealed secret.
pub const SECRET_COLUMNS: [SecretColumn; 6] = [
    SecretColumn {
        table: "alert_destinations",
        column: "secret",
        bound_as: "secret",
        key: "id",
        org: Some("org_id"),
    },
    SecretColumn {
        table: "notification_preferences",
        column: "webhook_secret",
        bound_as: "webhook_secret",
        key: "org_id",
        org: Some("org_id"),
    },
    SecretColumn {
        table: "accounts",
        column: "totp_secret",
        bound_as: "totp_secret",
        key: "user_id",
        org: None,
    },
    SecretColumn {
        table: "org_idp_configs",
        column: "client_secret",
        bound_as: "client_secret",
        key: "id",
        org: Some("org_id"),
    },
    SecretColumn {
        table: "accounts",
        column: "totp_pending",
        bound_as: "totp_secret",
        key: "user_id",
        org: None,
    },
    SecretColumn {
        table: "org_ai_settings",
        column: "own_api_key",
        bound_as: "own_api_key",
        key: "org_id",
        org: Some("org_id"),
    },
];

/// One stored secret not yet in the current format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OldSecret {
    /// Its row's key.
    pub row_id: String,
    /// The organization (None: the platform's scope).
    pub org_id: Option<String>,
    /// The stored value.
    pub stored: String,
}

impl Store {
    /// An organization's data keys, oldest first.
    pub async fn data_keys(&self, org_id: &str) -> StoreResult<Vec<DataKeyRow>> {
        let rows = sqlx::query(&self.sql(
            "SELECT version, wrapped, kek_ref FROM org_data_keys WHERE org_id = $1 ORDER BY version",
        ))
        .bind(org_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let d = Decoder::new(row, "org_data_keys", &["version"]);
                Ok(DataKeyRow {
                    version: d.u32("version")?,
                    wrapped: d.get("wrapped")?,
                    kek_ref: d.get("kek_ref")?,
                })
            })
            .collect()
    }

    /// Stores the first data key of an organization unless another replica stored
    /// one first (then nothing changes); whether this one was stored.
    pub async fn insert_first_data_key(
        &self,
        org_id: &str,
        key: &DataKeyRow,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let done = sqlx::query(&self.sql(
            "INSERT INTO org_data_keys (org_id, version, wrapped, kek_ref, created_at, rewrapped_at)
             SELECT $1, $2, $3, $4, $5, $5
             WHERE NOT EXISTS (SELECT 1 FROM org_data_keys WHERE org_id = $1)
             ON CONFLICT (org_id, version) DO NOTHING",
        ))
        .bind(org_id)
        .bind(i64::from(key.version))
        .bind(&key.wrapped)
        .bind(&key.kek_ref)
        .bind(stamp(now))
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// The data keys wrapped by one of `kek_refs` (the platform keys being
    /// replaced): (organization, row), at most `limit`.
    pub async fn data_keys_wrapped_by(
        &self,
        kek_ref: &str,
        limit: u32,
    ) -> StoreResult<Vec<(String, DataKeyRow)>> {
        let rows = sqlx::query(&self.sql(
            "SELECT org_id, version, wrapped, kek_ref FROM org_data_keys WHERE kek_ref = $1
             ORDER BY org_id, version LIMIT $2",
        ))
        .bind(kek_ref)
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let d = Decoder::new(row, "org_data_keys", &["org_id", "version"]);
                Ok((
                    d.get("org_id")?,
                    DataKeyRow {
                        version: d.u32("version")?,
                        wrapped: d.get("wrapped")?,
                        kek_ref: d.get("kek_ref")?,
                    },
                ))
            })
            .collect()
    }

    /// An organization's customer key configuration.
    pub async fn key_config(&self, org_id: &str) -> StoreResult<Option<KeyConfigRow>> {
        let row = sqlx::query(&self.sql("SELECT * FROM org_key_configs WHERE org_id = $1"))
            .bind(org_id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(config_of).transpose()
    }

    /// Every customer key configuration (a few: an Enterprise feature), by
    /// organization.
    pub async fn key_configs(&self) -> StoreResult<Vec<KeyConfigRow>> {
        let rows = sqlx::query("SELECT * FROM org_key_configs ORDER BY org_id")
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(config_of).collect()
    }

    /// The organization whose key seals `org_id`'s secrets: its root.
    pub async fn key_owner(&self, org_id: &str) -> StoreResult<Option<String>> {
        Ok(sqlx::query_scalar(
            &self.sql("SELECT COALESCE(parent_org_id, id) FROM organizations WHERE id = $1"),
        )
        .bind(org_id)
        .fetch_optional(self.pool())
        .await?)
    }

    /// A root organization and its teams (deleted ones too: their secrets stay
    /// readable until the purge).
    pub async fn with_teams(&self, root_id: &str) -> StoreResult<Vec<String>> {
        Ok(sqlx::query_scalar(
            &self.sql(
                "SELECT id FROM organizations WHERE id = $1 OR parent_org_id = $1 ORDER BY id",
            ),
        )
        .bind(root_id)
        .fetch_all(self.pool())
        .await?)
    }

    /// Up to `limit` values of `column` not in the current format (`enc:v2:`), after
    /// row key `after` (the pass resumes from where it stopped).
    pub async fn old_secrets(
        &self,
        column: &SecretColumn,
        after: &str,
        limit: u32,
    ) -> StoreResult<Vec<OldSecret>> {
        let org = column.org.unwrap_or("NULL");
        let rows = sqlx::query(&self.sql(&format!(
            "SELECT {key} AS row_id, {org} AS org_id, {col} AS stored FROM {table}
             WHERE {col} IS NOT NULL AND {col} <> '' AND {col} NOT LIKE 'enc:v2:%' AND {key} > $1
             ORDER BY {key} LIMIT $2",
            key = column.key,
            col = column.column,
            table = column.table,
        )))
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let d = Decoder::new(row, column.table, &["row_id"]);
                Ok(OldSecret {
                    row_id: d.get("row_id")?,
                    org_id: d.get("org_id")?,
                    stored: d.get("stored")?,
                })
            })
            .collect()
    }

    /// Replaces a stored secret by its rewritten form, unless it changed meanwhile
    /// (then the next pass sees the new value); whether it was replaced.
    pub async fn rewrite_secret(
        &self,
        column: &SecretColumn,
        row_id: &str,
        (old, new): (&str, &str),
    ) -> StoreResult<bool> {
        let done = sqlx::query(&self.sql(&format!(
            "UPDATE {table} SET {col} = $3 WHERE {key} = $1 AND {col} = $2",
            key = column.key,
            col = column.column,
            table = column.table,
        )))
        .bind(row_id)
        .bind(old)
        .bind(new)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }
}

impl Transaction<'_> {
    /// Stores (or replaces) an organization's customer key configuration, active.
    pub async fn save_key_config(&mut self, config: &KeyConfigRow) -> StoreResult<()> {
        sqlx::query(&self.store.sql(
            "INSERT INTO org_key_configs (org_id, provider, key_ref, address, token, state, failures,
               last_error, checked_at, orphaned_at, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
             ON CONFLICT (org_id) DO UPDATE SET provider = excluded.provider, key_ref = excluded.key_ref,
               address = excluded.address, token = excluded.token, state = excluded.state,
               failures = excluded.failures, last_error = excluded.last_error,
               checked_at = excluded.checked_at, orphaned_at = excluded.orphaned_at,
               updated_at = excluded.updated_at",
        ))
        .bind(&config.org_id)
        .bind(&config.provider)
        .bind(&config.key_ref)
        .bind(&config.address)
        .bind(&config.token)
        .bind(&config.state)
        .bind(i64::from(config.failures))
        .bind(&config.last_error)
        .bind(config.checked_at.map(stamp))
        .bind(config.orphaned_at.map(stamp))
        .bind(stamp(config.created_at))
        .bind(stamp(config.updated_at))
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    /// Removes an organization's customer key configuration; whether there was one.
    pub async fn delete_key_config(&mut self, org_id: &str) -> StoreResult<bool> {
        let done = sqlx::query(
            &self
                .store
                .sql("DELETE FROM org_key_configs WHERE org_id = $1"),
        )
        .bind(org_id)
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Stores data keys rewrapped (by version), or new ones.
    pub async fn put_data_keys(
        &mut self,
        org_id: &str,
        keys: &[DataKeyRow],
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        for key in keys {
            sqlx::query(&self.store.sql(
                "INSERT INTO org_data_keys (org_id, version, wrapped, kek_ref, created_at, rewrapped_at)
                 VALUES ($1, $2, $3, $4, $5, $5)
                 ON CONFLICT (org_id, version) DO UPDATE SET wrapped = excluded.wrapped,
                   kek_ref = excluded.kek_ref, rewrapped_at = excluded.rewrapped_at",
            ))
            .bind(org_id)
            .bind(i64::from(key.version))
            .bind(&key.wrapped)
            .bind(&key.kek_ref)
            .bind(stamp(now))
            .execute(&mut *self.tx)
            .await?;
        }
        Ok(())
    }

    /// Rewraps one data key unless it changed meanwhile (`old_ref`); whether it did.
    pub async fn rewrap_data_key(
        &mut self,
        org_id: &str,
        old_ref: &str,
        key: &DataKeyRow,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let done = sqlx::query(&self.store.sql(
            "UPDATE org_data_keys SET wrapped = $4, kek_ref = $5, rewrapped_at = $6
             WHERE org_id = $1 AND version = $2 AND kek_ref = $3",
        ))
        .bind(org_id)
        .bind(i64::from(key.version))
        .bind(old_ref)
        .bind(&key.wrapped)
        .bind(&key.kek_ref)
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Counts a failed check of an organization's key; when it makes `threshold` in
    /// a row while the key is active, the organization is orphaned in the same step:
    /// whether this failure orphaned it.
    pub async fn key_check_failed(
        &mut self,
        org_id: &str,
        why: &str,
        threshold: u32,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        sqlx::query(&self.store.sql(
            "UPDATE org_key_configs SET failures = failures + 1, last_error = $2, checked_at = $3
             WHERE org_id = $1",
        ))
        .bind(org_id)
        .bind(why)
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        let orphaned = sqlx::query(&self.store.sql(
            "UPDATE org_key_configs SET state = 'orphaned', orphaned_at = $3
             WHERE org_id = $1 AND state = 'active' AND failures >= $2",
        ))
        .bind(org_id)
        .bind(i64::from(threshold))
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        Ok(orphaned.rows_affected() == 1)
    }

    /// Records a good check: the failures are forgotten; an orphaned organization
    /// recovers (whether it did).
    pub async fn key_check_passed(
        &mut self,
        org_id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let recovered = sqlx::query(&self.store.sql(
            "UPDATE org_key_configs SET state = 'active', orphaned_at = NULL
             WHERE org_id = $1 AND state = 'orphaned'",
        ))
        .bind(org_id)
        .execute(&mut *self.tx)
        .await?;
        sqlx::query(&self.store.sql(
            "UPDATE org_key_configs SET failures = 0, last_error = NULL, checked_at = $2 WHERE org_id = $1",
        ))
        .bind(org_id)
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        Ok(recovered.rows_affected() == 1)
    }

    /// Makes an organization's webhook deliveries that waited for its key due now.
    pub async fn release_waiting_deliveries(
        &mut self,
        org_ids: &[String],
        now: DateTime<Utc>,
    ) -> StoreResult<u64> {
        let mut released = 0;
        for org_id in org_ids {
            let done = sqlx::query(&self.store.sql(
                "UPDATE deliveries SET run_after = $2 WHERE org_id = $1 AND status = 'pending'
                 AND lease_until IS NULL AND last_error = $3",
            ))
            .bind(org_id)
            .bind(stamp(now))
            .bind(super::WAITING_FOR_KEY)
            .execute(&mut *self.tx)
            .await?;
            released += done.rows_affected();
        }
        Ok(released)
    }
}
