//! Organization exports: the jobs (queued, taken by one replica under a lease,
//! done or failed), the finished archive in chunks, and the rows an export reads,
//! a page at a time. Statements only: which tables, keys and columns an export
//! holds is the service's decision.

use base64::Engine as _;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use sqlx::any::AnyTypeInfoKind;
use sqlx::{Column, Row};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::decode::Decoder;
use super::{stamp, Store, StoreError, StoreResult, Transaction};

/// The size of one stored chunk of an archive.
pub const CHUNK_BYTES: usize = 1024 * 1024;

/// An export job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportRecord {
    /// Its id.
    pub id: String,
    /// The organization exported.
    pub org_id: String,
    /// Who asked.
    pub requested_by: String,
    /// `queued`, `running`, `done`, `failed` or `expired`.
    pub status: String,
    /// Why it failed.
    pub error: Option<String>,
    /// When it was asked for.
    pub created_at: DateTime<Utc>,
    /// When a replica took it.
    pub started_at: Option<DateTime<Utc>>,
    /// When it was done (or failed).
    pub finished_at: Option<DateTime<Utc>>,
    /// Until when the archive can be downloaded.
    pub expires_at: Option<DateTime<Utc>>,
    /// The archive's size.
    pub size_bytes: Option<u64>,
    /// The archive's SHA-256, hex.
    pub sha256: Option<String>,
}

fn from_row(row: &sqlx::any::AnyRow) -> StoreResult<ExportRecord> {
    let d = Decoder::new(row, "org_exports", &["id"]);
    let size: Option<i64> = d.get("size_bytes")?;
    Ok(ExportRecord {
        id: d.get("id")?,
        org_id: d.get("org_id")?,
        requested_by: d.get("requested_by")?,
        status: d.get("status")?,
        error: d.get("error")?,
        created_at: d.stamp("created_at")?,
        started_at: d.opt_stamp("started_at")?,
        finished_at: d.opt_stamp("finished_at")?,
        expires_at: d.opt_stamp("expires_at")?,
        size_bytes: size.map(i64::unsigned_abs),
        sha256: d.get("sha256")?,
    })
}

/// One column's value as JSON: text, numbers and booleans as they are, bytes in
/// base64, `NULL` as `null`.
fn value_at(row: &sqlx::any::AnyRow, index: usize) -> StoreResult<Value> {
    let kind = row
        .try_column(index)
        .map_err(StoreError::from)?
        .type_info()
        .clone();
    Ok(match kind.kind() {
        AnyTypeInfoKind::Null => Value::Null,
        AnyTypeInfoKind::Bool => row.try_get::<Option<bool>, _>(index)?.into(),
        AnyTypeInfoKind::SmallInt | AnyTypeInfoKind::Integer | AnyTypeInfoKind::BigInt => {
            row.try_get::<Option<i64>, _>(index)?.into()
        }
        AnyTypeInfoKind::Real | AnyTypeInfoKind::Double => {
            row.try_get::<Option<f64>, _>(index)?.into()
        }
        AnyTypeInfoKind::Text => row.try_get::<Option<String>, _>(index)?.into(),
        AnyTypeInfoKind::Blob => row
            .try_get::<Option<Vec<u8>>, _>(index)?
            .map(|bytes| base64::engine::general_purpose::STANDARD.encode(bytes))
            .into(),
    })
}

/// Where an export reads one resource: a table, the column that names the
/// organization, the key it pages by (a column, or an expression of columns), and
/// the columns it leaves out.
#[derive(Debug, Clone, Copy)]
pub struct ExportSource {
    /// The table.
    pub table: &'static str,
    /// The column equal to the organization's id.
    pub org_column: &'static str,
    /// What the rows are ordered and paged by (unique within the organization).
    pub key: &'static str,
    /// Columns never written (secrets).
    pub skip: &'static [&'static str],
}

impl Store {
    /// An export job of an organization.
    pub async fn export(&self, org_id: &str, id: &str) -> StoreResult<Option<ExportRecord>> {
        let row = sqlx::query(&self.sql("SELECT * FROM org_exports WHERE id = $1 AND org_id = $2"))
            .bind(id)
            .bind(org_id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// Takes the oldest job that is queued, or running under a lease that lapsed
    /// (its replica stopped), for `holder` until `lease_until`: one replica at a
    /// time, decided by the update itself.
    pub async fn claim_export(
        &self,
        holder: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<Option<ExportRecord>> {
        let at = stamp(now);
        let row = sqlx::query(&self.sql(
            "UPDATE org_exports SET status = 'running', holder = $1, lease_until = $2,
                started_at = COALESCE(started_at, $3)
             WHERE id = (SELECT id FROM org_exports
                         WHERE status = 'queued' OR (status = 'running' AND lease_until < $3)
                         ORDER BY created_at, id LIMIT 1)
               AND (status = 'queued' OR (status = 'running' AND lease_until < $3))
             RETURNING *",
        ))
        .bind(holder)
        .bind(stamp(lease_until))
        .bind(&at)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// Stores a finished archive read from `archive` in chunks and marks the job
    /// done, in one transaction, if `holder` still holds it (`false`: its lease was
    /// lost, nothing is kept).
    pub async fn finish_export(
        &self,
        (id, holder): (&str, &str),
        archive: &mut (dyn AsyncRead + Unpin + Send),
        (size, sha256): (u64, &str),
        (now, expires_at): (DateTime<Utc>, DateTime<Utc>),
    ) -> StoreResult<bool> {
        let mut tx = self.begin().await?;
        sqlx::query(&self.sql("DELETE FROM org_export_chunks WHERE export_id = $1"))
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let mut seq = 0i64;
        let mut buffer = vec![0u8; CHUNK_BYTES];
        loop {
            let mut filled = 0;
            while filled < CHUNK_BYTES {
                let read = archive
                    .read(buffer.get_mut(filled..).unwrap_or_default())
                    .await
                    .map_err(|e| StoreError::Corrupt(format!("the export's archive: {e}")))?;
                if read == 0 {
                    break;
                }
                filled += read;
            }
            if filled == 0 {
                break;
            }
            sqlx::query(
                &self.sql(
                    "INSERT INTO org_export_chunks (export_id, seq, data) VALUES ($1, $2, $3)",
                ),
            )
            .bind(id)
            .bind(seq)
            .bind(buffer.get(..filled).unwrap_or_default().to_vec())
            .execute(&mut *tx)
            .await?;
            seq += 1;
            if filled < CHUNK_BYTES {
                break;
            }
        }
        let done = sqlx::query(&self.sql(
            "UPDATE org_exports SET status = 'done', finished_at = $3, expires_at = $4, size_bytes = $5,
                sha256 = $6, holder = NULL, lease_until = NULL
             WHERE id = $1 AND holder = $2 AND status = 'running'",
        ))
        .bind(id)
        .bind(holder)
        .bind(stamp(now))
        .bind(stamp(expires_at))
        .bind(i64::try_from(size).unwrap_or(i64::MAX))
        .bind(sha256)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Marks a job failed (if `holder` still holds it).
    pub async fn fail_export(
        &self,
        (id, holder): (&str, &str),
        error: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(&self.sql(
            "UPDATE org_exports SET status = 'failed', error = $3, finished_at = $4, holder = NULL, lease_until = NULL
             WHERE id = $1 AND holder = $2 AND status = 'running'",
        ))
        .bind(id)
        .bind(holder)
        .bind(error)
        .bind(stamp(now))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// One chunk of a finished archive.
    pub async fn export_chunk(&self, id: &str, seq: i64) -> StoreResult<Option<Vec<u8>>> {
        let row = sqlx::query(
            &self.sql("SELECT data FROM org_export_chunks WHERE export_id = $1 AND seq = $2"),
        )
        .bind(id)
        .bind(seq)
        .fetch_optional(self.pool())
        .await?;
        Ok(row.map(|r| r.try_get::<Vec<u8>, _>("data")).transpose()?)
    }

    /// A page of one resource's rows of an organization, after `after` by its key:
    /// (key, the row as a JSON object without the skipped columns).
    pub async fn export_rows(
        &self,
        source: &ExportSource,
        org_id: &str,
        after: &str,
        limit: u32,
    ) -> StoreResult<Vec<(String, Map<String, Value>)>> {
        let ExportSource {
            table,
            org_column,
            key,
            skip,
        } = source;
        // An entity's compliance is its judgement's, read through its reference.
        let entity = matches!(*table, "pipelines" | "plugins");
        let judged = if entity {
            format!(
                ", {} AS judged_violations",
                super::judgements::violations_sql(self.dialect(), table, "t")
            )
        } else {
            String::new()
        };
        let rows = sqlx::query(&self.sql(&format!(
            "SELECT {key} AS export_key, t.*{judged} FROM {table} t
             WHERE t.{org_column} = $1 AND {key} > $2 ORDER BY {key} LIMIT $3"
        )))
        .bind(org_id)
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let export_key: String = row.try_get("export_key")?;
                let mut object = Map::new();
                for (index, column) in row.columns().iter().enumerate() {
                    let name = column.name();
                    if name == "export_key" || name == "judged_violations" || skip.contains(&name) {
                        continue;
                    }
                    object.insert(name.to_owned(), value_at(row, index)?);
                }
                if entity {
                    // The entity's compliance as it reads: its JSON text, as it was kept.
                    let d = Decoder::new(row, table, &["id"]);
                    let compliance = super::judgements::entity_compliance(&d)?;
                    let text = serde_json::to_string(&compliance)
                        .map_err(|e| d.reject("compliance", e))?;
                    object.insert("compliance".to_owned(), Value::String(text));
                }
                Ok((export_key, object))
            })
            .collect()
    }
}

impl super::Transaction<'_> {
    /// Records a new export job; `false` (nothing written) while another job of the organization is queued or running
    /// (a unique index decides, whatever the replicas do at once).
    pub async fn create_export(&mut self, record: &ExportRecord) -> StoreResult<bool> {
        let inserted = sqlx::query(&self.store.sql(
            "INSERT INTO org_exports (id, org_id, requested_by, status, created_at) VALUES ($1, $2, $3, 'queued', $4)",
        ))
        .bind(&record.id)
        .bind(&record.org_id)
        .bind(&record.requested_by)
        .bind(stamp(record.created_at))
        .execute(&mut *self.tx)
        .await;
        match inserted.map_err(StoreError::from) {
            Ok(_) => {}
            Err(StoreError::Conflict(_)) => return Ok(false),
            Err(other) => return Err(other),
        }
        Ok(true)
    }
}

/// Steps of the workers' and services' units of work.
impl Transaction<'_> {
    /// Forgets the archives whose download window closed; how many.
    pub async fn forget_expired_exports(&mut self, now: DateTime<Utc>) -> StoreResult<u64> {
        let at = stamp(now);
        sqlx::query(&self.store.sql(
            "DELETE FROM org_export_chunks WHERE export_id IN
               (SELECT id FROM org_exports WHERE status = 'done' AND expires_at < $1)",
        ))
        .bind(&at)
        .execute(&mut *self.tx)
        .await?;
        let done = sqlx::query(&self.store.sql(
            "UPDATE org_exports SET status = 'expired' WHERE status = 'done' AND expires_at < $1",
        ))
        .bind(&at)
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected())
    }
}
