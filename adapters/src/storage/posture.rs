//! The posture of an organization's inventory, read from the results kept with each
//! entity (no evaluation): how many entities stand at each result, and which rules
//! fail most. SQL only; the JSON functions differ per backend (no `$` in a JSON path:
//! the SQLite dialect rewrites `$` placeholders).

use sqlx::Row;

use super::decode::Decoder;
use super::judgements::{entity_compliance, violations_sql};
use super::{entity_table, Dialect, Store, StoreResult};
use crate::inventory::EntityCompliance;

/// How many of a target's entities stand at each result.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusCounts {
    /// Entities.
    pub total: u64,
    /// Passing.
    pub pass: u64,
    /// Passing with warnings.
    pub warn: u64,
    /// Blocked (would be refused now).
    pub block: u64,
    /// Could not be judged.
    pub error: u64,
}

/// A rule and how many entities fail it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailingRule {
    /// The rule.
    pub rule_id: String,
    /// Its name.
    pub rule_name: String,
    /// Its severity.
    pub severity: String,
    /// `plugin` or `pipeline`.
    pub target: String,
    /// Violations of it (one per failing entity and predicate).
    pub violations: u64,
}

/// Which judged entities a report reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JudgedFilter {
    /// Their current result (`pass`, `warn`, `block`, `error`).
    pub status: Option<String>,
    /// A rule their current result violates (its id).
    pub rule_id: Option<String>,
}

/// An entity with its current result.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    /// Its id.
    pub id: String,
    /// Its name (a plugin's `name@version`).
    pub name: String,
    /// Its current result.
    pub compliance: EntityCompliance,
}

fn count(row: &sqlx::any::AnyRow, column: &str) -> StoreResult<u64> {
    Ok(row.try_get::<i64, _>(column)?.unsigned_abs())
}

impl Store {
    /// The organization's entities of `target` by current result.
    pub async fn status_counts(&self, org_id: &str, target: &str) -> StoreResult<StatusCounts> {
        let rows = sqlx::query(&self.sql(&format!(
            "SELECT compliance_result AS result, COUNT(*) AS n FROM {} WHERE org_id = $1 GROUP BY 1",
            entity_table(target)?
        )))
        .bind(org_id)
        .fetch_all(self.pool())
        .await?;
        let mut counts = StatusCounts::default();
        for row in &rows {
            let n = count(row, "n")?;
            counts.total += n;
            match row.try_get::<Option<String>, _>("result")?.as_deref() {
                Some("pass") => counts.pass += n,
                Some("warn") => counts.warn += n,
                Some("block") => counts.block += n,
                _ => counts.error += n,
            }
        }
        Ok(counts)
    }

    /// The `limit` rules with the most violations among the organization's entities of
    /// `target`.
    pub async fn failing_rules(
        &self,
        org_id: &str,
        target: &str,
        limit: u32,
    ) -> StoreResult<Vec<FailingRule>> {
        let table = entity_table(target)?;
        // Each entity's violations, read through its judgement.
        let violations = violations_sql(self.dialect(), table, table);
        let (from, field) = match self.dialect() {
            Dialect::Postgres => (
                format!("{table}, jsonb_array_elements(CAST({violations} AS jsonb)) AS v"),
                "v.value->>'{}'",
            ),
            Dialect::Sqlite => (
                format!("{table}, json_each({violations}) AS v"),
                "v.value ->> '{}'",
            ),
        };
        let field = |name: &str| field.replace("{}", name);
        let sql = self.sql(&format!(
            "SELECT {} AS rule_id, {} AS rule_name, {} AS severity, COUNT(*) AS n FROM {from} \
             WHERE {table}.org_id = $1 GROUP BY 1, 2, 3 ORDER BY n DESC, rule_name ASC LIMIT $2",
            field("ruleId"),
            field("ruleName"),
            field("severity"),
        ));
        let rows = sqlx::query(&sql)
            .bind(org_id)
            .bind(i64::from(limit))
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|row| {
                Ok(FailingRule {
                    rule_id: row
                        .try_get::<Option<String>, _>("rule_id")?
                        .unwrap_or_default(),
                    rule_name: row
                        .try_get::<Option<String>, _>("rule_name")?
                        .unwrap_or_default(),
                    severity: row
                        .try_get::<Option<String>, _>("severity")?
                        .unwrap_or_default(),
                    target: target.to_owned(),
                    violations: count(row, "n")?,
                })
            })
            .collect()
    }

    /// A page of the organization's entities of `target` (by creation) that pass
    /// `filter`, with how many do.
    pub async fn judged(
        &self,
        org_id: &str,
        target: &str,
        filter: &JudgedFilter,
        limit: u32,
        offset: u64,
    ) -> StoreResult<(Vec<Judged>, u64)> {
        let table = entity_table(target)?;
        let name = if table == "plugins" {
            "name || '@' || version"
        } else {
            "pipeline_name"
        };
        let violations = violations_sql(self.dialect(), table, table);
        let violates = match self.dialect() {
            Dialect::Postgres => format!("EXISTS (SELECT 1 FROM jsonb_array_elements(CAST({violations} AS jsonb)) AS v WHERE v.value->>'ruleId' = $3)"),
            Dialect::Sqlite => format!("EXISTS (SELECT 1 FROM json_each({violations}) AS v WHERE v.value ->> 'ruleId' = $3)"),
        };
        let condition = format!(
            "org_id = $1 AND ($2 IS NULL OR compliance_result = $2) AND ($3 IS NULL OR {violates})"
        );
        let binds = [
            Some(org_id.to_owned()),
            filter.status.clone(),
            filter.rule_id.clone(),
        ];
        let select = format!(
            "id, {name} AS name, compliance, compliance_result, judgement_scan, {violations} AS judged_violations"
        );
        let (rows, total) = self
            .page(
                (&select, table, &condition, "created_at ASC, id ASC"),
                &binds,
                limit,
                offset,
            )
            .await?;
        let items = rows
            .iter()
            .map(|row| {
                let d = Decoder::new(row, table, &["id"]);
                Ok(Judged {
                    id: d.get("id")?,
                    name: d.get("name")?,
                    compliance: entity_compliance(&d)?,
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((items, total))
    }
}

/// An organization's posture at an instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostureSnapshot {
    /// The organization.
    pub org_id: String,
    /// When.
    pub at: chrono::DateTime<chrono::Utc>,
    /// `hourly` or `scan`.
    pub cause: String,
    /// Its entities (plugins and pipelines) by result.
    pub counts: StatusCounts,
}

impl Store {
    /// Both targets' counts of an organization, summed.
    pub async fn entity_counts(&self, org_id: &str) -> StoreResult<StatusCounts> {
        let mut all = StatusCounts::default();
        for target in ["plugin", "pipeline"] {
            let c = self.status_counts(org_id, target).await?;
            all.total += c.total;
            all.pass += c.pass;
            all.warn += c.warn;
            all.block += c.block;
            all.error += c.error;
        }
        Ok(all)
    }

    /// Writes a snapshot (one per organization and instant; a second is ignored).
    pub async fn insert_posture_snapshot(&self, s: &PostureSnapshot) -> StoreResult<()> {
        let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        sqlx::query(&self.sql(
            "INSERT INTO posture_snapshots (org_id, at, cause, total, pass, warn, block, error)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (org_id, at) DO NOTHING",
        ))
        .bind(&s.org_id)
        .bind(super::stamp(s.at))
        .bind(&s.cause)
        .bind(n(s.counts.total))
        .bind(n(s.counts.pass))
        .bind(n(s.counts.warn))
        .bind(n(s.counts.block))
        .bind(n(s.counts.error))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// The snapshots of the organizations listed in `[from, to)`, oldest first.
    pub async fn posture_snapshots(
        &self,
        org_ids: &[String],
        (from, to): (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>),
    ) -> StoreResult<Vec<PostureSnapshot>> {
        if org_ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = self.sql(&format!(
            "SELECT * FROM posture_snapshots WHERE at >= $1 AND at < $2 AND org_id IN ({})
             ORDER BY at, org_id",
            super::placeholders(3, org_ids.len())
        ));
        let mut query = sqlx::query(&sql)
            .bind(super::stamp(from))
            .bind(super::stamp(to));
        for id in org_ids {
            query = query.bind(id.clone());
        }
        let rows = query.fetch_all(self.pool()).await?;
        rows.iter()
            .map(|row| {
                let d = Decoder::new(row, "posture_snapshots", &["org_id", "at"]);
                Ok(PostureSnapshot {
                    org_id: d.get("org_id")?,
                    at: d.stamp("at")?,
                    cause: d.get("cause")?,
                    counts: StatusCounts {
                        total: count(row, "total")?,
                        pass: count(row, "pass")?,
                        warn: count(row, "warn")?,
                        block: count(row, "block")?,
                        error: count(row, "error")?,
                    },
                })
            })
            .collect()
    }

    /// The live organizations' ids (the hourly snapshot's round), after `after`, at
    /// most `limit`, by id.
    pub async fn live_org_ids(&self, after: &str, limit: u32) -> StoreResult<Vec<String>> {
        let rows = sqlx::query(&self.sql(
            "SELECT id FROM organizations WHERE deleted_at IS NULL AND is_system = 0 AND id > $1
             ORDER BY id LIMIT $2",
        ))
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| r.try_get::<String, _>("id").map_err(Into::into))
            .collect()
    }

    /// Forgets snapshots taken before `cutoff`.
    pub async fn prune_posture_snapshots(
        &self,
        cutoff: chrono::DateTime<chrono::Utc>,
    ) -> StoreResult<u64> {
        let done = sqlx::query(&self.sql("DELETE FROM posture_snapshots WHERE at < $1"))
            .bind(super::stamp(cutoff))
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected())
    }
}
