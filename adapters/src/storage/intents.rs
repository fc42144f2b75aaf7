//! The registry's intents: the audit events of a registry change, written before
//! the change and moved to the outbox once it is done. SQL only.

use audit_chain::AuditEvent;
use chrono::{DateTime, Utc};

use super::decode::Decoder;
use super::{stamp, Store, StoreError, StoreResult};

/// An intent not settled, as the registry worker reads it.
#[derive(Debug, Clone)]
pub struct IntentRecord {
    /// Its id.
    pub id: String,
    /// The events to record once the change is seen.
    pub events: Vec<AuditEvent>,
    /// What shows the change (JSON of the service's own shape).
    pub check: serde_json::Value,
}

impl Store {
    /// Writes an intent (`pending`) before its change.
    pub async fn record_intent(
        &self,
        id: &str,
        events: &[AuditEvent],
        check: &serde_json::Value,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let events = serde_json::to_string(events)
            .map_err(|e| StoreError::Invalid(format!("audit events do not serialize: {e}")))?;
        sqlx::query(&self.sql(
            "INSERT INTO registry_intents (id, events, check_json, status, created_at) VALUES ($1, $2, $3, 'pending', $4)",
        ))
        .bind(id)
        .bind(events)
        .bind(check.to_string())
        .bind(stamp(now))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Drops intent `id` (its change failed before it reached the registry).
    pub async fn drop_intent(&self, id: &str) -> StoreResult<()> {
        sqlx::query(&self.sql("DELETE FROM registry_intents WHERE id = $1"))
            .bind(id)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Pending intents written before `before`, oldest first (at most `limit`).
    pub async fn stale_intents(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<IntentRecord>> {
        let rows = sqlx::query(&self.sql(
            "SELECT id, events, check_json FROM registry_intents
             WHERE status = 'pending' AND created_at < $1 ORDER BY created_at, id LIMIT $2",
        ))
        .bind(stamp(before))
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let d = Decoder::new(row, "registry_intents", &["id"]);
                Ok(IntentRecord {
                    id: d.get("id")?,
                    events: d.json("events")?,
                    check: d.json("check_json")?,
                })
            })
            .collect()
    }

    /// Abandoned intents older than `before` are forgotten (retention).
    pub async fn prune_intents(&self, before: DateTime<Utc>) -> StoreResult<u64> {
        let done = sqlx::query(
            &self
                .sql("DELETE FROM registry_intents WHERE status = 'abandoned' AND created_at < $1"),
        )
        .bind(stamp(before))
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected())
    }
}

impl super::Transaction<'_> {
    /// Settles intent `id` (the change was made): the intent goes. `false` when the
    /// registry worker recorded it already (its events must not be written twice).
    /// An intent the worker abandoned is settled all the same.
    pub async fn settle_intent(&mut self, id: &str) -> StoreResult<bool> {
        let taken = sqlx::query(&self.store.sql("DELETE FROM registry_intents WHERE id = $1"))
            .bind(id)
            .execute(&mut *self.tx)
            .await?;
        Ok(taken.rows_affected() > 0)
    }
}

impl super::Transaction<'_> {
    /// The worker's verdict on a stale intent: `made` (the registry shows the
    /// change), the intent gone (the caller records its events), or not made, the
    /// intent marked `abandoned` (the registry shows no change). `false` when it was
    /// settled meanwhile.
    pub async fn resolve_intent(&mut self, id: &str, made: bool) -> StoreResult<bool> {
        let done = match made {
            true => {
                let taken = sqlx::query(&self.store.sql(
                    "DELETE FROM registry_intents WHERE id = $1 AND status = 'pending'",
                ))
                .bind(id)
                .execute(&mut *self.tx)
                .await?;
                taken.rows_affected() > 0
            }
            false => {
                sqlx::query(&self.store.sql(
                    "UPDATE registry_intents SET status = 'abandoned' WHERE id = $1 AND status = 'pending'",
                ))
                .bind(id)
                .execute(&mut *self.tx)
                .await?
                .rows_affected()
                    > 0
            }
        };
        Ok(done)
    }
}
