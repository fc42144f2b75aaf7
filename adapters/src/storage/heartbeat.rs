//! The primary's heartbeat: one row the replicas of the server write every second, so
//! that a streaming standby's copy of it says how far behind the standby is, even
//! when nothing else is written (an idle primary does not make the standby look
//! stale). Its table is kept by the server itself, outside the numbered migrations
//! (made at start, if missing), so that releases before and after it run on one
//! database.

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::{stamp, Store, StoreError, StoreResult};

/// Makes the table (at start, with the migrations).
pub(super) const CREATE: &str =
    "CREATE TABLE IF NOT EXISTS heartbeat (id INTEGER PRIMARY KEY, beat_at TEXT NOT NULL)";

impl Store {
    /// Writes the heartbeat: `now`, unless a later beat is there already.
    pub async fn beat(&self, now: DateTime<Utc>) -> StoreResult<()> {
        sqlx::query(&self.sql(
            "INSERT INTO heartbeat (id, beat_at) VALUES (1, $1) \
             ON CONFLICT (id) DO UPDATE SET beat_at = excluded.beat_at \
             WHERE heartbeat.beat_at < excluded.beat_at",
        ))
        .bind(stamp(now))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// The last heartbeat this database holds (on a standby: the last one replayed);
    /// `None` before the first.
    pub async fn last_beat(&self) -> StoreResult<Option<DateTime<Utc>>> {
        let row = sqlx::query("SELECT beat_at FROM heartbeat WHERE id = 1")
            .fetch_optional(self.pool())
            .await?;
        row.map(|row| {
            let text: String = row.try_get("beat_at")?;
            DateTime::parse_from_rfc3339(&text)
                .map(|at| at.with_timezone(&Utc))
                .map_err(|_| StoreError::Corrupt(format!("heartbeat: `{text}` is not a time")))
        })
        .transpose()
    }
}
