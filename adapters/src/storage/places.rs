//! The places of running AI generations, per organization, shared by every replica:
//! SQL only. A place is a row with a lease its generation renews; a replica that
//! dies gives its places back when their leases run out.

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::{stamp, Store, StoreResult};

impl Store {
    /// Renews place `id`'s lease until `expires_at`.
    pub async fn renew_ai_place(&self, id: &str, expires_at: DateTime<Utc>) -> StoreResult<()> {
        sqlx::query(&self.sql("UPDATE ai_places SET expires_at = $2 WHERE id = $1"))
            .bind(id)
            .bind(stamp(expires_at))
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Gives place `id` back.
    pub async fn release_ai_place(&self, id: &str) -> StoreResult<()> {
        sqlx::query(&self.sql("DELETE FROM ai_places WHERE id = $1"))
            .bind(id)
            .execute(self.pool())
            .await?;
        Ok(())
    }
}

impl super::Transaction<'_> {
    /// Takes place `id` among `org_id`'s running generations, unless `limit` live
    /// ones (leases after `now`) are held already: decided while the organization's
    /// row of `ai_place_locks` is locked (the transaction's first statement writes
    /// it), so that concurrent requests on any replica each count the others. Places
    /// whose lease ran out are dropped on the way. `false` when none is free.
    pub async fn take_ai_place(
        &mut self,
        (id, org_id): (&str, &str),
        limit: u64,
        now: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        sqlx::query(&self.store.sql(
            "INSERT INTO ai_place_locks (org_id) VALUES ($1) \
             ON CONFLICT (org_id) DO UPDATE SET org_id = excluded.org_id",
        ))
        .bind(org_id)
        .execute(&mut *self.tx)
        .await?;
        sqlx::query(
            &self
                .store
                .sql("DELETE FROM ai_places WHERE org_id = $1 AND expires_at <= $2"),
        )
        .bind(org_id)
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        let held = sqlx::query(
            &self
                .store
                .sql("SELECT COUNT(*) AS n FROM ai_places WHERE org_id = $1"),
        )
        .bind(org_id)
        .fetch_one(&mut *self.tx)
        .await?
        .try_get::<i64, _>("n")?
        .unsigned_abs();
        if held >= limit {
            return Ok(false);
        }
        sqlx::query(
            &self
                .store
                .sql("INSERT INTO ai_places (id, org_id, expires_at) VALUES ($1, $2, $3)"),
        )
        .bind(id)
        .bind(org_id)
        .bind(stamp(expires_at))
        .execute(&mut *self.tx)
        .await?;
        Ok(true)
    }
}
