//! The migrations: the numbered ones of each backend, applied under a lease of the
//! server's own (`migration_lease`, outside the numbered migrations like `heartbeat`),
//! not sqlx's session advisory lock, so that they work through a pooler and one
//! process migrates at a time. The steps are here; the workflow that takes, renews
//! and hands back the lease around them is `services::operations::migrate`.

use chrono::{DateTime, Utc};

use super::{stamp, Dialect, Store, StoreError, StoreResult};

static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");
static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

impl Store {
    /// Behind a pooler, a store on a session of the database itself
    /// (`DATABASE_DIRECT_URL`), which migrations need; `None` when this store is one.
    pub async fn migration_session(&self) -> StoreResult<Option<Store>> {
        match &self.direct {
            Some(direct) => Ok(Some(Box::pin(Store::connect(direct)).await?)),
            None => Ok(None),
        }
    }

    /// Creates the lease's table if it is missing.
    pub async fn create_migration_lease(&self) -> StoreResult<()> {
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS migration_lease \
             (name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at TEXT NOT NULL)",
        )
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Takes the migration lease for `holder` until `until` if nobody holds it or its
    /// holder's lease ended before `now`: whether it was taken.
    pub async fn take_migration_lease(
        &self,
        holder: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let taken = sqlx::query(&self.sql(
            "INSERT INTO migration_lease (name, holder, expires_at) VALUES ('migrate', $1, $2) \
             ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at \
             WHERE migration_lease.expires_at < $3 RETURNING holder",
        ))
        .bind(holder)
        .bind(stamp(until))
        .bind(stamp(now))
        .fetch_optional(&self.pool)
        .await?;
        Ok(taken.is_some())
    }

    /// Extends `holder`'s migration lease to `until`.
    pub async fn renew_migration_lease(
        &self,
        holder: &str,
        until: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(&self.sql(
            "UPDATE migration_lease SET expires_at = $2 WHERE name = 'migrate' AND holder = $1",
        ))
        .bind(holder)
        .bind(stamp(until))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Hands `holder`'s migration lease back.
    pub async fn release_migration_lease(&self, holder: &str) -> StoreResult<()> {
        sqlx::query(&self.sql("DELETE FROM migration_lease WHERE holder = $1"))
            .bind(holder)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Applies the server's own tables outside the numbered migrations, then the
    /// numbered migrations of the backend, without sqlx's advisory lock (the caller
    /// holds the migration lease).
    pub async fn apply_migrations(&self) -> StoreResult<()> {
        let source = match self.dialect {
            Dialect::Postgres => &POSTGRES_MIGRATIONS,
            Dialect::Sqlite => &SQLITE_MIGRATIONS,
        };
        // The same migrations without the advisory lock (the fields are how
        // `migrate!` builds a migrator; the lease replaces the lock).
        let migrator = sqlx::migrate::Migrator {
            migrations: source.migrations.clone(),
            // A database migrated by a later release runs this one too (rolling
            // upgrades: its migrations only add what this release does not read).
            ignore_missing: true,
            locking: false,
            no_tx: source.no_tx,
        };
        sqlx::query(super::heartbeat::CREATE)
            .execute(&self.pool)
            .await?;
        migrator
            .run(&self.pool)
            .await
            .map_err(|e| StoreError::Other(format!("migration failed: {e}")))
    }
}
