//! The posture of an organization's inventory, read from the results kept with each
//! entity (no evaluation): how many entities stand at each result, and which rules
//! fail most. SQL only; the JSON functions differ per backend (no `$` in a JSON path:
//! the SQLite dialect rewrites `$` placeholders).

use sqlx::Row;

use super::decode::Decoder;
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
        let (from, field) = match self.dialect() {
            Dialect::Postgres => (
                format!("{table}, jsonb_array_elements(CAST({table}.compliance AS jsonb)->'violations') AS v"),
                "v.value->>'{}'",
            ),
            Dialect::Sqlite => (
                format!("{table}, json_each({table}.compliance -> 'violations') AS v"),
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
        let violates = match self.dialect() {
            Dialect::Postgres => "EXISTS (SELECT 1 FROM jsonb_array_elements(CAST(compliance AS jsonb)->'violations') AS v WHERE v.value->>'ruleId' = $3)",
            Dialect::Sqlite => "EXISTS (SELECT 1 FROM json_each(compliance -> 'violations') AS v WHERE v.value ->> 'ruleId' = $3)",
        };
        let condition = format!(
            "org_id = $1 AND ($2 IS NULL OR compliance_result = $2) AND ($3 IS NULL OR {violates})"
        );
        let binds = [
            Some(org_id.to_owned()),
            filter.status.clone(),
            filter.rule_id.clone(),
        ];
        let select = format!("id, {name} AS name, compliance");
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
                    compliance: d.json("compliance")?,
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((items, total))
    }
}
