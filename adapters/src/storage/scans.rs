//! Scans and their results: SQL only. A scan row carries its counts and where its
//! sweep stands (phase, the last entity id flushed), and who sweeps it: a claim is a
//! conditional UPDATE that bumps the fencing `token`; every flush and the end are
//! fenced by that token and by `status = 'running'`, so a cancelled scan, or one taken
//! over after its lease expired, stops its old sweeper at its next flush.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use sqlx::{AnyConnection, Row};

use super::decode::Decoder;
use super::sweeps::SweepState;
use super::{entity_table, new_id, stamp, Store, StoreResult};

/// A scan, as stored and answered.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScanRecord {
    /// Its id.
    pub id: String,
    /// The organization whose inventory it sweeps.
    pub org_id: String,
    /// `plugin`, `pipeline` or `all`.
    pub target: String,
    /// What narrows the sweep (`orgId` always the organization's).
    pub filter: Value,
    /// `running`, `completed`, `cancelled` or `failed`.
    pub status: String,
    /// `manual` (requested), `schedule`, or `rule-change` (a rule or subscription
    /// change queued it).
    pub origin: String,
    /// The schedule that started it.
    pub schedule_id: Option<String>,
    /// Who requested it (the schedule's creator for a scheduled scan).
    pub requested_by: String,
    /// The counts.
    pub counts: ScanCounts,
    /// SHA-256 of the rules the sweep used (the last phase's), once it has begun.
    pub rule_set_fingerprint: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// When it ended.
    pub ended_at: Option<DateTime<Utc>>,
    /// Last progress.
    pub updated_at: DateTime<Utc>,
    /// Where the sweep stands (not answered).
    #[serde(skip)]
    pub sweep: SweepState,
}

/// A scan's counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScanCounts {
    /// Entities matching when it started (reconciled to `scanned` at the end, for
    /// entities deleted meanwhile).
    pub total: u64,
    /// Entities judged so far.
    pub scanned: u64,
    /// ... that passed.
    pub passed: u64,
    /// ... that passed with warnings.
    pub warned: u64,
    /// ... that would be blocked.
    pub blocked: u64,
    /// ... that could not be judged (attributes over the limits).
    pub errors: u64,
}

impl ScanCounts {
    /// Counts one result (`pass`, `warn`, `block`, anything else an error).
    pub fn add(&mut self, result: &str) {
        self.scanned += 1;
        match result {
            "pass" => self.passed += 1,
            "warn" => self.warned += 1,
            "block" => self.blocked += 1,
            _ => self.errors += 1,
        }
    }
}

/// What narrows a sweep.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntityFilter {
    /// A plugin's name or a pipeline's name, exactly.
    pub name: Option<String>,
    /// `public` or `private`.
    pub access_modifier: Option<String>,
    /// A pipeline's project (pipelines only).
    pub project: Option<String>,
}

/// A scan to start.
#[derive(Debug, Clone)]
pub struct NewScan<'a> {
    /// The organization.
    pub org_id: &'a str,
    /// `plugin`, `pipeline` or `all`.
    pub target: &'a str,
    /// The stored filter.
    pub filter: &'a Value,
    /// The same, as columns.
    pub entities: &'a EntityFilter,
    /// `manual` or `schedule`.
    pub origin: &'a str,
    /// The schedule.
    pub schedule_id: Option<&'a str>,
    /// Who.
    pub requested_by: &'a str,
    /// The first phase (`plugin` or `pipeline`).
    pub phase: &'a str,
    /// When; entities created later are not swept.
    pub now: DateTime<Utc>,
    /// When true the scan has nothing to sweep (the system organization) and is
    /// stored completed.
    pub empty: bool,
}

/// One entity's result in a scan.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScanResult {
    /// The scan.
    pub scan_id: String,
    /// `plugin` or `pipeline`.
    pub target: String,
    /// The entity.
    pub entity_id: String,
    /// Its name (a plugin's `name@version`, a pipeline's name).
    pub entity_name: String,
    /// `pass`, `warn`, `block` or `error`.
    pub result: String,
    /// The bounded violations (their messages written again from the stored fields).
    pub violations: Vec<compliance_core::Violation>,
    /// Why it could not be judged.
    pub error: Option<String>,
    /// When.
    pub scanned_at: DateTime<Utc>,
}

pub(super) fn scan_from_row(row: &sqlx::any::AnyRow) -> StoreResult<ScanRecord> {
    let d = Decoder::new(row, "scans", &["id"]);
    let count = |column: &str| -> StoreResult<u64> {
        let n: i64 = d.get(column)?;
        u64::try_from(n).map_err(|_| d.reject(column, format_args!("`{n}` is negative")))
    };
    Ok(ScanRecord {
        id: d.get("id")?,
        org_id: d.get("org_id")?,
        target: d.named("target", |t| {
            ["plugin", "pipeline", "all"]
                .contains(&t)
                .then(|| t.to_owned())
        })?,
        filter: d.json("filter")?,
        status: d.named("status", |s| {
            ["running", "completed", "cancelled", "failed"]
                .contains(&s)
                .then(|| s.to_owned())
        })?,
        origin: d.get("origin")?,
        schedule_id: d.get("schedule_id")?,
        requested_by: d.get("requested_by")?,
        counts: ScanCounts {
            total: count("total")?,
            scanned: count("scanned")?,
            passed: count("passed")?,
            warned: count("warned")?,
            blocked: count("blocked")?,
            errors: count("errors")?,
        },
        rule_set_fingerprint: d.get("fingerprint")?,
        error: d.get("error")?,
        started_at: d.stamp("started_at")?,
        ended_at: d.opt_stamp("ended_at")?,
        updated_at: d.stamp("updated_at")?,
        sweep: SweepState {
            phase: d.get("phase")?,
            after_id: d.get("after_id")?,
            token: d.get("token")?,
            takeovers: d.u32("takeovers")?,
        },
    })
}

pub(super) fn result_from_row(row: &sqlx::any::AnyRow) -> StoreResult<ScanResult> {
    let d = Decoder::new(row, "scan_results", &["scan_id", "entity_id"]);
    Ok(ScanResult {
        scan_id: d.get("scan_id")?,
        target: d.get("target")?,
        entity_id: d.get("entity_id")?,
        entity_name: d.get("entity_name")?,
        result: d.get("result")?,
        violations: d.json("violations")?,
        error: d.get("error")?,
        scanned_at: d.stamp("scanned_at")?,
    })
}

/// The condition narrowing `target`'s entities of `$1` created at or before `$2`,
/// with the filter's values from `$3` on; and those values.
pub(super) fn matching(target: &str, filter: &EntityFilter) -> (String, Vec<String>) {
    let mut condition = String::from("org_id = $1 AND created_at <= $2");
    let mut binds = Vec::new();
    let name_column = if target == "pipeline" {
        "pipeline_name"
    } else {
        "name"
    };
    let narrow = [
        (name_column, filter.name.as_ref()),
        ("access_modifier", filter.access_modifier.as_ref()),
        (
            "project",
            filter.project.as_ref().filter(|_| target == "pipeline"),
        ),
    ];
    for (column, value) in narrow {
        if let Some(value) = value {
            binds.push(value.clone());
            condition.push_str(&format!(" AND {column} = ${}", binds.len() + 2));
        }
    }
    // Plugins belong to no project: a project filter leaves none of them.
    if target != "pipeline" && filter.project.is_some() {
        condition.push_str(" AND 1 = 0");
    }
    (condition, binds)
}

/// The phases of a target: `all` sweeps plugins, then pipelines.
pub fn phases(target: &str) -> &'static [&'static str] {
    match target {
        "plugin" => &["plugin"],
        "pipeline" => &["pipeline"],
        _ => &["plugin", "pipeline"],
    }
}

impl Store {
    /// Starts a scan: counts the entities it will sweep and stores it `running`
    /// (unclaimed), in the caller's transaction.
    pub(crate) async fn insert_scan(
        &self,
        conn: &mut AnyConnection,
        scan: &NewScan<'_>,
    ) -> StoreResult<String> {
        let id = new_id();
        let (status, ended_at) = if scan.empty {
            ("completed", Some(stamp(scan.now)))
        } else {
            ("running", None)
        };
        sqlx::query(&self.sql(
            "INSERT INTO scans (id, org_id, target, filter, status, origin, schedule_id, requested_by, \
             total, scanned, passed, warned, blocked, errors, fingerprint, phase, after_id, holder, \
             lease_until, token, takeovers, error, started_at, ended_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0, 0, 0, 0, 0, NULL, $10, '', NULL, NULL, 0, 0, NULL, $11, $12, $11)",
        ))
        .bind(&id)
        .bind(scan.org_id)
        .bind(scan.target)
        .bind(scan.filter.to_string())
        .bind(status)
        .bind(scan.origin)
        .bind(scan.schedule_id)
        .bind(scan.requested_by)
        .bind(0_i64)
        .bind(scan.phase)
        .bind(stamp(scan.now))
        .bind(ended_at)
        .execute(&mut *conn)
        .await?;
        // The write first: on SQLite the transaction takes the write lock at once
        // (waiting its busy timeout) instead of failing to upgrade a read.
        let mut total: i64 = 0;
        if !scan.empty {
            for phase in phases(scan.target) {
                let (condition, binds) = matching(phase, scan.entities);
                let sql = self.sql(&format!(
                    "SELECT COUNT(*) AS n FROM {} WHERE {condition}",
                    entity_table(phase)?
                ));
                let mut query = sqlx::query(&sql).bind(scan.org_id).bind(stamp(scan.now));
                for value in &binds {
                    query = query.bind(value.clone());
                }
                total += query.fetch_one(&mut *conn).await?.try_get::<i64, _>("n")?;
            }
        }
        sqlx::query(&self.sql("UPDATE scans SET total = $2 WHERE id = $1"))
            .bind(&id)
            .bind(total)
            .execute(&mut *conn)
            .await?;
        Ok(id)
    }

    /// One scan of the organization.
    pub async fn scan(&self, org_id: &str, id: &str) -> StoreResult<Option<ScanRecord>> {
        let row = sqlx::query(&self.sql("SELECT * FROM scans WHERE org_id = $1 AND id = $2"))
            .bind(org_id)
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(scan_from_row).transpose()
    }

    /// A page of the organization's scans, newest first: (scans, total).
    pub async fn scans(
        &self,
        org_id: &str,
        (target, status): (Option<&str>, Option<&str>),
        limit: u32,
        offset: u64,
    ) -> StoreResult<(Vec<ScanRecord>, u64)> {
        let (rows, total) = self
            .page(
                (
                    "*",
                    "scans",
                    "org_id = $1 AND ($2 IS NULL OR target = $2) AND ($3 IS NULL OR status = $3)",
                    "started_at DESC, id DESC",
                ),
                &[
                    Some(org_id.to_owned()),
                    target.map(str::to_owned),
                    status.map(str::to_owned),
                ],
                limit,
                offset,
            )
            .await?;
        let scans = rows
            .iter()
            .map(scan_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((scans, total))
    }

    /// A page of one scan's results, in the order they were judged: (results, total).
    pub async fn scan_results(
        &self,
        (org_id, scan_id): (&str, &str),
        result: Option<&str>,
        limit: u32,
        offset: u64,
    ) -> StoreResult<(Vec<ScanResult>, u64)> {
        let (rows, total) = self
            .page(
                (
                    "*",
                    "scan_results",
                    "org_id = $1 AND scan_id = $2 AND ($3 IS NULL OR result = $3)",
                    "target DESC, entity_id ASC",
                ),
                &[
                    Some(org_id.to_owned()),
                    Some(scan_id.to_owned()),
                    result.map(str::to_owned),
                ],
                limit,
                offset,
            )
            .await?;
        let results = rows
            .iter()
            .map(result_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((results, total))
    }
}

impl super::Transaction<'_> {
    /// Starts a requested scan: its id.
    pub async fn create_scan(&mut self, scan: &NewScan<'_>) -> StoreResult<String> {
        self.store.insert_scan(&mut self.tx, scan).await
    }

    /// Ends a running scan `cancelled`; `false` when it is not running (or not this
    /// organization's).
    pub async fn cancel_scan(
        &mut self,
        org_id: &str,
        id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let done = sqlx::query(&self.store.sql(
            "UPDATE scans SET status = 'cancelled', ended_at = $3, updated_at = $3, holder = NULL, lease_until = NULL \
             WHERE org_id = $1 AND id = $2 AND status = 'running'",
        ))
        .bind(org_id)
        .bind(id)
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Starts a scan for a rule or subscription change, ending (`cancelled`, with the
    /// reason) the organization's running scans of an earlier change of the same
    /// target: their sweepers stop at their next page, and no result judged by the
    /// older rules lands after the new scan's.
    pub async fn supersede_scan(&mut self, scan: &NewScan<'_>) -> StoreResult<String> {
        sqlx::query(&self.store.sql(
            "UPDATE scans SET status = 'cancelled', error = 'superseded by a later change', \
             ended_at = $3, updated_at = $3, holder = NULL, lease_until = NULL \
             WHERE org_id = $1 AND target = $2 AND origin = $4 AND status = 'running'",
        ))
        .bind(scan.org_id)
        .bind(scan.target)
        .bind(stamp(scan.now))
        .bind(scan.origin)
        .execute(&mut *self.tx)
        .await?;
        let id = self.store.insert_scan(&mut self.tx, scan).await?;
        Ok(id)
    }
}
