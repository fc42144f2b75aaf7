//! Judgements, stored once (issue 59). A judgement is an entity's outcome and
//! violations at an instant: a row of the check log (a live check, the inventory's
//! door, a re-evaluation) or of a scan's results. An entity keeps its current result
//! and a reference to its latest judgement (`judgement_check` or `judgement_scan`)
//! with the judgement's digest; reading its compliance reads the violations through
//! that reference, one read by primary key. A judgement that says what the entity's
//! says already leaves the entity's row alone (its digest is the same).
//!
//! An entity written before this shape holds a copy (`compliance`, `''` once moved);
//! [`Store::move_judgement_copies`] moves them, a batch at a time, resumable.

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use sqlx::{AnyConnection, Row};

use super::decode::Decoder;
use super::{entity_table, new_id, stamp, Dialect, Store, StoreResult, Transaction};
use crate::inventory::{EntityCompliance, EntityResult};

/// What a judgement says, as a digest of its result and its violations' JSON text
/// (32 hexadecimal digits): equal digests, equal judgements.
pub fn digest(result: &str, violations: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(result.as_bytes());
    hash.update([0]);
    hash.update(violations.as_bytes());
    hash.finalize()
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The judgement an entity is written with at the door (a create or an update).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DoorJudgement {
    /// The check-log row it refers to.
    pub check_id: String,
    /// Its digest ([`digest`]).
    pub digest: String,
    /// The violations' JSON text when this server's check log does not hold the
    /// judgement (a remote compliance service judged it): written with the entity, in
    /// its transaction, as an unlisted check row.
    pub carried: Option<String>,
}

/// Which rows the references of [`Store::keep_judgements`] name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JudgementSource {
    /// Check-log rows (`judgement_check`).
    Check,
    /// A scan's result rows (`judgement_scan`: the scan's id).
    Scan,
}

/// A judgement an entity is to keep: the entity, its result, the row that holds it
/// (a check-log row's id, or the scan's) and its digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kept<'a> {
    /// The entity.
    pub entity_id: &'a str,
    /// `pass`, `warn`, `block` or (a scan's) `error`.
    pub result: &'a str,
    /// The check-log row's id, or the scan's.
    pub reference: &'a str,
    /// Its digest.
    pub digest: &'a str,
}

/// The SQL expression of an entity's violations (JSON text) in a query over `table`
/// as `row` (the table's name, or its alias): the copy it still holds, or its
/// judgement's, read by primary key. NULL only for an entity whose judgement is
/// missing, which reads as corrupt.
pub(crate) fn violations_sql(dialect: Dialect, table: &str, row: &str) -> String {
    let target = if table == "plugins" {
        "plugin"
    } else {
        "pipeline"
    };
    let copy = match dialect {
        Dialect::Postgres => format!("CAST(CAST({row}.compliance AS jsonb)->'violations' AS TEXT)"),
        Dialect::Sqlite => format!("({row}.compliance -> 'violations')"),
    };
    format!(
        "(CASE WHEN {row}.compliance <> '' THEN {copy} \
         WHEN {row}.judgement_check IS NOT NULL THEN (SELECT j.violations FROM compliance_checks j WHERE j.id = {row}.judgement_check) \
         ELSE (SELECT j.violations FROM scan_results j WHERE j.scan_id = {row}.judgement_scan AND j.target = '{target}' AND j.entity_id = {row}.id) END)"
    )
}

/// The select list of an entity read with its compliance: its columns and
/// `judged_violations`.
pub(crate) fn judged_select(dialect: Dialect, table: &str) -> String {
    format!(
        "{table}.*, {} AS judged_violations",
        violations_sql(dialect, table, table)
    )
}

/// An entity's compliance from a row of [`judged_select`]: its copy, or its result and
/// its judgement's violations (and the scan, when a scan judged it).
pub(crate) fn entity_compliance(d: &Decoder<'_>) -> StoreResult<EntityCompliance> {
    let copy: String = d.get("compliance")?;
    if !copy.is_empty() {
        return d.json("compliance");
    }
    let result: Option<String> = d.get("compliance_result")?;
    let result = result
        .as_deref()
        .and_then(EntityResult::parse)
        .ok_or_else(|| d.reject("compliance_result", "not a result"))?;
    let violations: Option<String> = d.get("judged_violations")?;
    let violations = violations
        .ok_or_else(|| d.reject("judgement_check", "the judgement it refers to is missing"))?;
    Ok(EntityCompliance {
        result,
        violations: serde_json::from_str(&violations)
            .map_err(|e| d.reject("judged_violations", e))?,
        scan_id: d.get("judgement_scan")?,
    })
}

impl Store {
    /// Points entities of the organization's `target` at their new judgements, on
    /// `conn`, 200 a statement; an entity whose judgement says the same (same digest)
    /// is left alone: its row is not rewritten. The entity's own `updatedAt` stays: a
    /// judgement is not an edit.
    pub(crate) async fn keep_judgements(
        &self,
        conn: &mut AnyConnection,
        (org_id, target): (&str, &str),
        source: JudgementSource,
        rows: &[Kept<'_>],
    ) -> StoreResult<()> {
        let table = entity_table(target)?;
        let references = match source {
            JudgementSource::Check => "judgement_check = v.column3, judgement_scan = NULL",
            JudgementSource::Scan => "judgement_scan = v.column3, judgement_check = NULL",
        };
        for chunk in rows.chunks(200) {
            let values = (0..chunk.len())
                .map(|i| {
                    let n = i * 4;
                    format!("(${}, ${}, ${}, ${})", n + 2, n + 3, n + 4, n + 5)
                })
                .collect::<Vec<_>>()
                .join(", ");
            // `VALUES` columns are column1.. on both backends.
            let sql = self.sql(&format!(
                "UPDATE {table} SET compliance_result = v.column2, {references}, \
                 judgement_digest = v.column4, compliance = '' FROM (VALUES {values}) AS v \
                 WHERE {table}.org_id = $1 AND {table}.id = v.column1 \
                 AND ({table}.judgement_digest IS NULL OR {table}.judgement_digest <> v.column4)"
            ));
            let mut update = sqlx::query(&sql).bind(org_id);
            for r in chunk {
                update = update
                    .bind(r.entity_id)
                    .bind(r.result)
                    .bind(r.reference)
                    .bind(r.digest);
            }
            update.execute(&mut *conn).await?;
        }
        Ok(())
    }

    /// At the door: the judgement an entity was written with, kept as an unlisted
    /// check row when this server's check log does not hold it (`carried`), on `conn`
    /// (the entity's transaction).
    pub(crate) async fn carry_door_judgement(
        &self,
        conn: &mut AnyConnection,
        (org_id, target, entity_id): (&str, &str, &str),
        compliance: &compliance_core::Compliance,
        judgement: &DoorJudgement,
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        let Some(violations) = &judgement.carried else {
            return Ok(());
        };
        self.carry_judgement(
            conn,
            (&judgement.check_id, org_id, target, entity_id),
            (compliance.result.as_str(), violations),
            at,
        )
        .await
    }

    /// Keeps a verdict this server's check log does not hold as an unlisted check row
    /// (`listed = 0`), on `conn`: a remote service's verdict at the door, a moved copy.
    pub(crate) async fn carry_judgement(
        &self,
        conn: &mut AnyConnection,
        (check_id, org_id, target, entity_id): (&str, &str, &str, &str),
        (result, violations): (&str, &str),
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(&self.sql(
            "INSERT INTO compliance_checks (id, org_id, target, entity_id, result, violations, created_at, listed) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, 0)",
        ))
        .bind(check_id)
        .bind(org_id)
        .bind(target)
        .bind(entity_id)
        .bind(result)
        .bind(violations)
        .bind(stamp(at))
        .execute(&mut *conn)
        .await?;
        Ok(())
    }

    /// How many entities of `target` still hold a copy of their compliance.
    pub async fn judgement_copies(&self, target: &str) -> StoreResult<u64> {
        let table = entity_table(target)?;
        let row = sqlx::query(&self.sql(&format!(
            "SELECT COUNT(*) AS n FROM {table} WHERE compliance <> ''"
        )))
        .fetch_one(self.pool())
        .await?;
        Ok(row.try_get::<i64, _>("n")?.unsigned_abs())
    }
}

/// The stored name of an entity's result.
pub(crate) fn result_name(result: EntityResult) -> &'static str {
    match result {
        EntityResult::Pass => "pass",
        EntityResult::Warn => "warn",
        EntityResult::Block => "block",
        EntityResult::Error => "error",
    }
}

impl super::Transaction<'_> {
    /// The judgement an entity was written with at the door, as a step of the
    /// entity's unit: kept as an unlisted check row when this server's check log does
    /// not hold it, and the attributes it was judged on kept for the impact preview
    /// (when this server judged them).
    pub async fn keep_door_judgement(
        &mut self,
        entity: (&str, &str, &str),
        (compliance, judgement): (&compliance_core::Compliance, &DoorJudgement),
        snapshot: Option<&serde_json::Value>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        self.store
            .carry_door_judgement(&mut self.tx, entity, compliance, judgement, now)
            .await?;
        if let Some(snapshot) = snapshot {
            self.store
                .put_snapshot(&mut self.tx, entity, snapshot, now)
                .await?;
        }
        Ok(())
    }
}

/// Steps of the workers' and services' units of work.
impl Transaction<'_> {
    /// Moves up to `limit` copies of the entities of `target` after `after` (in id
    /// order) into the judgement shape, in one transaction: a copy set by a scan refers to that scan's
    /// result row (written when the scan's results were pruned), any other becomes an
    /// unlisted check row; the entity then refers to it and its copy is `''`. An
    /// entity changed meanwhile (its copy is not the one read) is left to its new
    /// judgement. Answers the last id read (`None`: no copy is left after `after`), where
    /// the next batch starts: a move stopped half-way resumes from any id before it.
    pub async fn move_judgement_copies(
        &mut self,
        target: &str,
        after: &str,
        limit: u32,
    ) -> StoreResult<Option<String>> {
        let table = entity_table(target)?;
        let name = if table == "plugins" {
            "name || '@' || version"
        } else {
            "pipeline_name"
        };

        let rows = sqlx::query(&self.store.sql(&format!(
            "SELECT id, org_id, {name} AS name, compliance, updated_at FROM {table} \
             WHERE id > $1 AND compliance <> '' ORDER BY id LIMIT $2"
        )))
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(&mut *self.tx)
        .await?;
        let mut last = None;
        for row in &rows {
            let d = Decoder::new(row, table, &["id"]);
            let (id, org_id, name): (String, String, String) =
                (d.get("id")?, d.get("org_id")?, d.get("name")?);
            let copy: String = d.get("compliance")?;
            let kept: EntityCompliance = d.json("compliance")?;
            let at = d.stamp("updated_at")?;
            let result = result_name(kept.result);
            let violations =
                serde_json::to_string(&compliance_core::StoredViolations(&kept.violations))
                    .map_err(|e| d.reject("compliance", e))?;
            let sum = digest(result, &violations);
            let (check, scan) = match &kept.scan_id {
                Some(scan_id) => {
                    let held = sqlx::query(&self.store.sql(
                        "SELECT 1 AS one FROM scan_results WHERE scan_id = $1 AND target = $2 AND entity_id = $3",
                    ))
                    .bind(scan_id.as_str())
                    .bind(target)
                    .bind(id.as_str())
                    .fetch_optional(&mut *self.tx)
                    .await?;
                    if held.is_none() {
                        sqlx::query(&self.store.sql(
                            "INSERT INTO scan_results (scan_id, org_id, target, entity_id, entity_name, result, violations, error, scanned_at) \
                             VALUES ($1, $2, $3, $4, $5, $6, $7, NULL, $8)",
                        ))
                        .bind(scan_id.as_str())
                        .bind(org_id.as_str())
                        .bind(target)
                        .bind(id.as_str())
                        .bind(name.as_str())
                        .bind(result)
                        .bind(violations.as_str())
                        .bind(stamp(at))
                        .execute(&mut *self.tx)
                        .await?;
                    }
                    (None, Some(scan_id.clone()))
                }
                None => {
                    let check_id = new_id();
                    self.store
                        .carry_judgement(
                            &mut self.tx,
                            (&check_id, &org_id, target, &id),
                            (result, &violations),
                            at,
                        )
                        .await?;
                    (Some(check_id), None)
                }
            };
            sqlx::query(&self.store.sql(&format!(
                "UPDATE {table} SET compliance = '', compliance_result = $3, judgement_check = $4, \
                 judgement_scan = $5, judgement_digest = $6 WHERE id = $1 AND compliance = $2"
            )))
            .bind(id.as_str())
            .bind(copy.as_str())
            .bind(result)
            .bind(check)
            .bind(scan)
            .bind(sum)
            .execute(&mut *self.tx)
            .await?;
            last = Some(id);
        }
        Ok(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_differ_when_the_judgement_does() {
        let a = digest("warn", "[{\"ruleId\":\"r1\"}]");
        assert_eq!(a.len(), 32);
        assert_eq!(a, digest("warn", "[{\"ruleId\":\"r1\"}]"));
        assert_ne!(a, digest("block", "[{\"ruleId\":\"r1\"}]"));
        assert_ne!(a, digest("warn", "[{\"ruleId\":\"r2\"}]"));
        // The separator: a result's end is not a violation's start.
        assert_ne!(digest("pas", "s[]"), digest("pass", "[]"));
    }
}
