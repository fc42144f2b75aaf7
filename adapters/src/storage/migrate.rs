//! The migrations: the numbered ones of each backend, applied under a lease of the
//! server's own (`migration_lease`, outside the numbered migrations like `heartbeat`),
//! not sqlx's session advisory lock, so that they work through a pooler and one
//! process migrates at a time.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{new_id, stamp, Dialect, Store, StoreError, StoreResult};

/// How long the migration lease lasts unless renewed (a process that dies while
/// migrating holds it no longer).
const MIGRATION_LEASE: Duration = Duration::from_secs(30);
/// How long a process waits for another's migrations.
const MIGRATION_WAIT: Duration = Duration::from_secs(600);

static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");
static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

impl Store {
    /// Applies the migrations of the backend, under a lease of their own (a row of
    /// `migration_lease`, renewed while they run) rather than sqlx's session advisory
    /// lock: one process migrates at a time, through a pooler in transaction mode too.
    /// Another process waits for the lease, then finds nothing left to apply.
    pub async fn migrate(&self) -> StoreResult<()> {
        // Behind a pooler, on a session of the database itself.
        if let Some(direct) = &self.direct {
            let store = Box::pin(Store::connect(direct)).await?;
            let migrated = Box::pin(store.migrate()).await;
            store.close().await;
            return migrated;
        }
        let source = match self.dialect {
            Dialect::Postgres => &POSTGRES_MIGRATIONS,
            Dialect::Sqlite => &SQLITE_MIGRATIONS,
        };
        // The same migrations without the advisory lock (the fields are how
        // `migrate!` builds a migrator; the lease below replaces the lock).
        let migrator = sqlx::migrate::Migrator {
            migrations: source.migrations.clone(),
            // A database migrated by a later release runs this one too (rolling
            // upgrades: its migrations only add what this release does not read).
            ignore_missing: true,
            locking: false,
            no_tx: source.no_tx,
        };
        let holder = new_id();
        self.take_migration_lease(&holder).await?;
        let renewal = {
            let (store, holder) = (self.clone(), holder.clone());
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(MIGRATION_LEASE / 3).await;
                    if let Err(error) = store.renew_migration_lease(&holder, Utc::now()).await {
                        tracing::warn!(%error, "the migration lease was not renewed");
                    }
                }
            })
        };
        // The server's own tables outside the numbered migrations, then those.
        let ran = match sqlx::query(super::heartbeat::CREATE)
            .execute(&self.pool)
            .await
        {
            Ok(_) => migrator
                .run(&self.pool)
                .await
                .map_err(|e| StoreError::Other(format!("migration failed: {e}"))),
            Err(error) => Err(error.into()),
        };
        renewal.abort();
        let released = sqlx::query(&self.sql("DELETE FROM migration_lease WHERE holder = $1"))
            .bind(&holder)
            .execute(&self.pool)
            .await;
        ran?;
        released?;
        Ok(())
    }

    /// Waits for the migration lease (at most [`MIGRATION_WAIT`]).
    async fn take_migration_lease(&self, holder: &str) -> StoreResult<()> {
        let create = "CREATE TABLE IF NOT EXISTS migration_lease \
                      (name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at TEXT NOT NULL)";
        // Two processes creating it at once: one of them may see the other's
        // half-made table as a conflict; the second try finds it made.
        if sqlx::query(create).execute(&self.pool).await.is_err() {
            tokio::time::sleep(Duration::from_millis(200)).await;
            sqlx::query(create).execute(&self.pool).await?;
        }
        let started = std::time::Instant::now();
        loop {
            let now = Utc::now();
            let until = now + chrono::Duration::from_std(MIGRATION_LEASE).unwrap_or_default();
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
            if taken.is_some() {
                return Ok(());
            }
            if started.elapsed() > MIGRATION_WAIT {
                return Err(StoreError::Unavailable(
                    "another process holds the migration lease".to_owned(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn renew_migration_lease(&self, holder: &str, now: DateTime<Utc>) -> StoreResult<()> {
        let until = now + chrono::Duration::from_std(MIGRATION_LEASE).unwrap_or_default();
        sqlx::query(&self.sql(
            "UPDATE migration_lease SET expires_at = $2 WHERE name = 'migrate' AND holder = $1",
        ))
        .bind(holder)
        .bind(stamp(until))
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
