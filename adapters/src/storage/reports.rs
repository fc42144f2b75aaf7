//! Reporting: execution events stored once by id, the executions waiting to be
//! derived, the derived executions and stages, the resource names no single
//! organization registered. Statements only: the fold is `reporting`'s, run by the
//! service inside the derivation's transaction (a closure).

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::decode::Decoder;
use super::{placeholders, stamp, Cell, Rows, Store, StoreResult, Transaction};
mod writes;

/// An event to store: its id, resource, execution, time and checked body (JSON).
#[derive(Debug, Clone)]
pub struct NewReportEvent {
    /// The envelope's id.
    pub id: String,
    /// The pipeline's resource name.
    pub resource: String,
    /// The execution.
    pub execution_id: String,
    /// When it happened.
    pub occurred_at: DateTime<Utc>,
    /// The checked event, as JSON.
    pub body: String,
}

/// A derived execution, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionRow {
    /// The organization.
    pub org_id: String,
    /// The pipeline.
    pub pipeline_id: String,
    /// The execution.
    pub execution_id: String,
    /// Its state (`SUCCEEDED`...).
    pub state: String,
    /// What it counts as (`success`, `failure`, `excluded`, `running`).
    pub outcome: String,
    /// Its first start.
    pub started_at: DateTime<Utc>,
    /// When it ended.
    pub ended_at: Option<DateTime<Utc>>,
    /// Its duration, once ended.
    pub duration_ms: Option<i64>,
    /// Its error category, when it failed.
    pub error: Option<String>,
}

/// A derived stage run, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StageRow {
    /// The pipeline.
    pub pipeline_id: String,
    /// The stage.
    pub stage: String,
    /// Its state.
    pub state: String,
    /// Its first start.
    pub started_at: DateTime<Utc>,
    /// Its duration, once ended.
    pub duration_ms: Option<i64>,
}

/// A plugin build attempt, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRow {
    /// The plugin's name.
    pub plugin_name: String,
    /// When it began.
    pub started_at: DateTime<Utc>,
    /// How long it ran.
    pub duration_ms: i64,
    /// `succeeded`, `failed` or `timed_out`.
    pub outcome: String,
    /// Why it failed.
    pub reason: Option<String>,
}

/// What a derivation stores.
#[derive(Debug, Clone, PartialEq)]
pub enum Derived {
    /// The execution and its stages, in the one organization that registered its
    /// resource.
    Attributed(ExecutionRow, Vec<StageRow>),
    /// The resource maps to no single organization: why.
    Unattributed(String),
}

/// The fold a derivation runs inside its transaction: the execution's events'
/// bodies and its resource's registrations `(org_id, pipeline_id)` in, what to
/// store out.
pub type Derivation = dyn Fn(&[String], &[(String, String)]) -> StoreResult<Derived> + Sync;

/// A resource name waiting for its registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnattributedRow {
    /// The resource name.
    pub resource: String,
    /// Why it is not attributed.
    pub reason: String,
    /// How many executions of it wait.
    pub executions: i64,
    /// When its first event arrived.
    pub first_seen: DateTime<Utc>,
    /// When its latest event arrived.
    pub last_seen: DateTime<Utc>,
}

/// The organizations a report reads, its range, and its filter.
#[derive(Debug, Clone)]
pub struct ReportScope<'a> {
    /// The organization, and its teams when the report includes them.
    pub org_ids: &'a [String],
    /// `[from, to)` on the executions' (or build attempts') start.
    pub range: (DateTime<Utc>, DateTime<Utc>),
    /// One pipeline (`pipeline_id`) or plugin (`plugin_name`) only: the column and
    /// its value.
    pub only: Option<(&'static str, &'a str)>,
}

impl ReportScope<'_> {
    /// `org_id IN (...) AND started_at >= .. AND started_at < .. [AND pipeline_id = ..]`
    /// and its cells.
    fn filter(&self) -> (String, Vec<Cell>) {
        let n = self.org_ids.len();
        let mut cells: Vec<Cell> = self
            .org_ids
            .iter()
            .map(|o| Cell::from(o.as_str()))
            .collect();
        cells.push(Cell::from(stamp(self.range.0)));
        cells.push(Cell::from(stamp(self.range.1)));
        let mut sql = format!(
            "org_id IN ({}) AND started_at >= ${} AND started_at < ${}",
            placeholders(1, n),
            n + 1,
            n + 2
        );
        if let Some((column, value)) = self.only {
            cells.push(Cell::from(value));
            sql.push_str(&format!(" AND {column} = ${}", n + 3));
        }
        (sql, cells)
    }
}

/// `k AS k0, ...` for grouped keys, and the positions `1, 2, ...` to group by
/// (`extra` more after the keys).
fn key_columns(keys: &[&str], extra: usize) -> (String, String) {
    let columns: Vec<String> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| format!("{k} AS k{i}"))
        .collect();
    let positions: Vec<String> = (1..=keys.len() + extra).map(|i| i.to_string()).collect();
    (columns.join(", "), positions.join(", "))
}

impl Store {
    /// Up to `limit` executions waiting to be derived, oldest first.
    pub async fn pending_executions(&self, limit: u32) -> StoreResult<Vec<(String, String)>> {
        let rows = sqlx::query(&self.sql(
            "SELECT resource, execution_id FROM report_pending ORDER BY queued_at, resource, execution_id LIMIT $1",
        ))
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("resource")?, row.try_get("execution_id")?)))
            .collect()
    }

    /// Marks every execution of `resource` to be derived again (its registration
    /// changed), inside the caller's transaction; how many.
    pub(crate) async fn rederive_resource_in(
        &self,
        conn: &mut sqlx::AnyConnection,
        resource: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<u64> {
        let done = sqlx::query(&self.sql(
            "INSERT INTO report_pending (resource, execution_id, queued_at)
             SELECT DISTINCT resource, execution_id, $2 FROM report_events WHERE resource = $1
             ON CONFLICT (resource, execution_id) DO NOTHING",
        ))
        .bind(resource)
        .bind(stamp(now))
        .execute(&mut *conn)
        .await?;
        Ok(done.rows_affected())
    }

    /// The resource names waiting for a registration, latest first (at most 1,000).
    pub async fn unattributed(&self) -> StoreResult<Vec<UnattributedRow>> {
        let rows =
            sqlx::query(&self.sql(
                "SELECT * FROM report_unattributed ORDER BY last_seen DESC, resource LIMIT 1000",
            ))
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|row| {
                let d = Decoder::new(row, "report_unattributed", &["resource"]);
                Ok(UnattributedRow {
                    resource: d.get("resource")?,
                    reason: d.get("reason")?,
                    executions: d.get("executions")?,
                    first_seen: d.stamp("first_seen")?,
                    last_seen: d.stamp("last_seen")?,
                })
            })
            .collect()
    }

    /// How many resource names wait for a registration, and their executions.
    pub async fn unattributed_counts(&self) -> StoreResult<(i64, i64)> {
        let row = sqlx::query(
            // SUM of a bigint is numeric on PostgreSQL: cast back, as on SQLite.
            "SELECT COUNT(*) AS names, CAST(COALESCE(SUM(executions), 0) AS BIGINT) AS executions FROM report_unattributed",
        )
        .fetch_one(self.pool())
        .await?;
        Ok((row.try_get("names")?, row.try_get("executions")?))
    }

    /// Counts of a report's rows grouped by `keys` (column expressions of the code,
    /// never of a client: `pipeline_id`, `state`, `substr(started_at, 1, 10)`...)
    /// among the rows of `table` in the scope that also meet `also` (a condition of
    /// the code, or empty): each group's keys as text, and its count. The grouping
    /// and counting are the database's; what they mean is the caller's.
    pub async fn report_counts(
        &self,
        table: &'static str,
        scope: &ReportScope<'_>,
        keys: &[&'static str],
        also: &'static str,
    ) -> StoreResult<Vec<(Vec<Option<String>>, u64)>> {
        let (filter, cells) = scope.filter();
        let (columns, positions) = key_columns(keys, 0);
        let statement = self.sql(&format!(
            "SELECT {columns}, COUNT(*) AS n FROM {table} WHERE {filter} {also} GROUP BY {positions}"
        ));
        let rows = Rows::bound(&statement, &cells)
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|row| {
                let d = Decoder::new(row, table, &[]);
                let group = (0..keys.len())
                    .map(|i| d.get::<Option<String>>(&format!("k{i}")))
                    .collect::<StoreResult<Vec<_>>>()?;
                Ok((group, d.get::<i64>("n")?.unsigned_abs()))
            })
            .collect()
    }

    /// The durations of a report's rows of `table` in the scope that have one and
    /// meet `also`, as a histogram: each distinct `(keys, duration)` with how many
    /// rows have it (durations from second-precision times repeat: far fewer pairs
    /// than rows cross the wire).
    pub async fn report_durations(
        &self,
        table: &'static str,
        scope: &ReportScope<'_>,
        keys: &[&'static str],
        also: &'static str,
    ) -> StoreResult<Vec<(Vec<String>, i64, u64)>> {
        let (filter, cells) = scope.filter();
        let (columns, positions) = key_columns(keys, 1);
        let statement = self.sql(&format!(
            "SELECT {columns}, duration_ms, COUNT(*) AS n FROM {table}
             WHERE {filter} AND duration_ms IS NOT NULL {also} GROUP BY {positions}"
        ));
        let rows = Rows::bound(&statement, &cells)
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|row| {
                let d = Decoder::new(row, table, &[]);
                let group = (0..keys.len())
                    .map(|i| d.get::<String>(&format!("k{i}")))
                    .collect::<StoreResult<Vec<_>>>()?;
                Ok((
                    group,
                    d.get::<i64>("duration_ms")?,
                    d.get::<i64>("n")?.unsigned_abs(),
                ))
            })
            .collect()
    }

    /// The outcomes (`success` or `failure`) of the scope's finished executions,
    /// newest first, at most `limit`, and how many finished in all.
    pub async fn recent_outcomes(
        &self,
        scope: &ReportScope<'_>,
        limit: u32,
    ) -> StoreResult<(Vec<String>, u64)> {
        let (filter, cells) = scope.filter();
        let statement = self.sql(&format!(
            "SELECT outcome FROM report_executions
             WHERE {filter} AND outcome IN ('success', 'failure')
             ORDER BY started_at DESC, execution_id DESC LIMIT {limit}"
        ));
        let rows = Rows::bound(&statement, &cells)
            .fetch_all(self.pool())
            .await?;
        let outcomes = rows
            .iter()
            .map(|row| Decoder::new(row, "report_executions", &[]).get::<String>("outcome"))
            .collect::<StoreResult<Vec<_>>>()?;
        let statement = self.sql(&format!(
            "SELECT COUNT(*) AS n FROM report_executions WHERE {filter} AND outcome IN ('success', 'failure')"
        ));
        let row = Rows::bound(&statement, &cells)
            .fetch_one(self.pool())
            .await?;
        let n = Decoder::new(&row, "report_executions", &[]).get::<i64>("n")?;
        Ok((outcomes, n.unsigned_abs()))
    }

    /// The build attempts a report reads, in start order.
    pub async fn build_attempts(&self, scope: &ReportScope<'_>) -> StoreResult<Vec<AttemptRow>> {
        let (filter, cells) = scope.filter();
        let statement = self.sql(&format!(
            "SELECT plugin_name, started_at, duration_ms, outcome, reason FROM plugin_build_attempts
             WHERE {filter} ORDER BY started_at, id"
        ));
        let rows = Rows::bound(&statement, &cells)
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|row| {
                let d = Decoder::new(row, "plugin_build_attempts", &["plugin_name"]);
                Ok(AttemptRow {
                    plugin_name: d.get("plugin_name")?,
                    started_at: d.stamp("started_at")?,
                    duration_ms: d.get("duration_ms")?,
                    outcome: d.get("outcome")?,
                    reason: d.get("reason")?,
                })
            })
            .collect()
    }

    /// The plugins of the organizations (one name, when given), counted by build
    /// status, access and whether active: `(build_status, access_modifier,
    /// is_active, count)`.
    pub async fn plugin_inventory(
        &self,
        org_ids: &[String],
        plugin_name: Option<&str>,
    ) -> StoreResult<Vec<(String, String, bool, u64)>> {
        let n = org_ids.len();
        let mut cells: Vec<Cell> = org_ids.iter().map(|o| Cell::from(o.as_str())).collect();
        let mut filter = format!("org_id IN ({})", placeholders(1, n));
        if let Some(name) = plugin_name {
            cells.push(Cell::from(name));
            filter.push_str(&format!(" AND name = ${}", n + 1));
        }
        let statement = self.sql(&format!(
            "SELECT build_status, access_modifier, is_active, COUNT(*) AS n FROM plugins WHERE {filter}
             GROUP BY build_status, access_modifier, is_active ORDER BY build_status, access_modifier, is_active"
        ));
        let rows = Rows::bound(&statement, &cells)
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|row| {
                let d = Decoder::new(row, "plugins", &["build_status"]);
                Ok((
                    d.get("build_status")?,
                    d.get("access_modifier")?,
                    d.flag("is_active")?,
                    d.get::<i64>("n")?.unsigned_abs(),
                ))
            })
            .collect()
    }
}
