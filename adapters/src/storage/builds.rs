//! The plugin build queue: jobs claimed one at a time (`FOR UPDATE SKIP LOCKED` on
//! PostgreSQL, so replicas never claim the same job; SQLite has one writer), each
//! claim fenced by its lease so a worker that lost its job records nothing; the
//! outcome, the plugin's build status and a terminal audit event written together.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::Row;

use super::decode::Decoder;
use super::{stamp, Dialect, Store, StoreResult, Transaction};

/// A stored build job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildJob {
    /// Its id.
    pub id: String,
    /// The organization.
    pub org_id: String,
    /// The plugin it builds.
    pub plugin_id: String,
    /// The image it makes.
    pub image: String,
    /// `tier` or `dlq`.
    pub queue: String,
    /// queued, running, completed, failed, timed_out, replayed, purged.
    pub status: String,
    /// Attempts made in its queue.
    pub attempts: u32,
    /// The last attempt's error (bounded).
    pub last_error: Option<String>,
    /// The last attempt's outcome: succeeded, failed, timed_out.
    pub last_outcome: Option<String>,
    /// Not before.
    pub run_after: DateTime<Utc>,
    /// The claim's lease, while running.
    pub lease_until: Option<DateTime<Utc>>,
    /// When the current (or last) attempt began.
    pub claimed_at: Option<DateTime<Utc>>,
    /// When queued.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// Where a job goes after an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextStep<'a> {
    /// `tier` or `dlq`.
    pub queue: &'a str,
    /// `queued` again, or a terminal status.
    pub status: &'a str,
    /// Attempts made in that queue.
    pub attempts: u32,
    /// Not before.
    pub run_after: DateTime<Utc>,
    /// The attempt's outcome.
    pub outcome: &'a str,
    /// The attempt's error.
    pub error: Option<&'a str>,
    /// Why the attempt failed, as the build reports group it (none when it
    /// succeeded).
    pub reason: Option<&'a str>,
    /// The plugin's build status.
    pub plugin_status: &'a str,
}

fn job_from_row(row: &sqlx::any::AnyRow) -> StoreResult<BuildJob> {
    let d = Decoder::new(row, "plugin_builds", &["id"]);
    Ok(BuildJob {
        id: d.get("id")?,
        org_id: d.get("org_id")?,
        plugin_id: d.get("plugin_id")?,
        image: d.get("image")?,
        queue: d.get("queue")?,
        status: d.get("status")?,
        attempts: d.u32("attempts")?,
        last_error: d.get("last_error")?,
        last_outcome: d.get("last_outcome")?,
        run_after: d.stamp("run_after")?,
        lease_until: d.opt_stamp("lease_until")?,
        claimed_at: d.opt_stamp("claimed_at")?,
        created_at: d.stamp("created_at")?,
        updated_at: d.stamp("updated_at")?,
    })
}

/// Jobs in the dead letter queue that may still be replayed or purged.
const DEAD_LETTERS: &str = "queue = 'dlq' AND status IN ('queued', 'failed', 'timed_out')";

impl Store {
    /// Counts of jobs by queue and status: (queue, status, count), of one
    /// organization or all.
    pub async fn build_counts(
        &self,
        org_id: Option<&str>,
    ) -> StoreResult<Vec<(String, String, u64)>> {
        let rows = sqlx::query(&self.sql(
            "SELECT queue, status, COUNT(*) AS n FROM plugin_builds WHERE ($1 IS NULL OR org_id = $1) GROUP BY queue, status ORDER BY queue, status",
        ))
        .bind(org_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get::<String, _>("queue")?,
                    row.try_get::<String, _>("status")?,
                    row.try_get::<i64, _>("n")?.unsigned_abs(),
                ))
            })
            .collect()
    }

    /// A page of jobs: the failed ones (`dead_letters` false: ended failed or timed
    /// out) or those in the dead letter queue, of one organization or all.
    pub async fn builds(
        &self,
        org_id: Option<&str>,
        dead_letters: bool,
        limit: u32,
        offset: u64,
    ) -> StoreResult<(Vec<BuildJob>, u64)> {
        let condition = if dead_letters {
            format!("($1 IS NULL OR org_id = $1) AND {DEAD_LETTERS}")
        } else {
            "($1 IS NULL OR org_id = $1) AND status IN ('failed', 'timed_out')".to_owned()
        };
        let (rows, total) = self
            .page(
                ("*", "plugin_builds", &condition, "updated_at DESC, id DESC"),
                &[org_id.map(str::to_owned)],
                limit,
                offset,
            )
            .await?;
        let items = rows
            .iter()
            .map(job_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((items, total))
    }

    /// One job, of one organization or any.
    pub async fn build(&self, org_id: Option<&str>, id: &str) -> StoreResult<Option<BuildJob>> {
        let row = sqlx::query(
            &self.sql("SELECT * FROM plugin_builds WHERE id = $1 AND ($2 IS NULL OR org_id = $2)"),
        )
        .bind(id)
        .bind(org_id)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(job_from_row).transpose()
    }
}

/// The queue's steps, on a workflow's transaction (the worker's claim and outcome,
/// an admin's replay and purge).
impl Transaction<'_> {
    /// Claims the next due job (or one whose claim expired) until `lease_until`.
    pub async fn claim_build(
        &mut self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<Option<BuildJob>> {
        let lock = match self.store.dialect() {
            Dialect::Postgres => " FOR UPDATE SKIP LOCKED",
            Dialect::Sqlite => "",
        };
        let sql = format!(
            "UPDATE plugin_builds SET status = 'running', lease_until = $2, claimed_at = $1, updated_at = $1 WHERE id = (\
             SELECT id FROM plugin_builds WHERE (status = 'queued' AND run_after <= $1) OR (status = 'running' AND lease_until < $1) \
             ORDER BY run_after, id LIMIT 1{lock}) RETURNING *"
        );
        let row = sqlx::query(&self.store.sql(&sql))
            .bind(stamp(now))
            .bind(stamp(lease_until))
            .fetch_optional(&mut *self.tx)
            .await?;
        let job = row.as_ref().map(job_from_row).transpose()?;
        if let Some(job) = &job {
            sqlx::query(
                &self.store.sql(
                    "UPDATE plugins SET build_status = 'running', updated_at = $2 WHERE id = $1",
                ),
            )
            .bind(&job.plugin_id)
            .bind(stamp(now))
            .execute(&mut *self.tx)
            .await?;
        }
        Ok(job)
    }

    /// Records an attempt's outcome, if the claim (`lease_until`) still holds: the
    /// job's next step, the plugin's build status and the attempt. Answers whether it
    /// held.
    pub async fn finish_build(
        &mut self,
        job: &BuildJob,
        next: &NextStep<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let Some(lease) = job.lease_until else {
            return Ok(false);
        };
        let done = sqlx::query(&self.store.sql(
                "UPDATE plugin_builds SET queue = $3, status = $4, attempts = $5, run_after = $6, lease_until = NULL, \
                 last_outcome = $7, last_error = $8, updated_at = $9 WHERE id = $1 AND status = 'running' AND lease_until = $2",
            ))
            .bind(&job.id)
            .bind(stamp(lease))
            .bind(next.queue)
            .bind(next.status)
            .bind(i64::from(next.attempts))
            .bind(stamp(next.run_after))
            .bind(next.outcome)
            .bind(next.error)
            .bind(stamp(now))
            .execute(&mut *self.tx)
            .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        sqlx::query(
            &self
                .store
                .sql("UPDATE plugins SET build_status = $2, updated_at = $3 WHERE id = $1"),
        )
        .bind(&job.plugin_id)
        .bind(next.plugin_status)
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        // The attempt, for the build reports.
        let started = job.claimed_at.unwrap_or(now).min(now);
        sqlx::query(&self.store.sql(
                "INSERT INTO plugin_build_attempts (id, build_id, org_id, plugin_id, plugin_name, started_at, ended_at, duration_ms, outcome, reason)
                 SELECT $1, $2, $3, $4, p.name, $5, $6, $7, $8, $9 FROM plugins p WHERE p.id = $4",
            ))
            .bind(super::new_id())
            .bind(&job.id)
            .bind(&job.org_id)
            .bind(&job.plugin_id)
            .bind(stamp(started))
            .bind(stamp(now))
            .bind((now - started).num_milliseconds())
            .bind(next.outcome)
            .bind(next.reason)
            .execute(&mut *self.tx)
            .await?;
        Ok(true)
    }

    /// Replays a dead letter: the job is marked replayed and a new build of the same
    /// plugin starts in the dead letter queue with fresh attempts (its own terminal
    /// outcome). Answers the new job; `None` when the job is not a dead letter of the
    /// organization (or of any, for `None`).
    pub async fn replay_build(
        &mut self,
        org_id: Option<&str>,
        id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<BuildJob>> {
        let row = sqlx::query(&self.store.sql(&format!(
                "UPDATE plugin_builds SET status = 'replayed', lease_until = NULL, updated_at = $3 WHERE id = $1 AND ($2 IS NULL OR org_id = $2) AND {DEAD_LETTERS} RETURNING *"
            )))
            .bind(id)
            .bind(org_id)
            .bind(stamp(now))
            .fetch_optional(&mut *self.tx)
            .await?;
        let Some(old) = row.as_ref().map(job_from_row).transpose()? else {
            return Ok(None);
        };
        let new_id = super::new_id();
        sqlx::query(&self.store.sql(
                "INSERT INTO plugin_builds (id, org_id, plugin_id, image, queue, status, attempts, run_after, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, 'dlq', 'queued', 0, $5, $5, $5)",
            ))
            .bind(&new_id)
            .bind(&old.org_id)
            .bind(&old.plugin_id)
            .bind(&old.image)
            .bind(stamp(now))
            .execute(&mut *self.tx)
            .await?;
        sqlx::query(
            &self
                .store
                .sql("UPDATE plugins SET build_status = 'queued', updated_at = $2 WHERE id = $1"),
        )
        .bind(&old.plugin_id)
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        let row = sqlx::query(&self.store.sql("SELECT * FROM plugin_builds WHERE id = $1"))
            .bind(&new_id)
            .fetch_one(&mut *self.tx)
            .await?;
        let job = job_from_row(&row)?;
        Ok(Some(job))
    }

    /// Purges every dead letter; answers how many.
    pub async fn purge_dead_letters(&mut self, now: DateTime<Utc>) -> StoreResult<u64> {
        let done = sqlx::query(&self.store.sql(&format!(
            "UPDATE plugin_builds SET status = 'purged', lease_until = NULL, updated_at = $1 WHERE {DEAD_LETTERS}"
        )))
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected())
    }
}
