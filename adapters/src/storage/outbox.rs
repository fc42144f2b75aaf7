//! The audit outbox, denial folds and leases: SQL only. The relay that drains the
//! outbox lives in `workers::relay`.

use audit_chain::AuditEvent;
use chrono::{DateTime, Utc};
use sqlx::{AnyConnection, Row};

use super::decode::Decoder;
use super::{stamp, Store, StoreError, StoreResult, Transaction};

/// One event waiting in the outbox.
#[derive(Debug, Clone)]
pub struct Pending {
    /// Its place in the outbox (events are chained in this order).
    pub id: i64,
    /// The event.
    pub event: AuditEvent,
}

/// The key of a denial fold: who was refused, where, in which minute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldKey {
    /// The refused actor.
    pub actor_id: String,
    /// The organization.
    pub org_id: String,
    /// The minute (`2026-11-22T20:45Z`).
    pub minute: String,
}

/// A minute's denials of one actor in one organization.
#[derive(Debug, Clone)]
pub struct Fold {
    /// The minute's first denial (chained when it happened).
    pub first: AuditEvent,
    /// How many denials the minute had.
    pub count: u64,
    /// When the last of them happened.
    pub last_at: DateTime<Utc>,
}

/// How much waits in the outbox.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OutboxDepth {
    /// Rows waiting.
    pub rows: u64,
    /// When the oldest was written.
    pub oldest: Option<DateTime<Utc>>,
}

impl Store {
    /// Writes audit events to the outbox, inside the caller's transaction: they are
    /// durable exactly when the change they record is.
    pub(crate) async fn enqueue(
        &self,
        conn: &mut AnyConnection,
        events: &[AuditEvent],
    ) -> StoreResult<()> {
        for event in events {
            let text = serde_json::to_string(event).map_err(|e| {
                StoreError::Invalid(format!("an audit event does not serialize: {e}"))
            })?;
            sqlx::query(&self.sql("INSERT INTO audit_outbox (event, created_at) VALUES ($1, $2)"))
                .bind(text)
                .bind(stamp(event.occurred_at))
                .execute(&mut *conn)
                .await?;
        }
        Ok(())
    }

    /// The oldest `limit` events of the outbox, in order.
    pub async fn outbox_batch(&self, limit: u32) -> StoreResult<Vec<Pending>> {
        let rows =
            sqlx::query(&self.sql("SELECT id, event FROM audit_outbox ORDER BY id LIMIT $1"))
                .bind(i64::from(limit))
                .fetch_all(self.pool())
                .await?;
        rows.iter()
            .map(|row| {
                let d = Decoder::new(row, "audit_outbox", &[]);
                Ok(Pending {
                    id: d.get("id")?,
                    event: d.json("event")?,
                })
            })
            .collect()
    }

    /// How many events wait, and since when.
    pub async fn outbox_depth(&self) -> StoreResult<OutboxDepth> {
        let row = sqlx::query("SELECT COUNT(*) AS n, MIN(created_at) AS oldest FROM audit_outbox")
            .fetch_one(self.pool())
            .await?;
        let d = Decoder::new(&row, "audit_outbox", &[]);
        let rows: i64 = d.get("n")?;
        Ok(OutboxDepth {
            rows: rows.unsigned_abs(),
            oldest: d.opt_stamp("oldest")?,
        })
    }

    /// The folds of minutes before `before` (at most 500, oldest first).
    pub async fn denial_folds_before(&self, before: DateTime<Utc>) -> StoreResult<Vec<FoldKey>> {
        let rows = sqlx::query(&self.sql(
            "SELECT actor_id, org_id, minute FROM denial_folds WHERE minute < $1 ORDER BY minute LIMIT 500",
        ))
        .bind(minute_of(before))
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let key = Decoder::new(row, "denial_folds", &["actor_id", "org_id", "minute"]);
                Ok(FoldKey {
                    actor_id: key.get("actor_id")?,
                    org_id: key.get("org_id")?,
                    minute: key.get("minute")?,
                })
            })
            .collect()
    }

    /// Takes or renews the lease `name` for `holder` until `now + ttl`: granted when
    /// it is free, expired, or already `holder`'s. Returns the fencing token while
    /// held (it changes only when the holder does), `None` when another holds it.
    pub async fn take_lease(
        &self,
        name: &str,
        holder: &str,
        ttl: std::time::Duration,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<i64>> {
        let until =
            now + chrono::Duration::from_std(ttl).unwrap_or_else(|_| chrono::Duration::seconds(30));
        let row = sqlx::query(&self.sql(
            "INSERT INTO leases (name, holder, expires_at, token) VALUES ($1, $2, $3, 1)
             ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at,
               token = CASE WHEN leases.holder = excluded.holder THEN leases.token ELSE leases.token + 1 END
             WHERE leases.holder = excluded.holder OR leases.expires_at < $4
             RETURNING token",
        ))
        .bind(name)
        .bind(holder)
        .bind(stamp(until))
        .bind(stamp(now))
        .fetch_optional(self.pool())
        .await?;
        row.map(|r| r.try_get::<i64, _>("token").map_err(StoreError::from))
            .transpose()
    }

    pub async fn release_lease(&self, name: &str, holder: &str) -> StoreResult<()> {
        sqlx::query(&self.sql("DELETE FROM leases WHERE name = $1 AND holder = $2"))
            .bind(name)
            .bind(holder)
            .execute(self.pool())
            .await?;
        Ok(())
    }
}

/// The minute a time falls in, as stored: `2026-11-22T20:45Z`.
fn minute_of(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%MZ").to_string()
}

/// Steps of the workers' and services' units of work.
impl Transaction<'_> {
    /// Gives a lease back (at a graceful stop), so another replica takes it at once.
    /// Hands back everything `holder` holds, when its process stops: its leases are
    /// deleted, and its claims on scans and exports expire now (another replica
    /// takes them over at once, with a new fencing token). Answers how many.
    pub async fn hand_back_leases(&mut self, holder: &str, now: DateTime<Utc>) -> StoreResult<u64> {
        let mut handed = sqlx::query(&self.store.sql("DELETE FROM leases WHERE holder = $1"))
            .bind(holder)
            .execute(&mut *self.tx)
            .await?
            .rows_affected();
        for table in ["scans", "org_exports"] {
            handed += sqlx::query(&self.store.sql(&format!(
                "UPDATE {table} SET lease_until = $2 WHERE holder = $1 AND lease_until > $2"
            )))
            .bind(holder)
            .bind(stamp(now))
            .execute(&mut *self.tx)
            .await?
            .rows_affected();
        }
        Ok(handed)
    }

    /// Chains one outbox event and deletes its row, in one transaction: an event is
    /// appended once, whatever crashes. False when another relay took it first.
    pub async fn relay_one(&mut self, pending: &Pending, now: DateTime<Utc>) -> StoreResult<bool> {
        let taken = sqlx::query(&self.store.sql("DELETE FROM audit_outbox WHERE id = $1"))
            .bind(pending.id)
            .execute(&mut *self.tx)
            .await?;
        if taken.rows_affected() == 0 {
            return Ok(false);
        }
        self.store
            .append_in(&mut self.tx, pending.event.clone(), now)
            .await?;
        Ok(true)
    }

    /// Counts a denial of `event.actor_id` against `event.org_id` in the minute of
    /// `now` (the fold keeps the first event); answers the minute's count so far.
    pub async fn fold_denial(
        &mut self,
        event: &AuditEvent,
        now: DateTime<Utc>,
    ) -> StoreResult<u64> {
        let text = serde_json::to_string(event)
            .map_err(|e| StoreError::Invalid(format!("an audit event does not serialize: {e}")))?;
        let row = sqlx::query(&self.store.sql(
            "INSERT INTO denial_folds (actor_id, org_id, minute, count, event, last_at) VALUES ($1, $2, $3, 1, $4, $5)
             ON CONFLICT (actor_id, org_id, minute) DO UPDATE SET count = denial_folds.count + 1, last_at = excluded.last_at
             RETURNING count",
        ))
        .bind(&event.actor_id)
        .bind(&event.org_id)
        .bind(minute_of(now))
        .bind(text.as_str())
        .bind(stamp(now))
        .fetch_one(&mut *self.tx)
        .await?;
        let count: i64 = row.try_get("count")?;
        Ok(count.unsigned_abs())
    }

    /// Takes a fold away (`None` when another relay took it first).
    pub async fn take_denial_fold(&mut self, key: &FoldKey) -> StoreResult<Option<Fold>> {
        let fold = sqlx::query(&self.store.sql(
            "DELETE FROM denial_folds WHERE actor_id = $1 AND org_id = $2 AND minute = $3 RETURNING count, event, last_at",
        ))
        .bind(&key.actor_id)
        .bind(&key.org_id)
        .bind(&key.minute)
        .fetch_optional(&mut *self.tx)
        .await?;
        let Some(fold) = fold else {
            return Ok(None);
        };
        let d = Decoder::new(&fold, "denial_folds", &[]);
        let count: i64 = d.get("count")?;
        Ok(Some(Fold {
            first: d.json("event")?,
            count: count.unsigned_abs(),
            last_at: d.stamp("last_at")?,
        }))
    }
}
