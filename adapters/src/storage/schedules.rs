//! Scan schedules: SQL only. A due schedule starts its scan in one transaction with
//! the move of its `next_run_at`, conditional on the `next_run_at` it was read with:
//! whatever the number of schedulers, each due run starts one scan.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::decode::Decoder;
use super::scans::NewScan;
use super::{stamp, Store, StoreResult};

/// A scan schedule, as stored and answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleRecord {
    /// Its id.
    pub id: String,
    /// The organization.
    pub org_id: String,
    /// `plugin`, `pipeline` or `all`.
    pub target: String,
    /// Five fields: minute hour dayOfMonth month dayOfWeek (UTC).
    pub cron_expression: String,
    /// Active schedules run; `DELETE` deactivates.
    pub is_active: bool,
    /// When it runs next (none while inactive, or when the expression never fires).
    pub next_run_at: Option<DateTime<Utc>>,
    /// When it last started a scan.
    pub last_run_at: Option<DateTime<Utc>>,
    /// The scan it last started.
    pub last_scan_id: Option<String>,
    /// Who created it.
    pub created_by: String,
    /// When.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// A schedule's new definition.
#[derive(Debug, Clone, Copy)]
pub struct ScheduleFields<'a> {
    /// `plugin`, `pipeline` or `all`.
    pub target: &'a str,
    /// The validated expression.
    pub cron_expression: &'a str,
    /// Active or not.
    pub is_active: bool,
    /// The next run (computed by the caller).
    pub next_run_at: Option<DateTime<Utc>>,
}

fn schedule_from_row(row: &sqlx::any::AnyRow) -> StoreResult<ScheduleRecord> {
    let d = Decoder::new(row, "scan_schedules", &["id"]);
    Ok(ScheduleRecord {
        id: d.get("id")?,
        org_id: d.get("org_id")?,
        target: d.named("target", |t| {
            ["plugin", "pipeline", "all"]
                .contains(&t)
                .then(|| t.to_owned())
        })?,
        cron_expression: d.get("cron_expression")?,
        is_active: d.flag("is_active")?,
        next_run_at: d.opt_stamp("next_run_at")?,
        last_run_at: d.opt_stamp("last_run_at")?,
        last_scan_id: d.get("last_scan_id")?,
        created_by: d.get("created_by")?,
        created_at: d.stamp("created_at")?,
        updated_at: d.stamp("updated_at")?,
    })
}

impl Store {
    /// One schedule of the organization.
    pub async fn schedule(&self, org_id: &str, id: &str) -> StoreResult<Option<ScheduleRecord>> {
        let row =
            sqlx::query(&self.sql("SELECT * FROM scan_schedules WHERE org_id = $1 AND id = $2"))
                .bind(org_id)
                .bind(id)
                .fetch_optional(self.pool())
                .await?;
        row.as_ref().map(schedule_from_row).transpose()
    }

    /// A page of the organization's schedules, oldest first: (schedules, total).
    pub async fn schedules(
        &self,
        org_id: &str,
        limit: u32,
        offset: u64,
    ) -> StoreResult<(Vec<ScheduleRecord>, u64)> {
        let (rows, total) = self
            .page(
                (
                    "*",
                    "scan_schedules",
                    "org_id = $1",
                    "created_at ASC, id ASC",
                ),
                &[Some(org_id.to_owned())],
                limit,
                offset,
            )
            .await?;
        let items = rows
            .iter()
            .map(schedule_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((items, total))
    }

    /// Up to `limit` active schedules due at `now`, the most overdue first.
    pub async fn due_schedules(
        &self,
        now: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<ScheduleRecord>> {
        let rows = sqlx::query(&self.sql(
            "SELECT * FROM scan_schedules WHERE is_active = 1 AND next_run_at IS NOT NULL \
             AND next_run_at <= $1 \
             AND org_id NOT IN (SELECT id FROM organizations WHERE deleted_at IS NOT NULL) \
             ORDER BY next_run_at, id LIMIT $2",
        ))
        .bind(stamp(now))
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(schedule_from_row).collect()
    }
}

impl super::Transaction<'_> {
    /// Stores a new schedule `id`; `false` (nothing written) when the organization
    /// has `max_active` active schedules and this one is active.
    pub async fn create_schedule(
        &mut self,
        (id, org_id): (&str, &str),
        (fields, max_active): (ScheduleFields<'_>, u32),
        created_by: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.store.lock_organization(&mut self.tx, org_id).await?;
        let done = sqlx::query(&self.store.sql(
                "INSERT INTO scan_schedules (id, org_id, target, cron_expression, is_active, next_run_at, \
                 last_run_at, last_scan_id, created_by, created_at, updated_at) \
                 SELECT $1, $2, $3, $4, $5, $6, NULL, NULL, $7, $8, $8 \
                 WHERE $5 = 0 OR (SELECT COUNT(*) FROM scan_schedules WHERE org_id = $2 AND is_active = 1) < $9",
            ))
            .bind(id)
            .bind(org_id)
            .bind(fields.target)
            .bind(fields.cron_expression)
            .bind(i64::from(fields.is_active))
            .bind(fields.next_run_at.map(stamp))
            .bind(created_by)
            .bind(stamp(now))
            .bind(i64::from(max_active))
            .execute(&mut *self.tx)
            .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        Ok(true)
    }

    /// Replaces a schedule's definition (target, expression, active flag, next run);
    /// `false` (nothing written) when it is not the organization's, or when it would
    /// make one active schedule more than `max_active`.
    pub async fn update_schedule(
        &mut self,
        org_id: &str,
        id: &str,
        (fields, max_active): (ScheduleFields<'_>, u32),
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.store.lock_organization(&mut self.tx, org_id).await?;
        let done = sqlx::query(&self.store.sql(
                "UPDATE scan_schedules SET target = $3, cron_expression = $4, is_active = $5, \
                 next_run_at = $6, updated_at = $7 WHERE org_id = $1 AND id = $2 \
                 AND ($5 = 0 OR is_active = 1 OR \
                      (SELECT COUNT(*) FROM scan_schedules s WHERE s.org_id = $1 AND s.is_active = 1) < $8)",
            ))
            .bind(org_id)
            .bind(id)
            .bind(fields.target)
            .bind(fields.cron_expression)
            .bind(i64::from(fields.is_active))
            .bind(fields.next_run_at.map(stamp))
            .bind(stamp(now))
            .bind(i64::from(max_active))
            .execute(&mut *self.tx)
            .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        Ok(true)
    }

    /// Moves a due schedule from the run it was read with to `next`, and starts its
    /// scan (unless `scan` is `None`: the run is skipped); whether
    /// this call did it (false: another scheduler did, or the schedule changed).
    pub async fn run_schedule(
        &mut self,
        schedule: &ScheduleRecord,
        next: Option<DateTime<Utc>>,
        scan: Option<&NewScan<'_>>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let Some(due) = schedule.next_run_at else {
            return Ok(false);
        };

        let moved = sqlx::query(&self.store.sql(
            "UPDATE scan_schedules SET next_run_at = $3, last_run_at = $4 \
             WHERE id = $1 AND is_active = 1 AND next_run_at = $2",
        ))
        .bind(&schedule.id)
        .bind(stamp(due))
        .bind(next.map(stamp))
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        if moved.rows_affected() == 0 {
            return Ok(false);
        }
        if let Some(scan) = scan {
            let scan_id = self.store.insert_scan(&mut self.tx, scan).await?;
            sqlx::query(
                &self
                    .store
                    .sql("UPDATE scan_schedules SET last_scan_id = $2 WHERE id = $1"),
            )
            .bind(&schedule.id)
            .bind(scan_id)
            .execute(&mut *self.tx)
            .await?;
        }
        Ok(true)
    }
}
