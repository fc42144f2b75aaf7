//! A scan's sweep: claimed under a lease (a conditional UPDATE that bumps the fencing
//! `token`), the inventory read a page at a time, results and progress flushed, the
//! end recorded; every flush and the end are fenced by that token and by
//! `status = 'running'`, so a cancelled scan, or one taken over after its lease
//! expired, stops its old sweeper at its next flush.

use chrono::{DateTime, Utc};

use super::scans::*;
use super::subjects::{subject_columns, subject_from_row, Subject};
use super::unit::unit_of_work;
use sqlx::Row;

use super::judgements::{JudgementSource, Kept};
use super::{
    entity_table, placeholders, stamp, value_rows, Dialect, Store, StoreResult, Transaction,
};

/// Where a sweep stands, and the claim on it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepState {
    /// The target being swept (`plugin` or `pipeline`).
    pub phase: String,
    /// The last entity id flushed in that phase (`""` at its start).
    pub after_id: String,
    /// The fencing token of the current claim.
    pub token: i64,
    /// How many times the scan was taken over after its sweeper's lease expired.
    pub takeovers: u32,
}

/// A flush: the results of a batch and where the sweep stands after it.
#[derive(Debug, Clone)]
pub struct Flush<'a> {
    /// The scan's organization.
    pub org_id: &'a str,
    /// The phase the batch belongs to.
    pub phase: &'a str,
    /// The last entity id of the batch.
    pub after_id: &'a str,
    /// The batch's counts (added to the scan's).
    pub counts: ScanCounts,
    /// The rule set's fingerprint.
    pub fingerprint: &'a str,
    /// The claim's new lease.
    pub lease_until: DateTime<Utc>,
    /// The instant of the flush.
    pub at: DateTime<Utc>,
    /// The results.
    pub results: &'a [SweptEntity],
}

/// One entity's result as a flush writes it: the texts rendered by the service (off
/// the async runtime), stored as they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweptEntity {
    /// `plugin` or `pipeline`.
    pub target: &'static str,
    /// The entity.
    pub entity_id: String,
    /// Its name.
    pub entity_name: String,
    /// `pass`, `warn`, `block` or `error`.
    pub result: &'static str,
    /// The bounded violations, as JSON text.
    pub violations: String,
    /// The judgement's digest (`storage::judgement_digest` of result and violations).
    pub digest: String,
    /// Why it could not be judged.
    pub error: Option<String>,
    /// When.
    pub scanned_at: DateTime<Utc>,
}

/// A flush's move of its scan: the counts added, the position and lease moved, if the
/// claim (`$2`) still holds and the scan still runs; `$3` to `$12` as [`progress`]
/// binds them.
const MOVE_SCAN: &str = "UPDATE scans SET scanned = scanned + $3, passed = passed + $4, \
     warned = warned + $5, blocked = blocked + $6, errors = errors + $7, phase = $8, after_id = $9, \
     fingerprint = $10, lease_until = $11, updated_at = $12 WHERE id = $1 AND token = $2 AND status = 'running'";

/// Binds `$1` to `$12` of [`MOVE_SCAN`].
fn progress<'q>(
    query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
    scan_id: &'q str,
    token: i64,
    flush: &Flush<'q>,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
    let c = flush.counts;
    let number = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    query
        .bind(scan_id)
        .bind(token)
        .bind(number(c.scanned))
        .bind(number(c.passed))
        .bind(number(c.warned))
        .bind(number(c.blocked))
        .bind(number(c.errors))
        .bind(flush.phase)
        .bind(flush.after_id)
        .bind(flush.fingerprint)
        .bind(stamp(flush.lease_until))
        .bind(stamp(flush.at))
}

/// Binds a result's own cells: target, entity, name, result, violations, error and
/// instant.
fn result_cells<'q>(
    query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
    r: &'q SweptEntity,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
    query
        .bind(r.target)
        .bind(r.entity_id.as_str())
        .bind(r.entity_name.as_str())
        .bind(r.result)
        .bind(r.violations.as_str())
        .bind(r.error.as_deref())
        .bind(stamp(r.scanned_at))
}

impl Store {
    /// Claims the oldest running scan that nobody sweeps (never claimed, or its
    /// sweeper's lease expired) for `holder` until `lease_until`, bumping its token;
    /// a scan taken over counts one more takeover.
    pub async fn claim_scan(
        &self,
        holder: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<Option<ScanRecord>> {
        let free = "status = 'running' AND (lease_until IS NULL OR lease_until < $1)";
        let row = sqlx::query(&self.sql(&format!(
            "UPDATE scans SET holder = $2, lease_until = $3, token = token + 1, \
             takeovers = takeovers + CASE WHEN lease_until IS NULL THEN 0 ELSE 1 END \
             WHERE {free} AND id = (SELECT id FROM scans WHERE {free} ORDER BY started_at, id LIMIT 1) \
             RETURNING *"
        )))
        .bind(stamp(now))
        .bind(holder)
        .bind(stamp(lease_until))
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(scan_from_row).transpose()
    }

    /// The next `limit` entities of the scan's sweep of `target` after `after_id`, by
    /// id, as a judge reads them (their compliance is not read).
    pub async fn sweep_subjects(
        &self,
        scan: &ScanRecord,
        (target, filter): (&str, &EntityFilter),
        after_id: &str,
        limit: u32,
    ) -> StoreResult<Vec<Subject>> {
        let (condition, binds) = matching(target, filter);
        let n = binds.len() + 2;
        let sql = self.sql(&format!(
            "SELECT {} FROM {} WHERE {condition} AND id > ${} ORDER BY id LIMIT ${}",
            subject_columns(target)?,
            entity_table(target)?,
            n + 1,
            n + 2
        ));
        let mut query = sqlx::query(&sql)
            .bind(scan.org_id.clone())
            .bind(stamp(scan.started_at));
        for value in binds {
            query = query.bind(value);
        }
        let rows = query
            .bind(after_id.to_owned())
            .bind(i64::from(limit))
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|row| subject_from_row(target, row))
            .collect()
    }

    /// The approved exemptions of any of `entity_ids` in the organization.
    pub async fn approved_exemptions_of(
        &self,
        org_id: &str,
        entity_ids: &[&str],
    ) -> StoreResult<Vec<compliance_core::Exemption>> {
        if entity_ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = self.sql(&format!(
            "SELECT * FROM exemptions WHERE org_id = $1 AND status = 'approved' AND entity_id IN ({})",
            placeholders(2, entity_ids.len())
        ));
        let mut query = sqlx::query(&sql).bind(org_id.to_owned());
        for id in entity_ids {
            query = query.bind(id.to_string());
        }
        let rows = query.fetch_all(self.pool()).await?;
        rows.iter()
            .map(|r| super::exemptions::exemption_from_row(r).map(|e| e.exemption()))
            .collect()
    }

    /// [`Store::flush_scan`] on PostgreSQL, as one statement (one round trip, its own
    /// transaction): the scan moves, and only if it did are the results written and
    /// referred to by the entities whose judgement they change.
    async fn flush_scan_at_once(
        &self,
        scan_id: &str,
        token: i64,
        flush: &Flush<'_>,
    ) -> StoreResult<bool> {
        let rows = value_rows(14, 8, flush.results.len());
        // An entity keeps the scan's judgement unless it says what its own says.
        let keep = |table: &str, target: &str| {
            format!(
                "UPDATE {table} SET compliance_result = v.result, judgement_scan = $1, judgement_check = NULL, \
                 judgement_digest = v.digest, compliance = '' FROM v WHERE v.target = '{target}' \
                 AND {table}.org_id = $13 AND {table}.id = v.entity_id \
                 AND ({table}.judgement_digest IS NULL OR {table}.judgement_digest <> v.digest)"
            )
        };
        let written = if rows.is_empty() {
            String::new()
        } else {
            format!(
                ", v AS (SELECT * FROM (VALUES {rows}) AS v (target, entity_id, entity_name, result, \
                 violations, error, scanned_at, digest) WHERE EXISTS (SELECT 1 FROM moved)), \
                 written AS (INSERT INTO scan_results (scan_id, org_id, target, entity_id, entity_name, \
                 result, violations, error, scanned_at) SELECT $1, $13, target, entity_id, entity_name, \
                 result, violations, error, scanned_at FROM v), \
                 pipelines_kept AS ({}), plugins_kept AS ({})",
                keep("pipelines", "pipeline"),
                keep("plugins", "plugin")
            )
        };
        let sql = format!(
            "WITH moved AS ({MOVE_SCAN} RETURNING id){written} SELECT COUNT(*) AS moved FROM moved"
        );
        let mut query = progress(sqlx::query(&sql), scan_id, token, flush);
        if !flush.results.is_empty() {
            // `$13`, named only beside the results.
            query = query.bind(flush.org_id);
        }
        for r in flush.results {
            query = result_cells(query, r).bind(r.digest.as_str());
        }
        let row = query.fetch_one(self.pool()).await?;
        Ok(row.try_get::<i64, _>("moved")? == 1)
    }

    /// Writes a batch's results, points each entity whose judgement they change at its
    /// result (`storage::judgements`), and moves
    /// the scan's counts and position, all at once, if the claim `token` still holds
    /// and the scan still runs; whether it did (false: cancelled, or taken over).
    pub async fn flush_scan(
        &self,
        scan_id: &str,
        token: i64,
        flush: &Flush<'_>,
    ) -> StoreResult<bool> {
        if self.dialect() == Dialect::Postgres {
            return self.flush_scan_at_once(scan_id, token, flush).await;
        }
        unit_of_work!(self, |tx| -> super::StoreError {
            let moved = progress(sqlx::query(&self.sql(MOVE_SCAN)), scan_id, token, flush)
                .execute(&mut *tx.tx)
                .await?;
            if moved.rows_affected() == 0 {
                return Ok(false);
            }
            if !flush.results.is_empty() {
                let rows = value_rows(1, 9, flush.results.len());
                let sql = self.sql(&format!(
                    "INSERT INTO scan_results (scan_id, org_id, target, entity_id, entity_name, result, violations, error, scanned_at) VALUES {rows}"
                ));
                let org_id = flush.org_id;
                let mut insert = sqlx::query(&sql);
                for r in flush.results {
                    insert = result_cells(insert.bind(scan_id).bind(org_id), r);
                }
                insert.execute(&mut *tx.tx).await?;
                for target in ["plugin", "pipeline"] {
                    let kept: Vec<Kept<'_>> = flush
                        .results
                        .iter()
                        .filter(|r| r.target == target)
                        .map(|r| Kept {
                            entity_id: &r.entity_id,
                            result: r.result,
                            reference: scan_id,
                            digest: &r.digest,
                        })
                        .collect();
                    self.keep_judgements(
                        &mut tx.tx,
                        (org_id, target),
                        JudgementSource::Scan,
                        &kept,
                    )
                    .await?;
                }
            }
            Ok(true)
        })
    }

    /// Gives a claim back (a graceful stop): the next sweeper resumes the scan at once,
    /// without counting a takeover.
    pub async fn release_scan(&self, scan_id: &str, token: i64) -> StoreResult<()> {
        sqlx::query(&self.sql(
            "UPDATE scans SET holder = NULL, lease_until = NULL WHERE id = $1 AND token = $2 AND status = 'running'",
        ))
        .bind(scan_id)
        .bind(token)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Ends a scan `failed` with `error`, if the claim `token` still holds and it
    /// still runs; whether it did.
    pub async fn fail_scan(
        &self,
        scan_id: &str,
        token: i64,
        error: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let done = sqlx::query(&self.sql(
            "UPDATE scans SET status = 'failed', error = $3, ended_at = $4, updated_at = $4, \
             holder = NULL, lease_until = NULL WHERE id = $1 AND token = $2 AND status = 'running'",
        ))
        .bind(scan_id)
        .bind(token)
        .bind(error)
        .bind(stamp(now))
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }
}

/// Steps of the workers' and services' units of work.
impl Transaction<'_> {
    /// Ends a scan `completed` (its total reconciled to what was scanned), if the claim
    /// `token` still holds and it still runs, with the notification `notify` makes of
    /// the ended scan, in one transaction: whatever the number of sweepers, a scan
    /// notifies once. Answers the ended scan (`None`: stopped or taken over).
    pub async fn complete_scan(
        &mut self,
        scan_id: &str,
        token: i64,
        now: DateTime<Utc>,
        notify: &(dyn Fn(&ScanRecord) -> Option<super::NewNotification> + Sync),
    ) -> StoreResult<Option<ScanRecord>> {
        let row = sqlx::query(&self.store.sql(
            "UPDATE scans SET status = 'completed', total = scanned, ended_at = $3, updated_at = $3, \
             holder = NULL, lease_until = NULL WHERE id = $1 AND token = $2 AND status = 'running' RETURNING *",
        ))
        .bind(scan_id)
        .bind(token)
        .bind(stamp(now))
        .fetch_optional(&mut *self.tx)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let scan = scan_from_row(&row)?;
        if let Some(notification) = notify(&scan) {
            self.store
                .insert_notification(&mut self.tx, &scan.org_id, &notification, now)
                .await?;
        }
        Ok(Some(scan))
    }
}
