//! Dashboards: SQL only. Reads on the pool; writes are steps of the service's
//! transaction, a change conditional on the version the writer read.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::decode::Decoder;
use super::{stamp, Store, StoreResult, Transaction};

/// A dashboard as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct DashboardRow {
    /// Its id.
    pub id: String,
    /// Its organization.
    pub org_id: String,
    /// Its title.
    pub title: String,
    /// Its panels (the service reads them).
    pub panels: Value,
    /// Raised by each change.
    pub version: i64,
    /// Who made it.
    pub created_by: String,
    /// When.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

fn from_row(row: &sqlx::any::AnyRow) -> StoreResult<DashboardRow> {
    let d = Decoder::new(row, "dashboards", &["id"]);
    Ok(DashboardRow {
        id: d.get("id")?,
        org_id: d.get("org_id")?,
        title: d.get("title")?,
        panels: d.json("panels")?,
        version: d.get("version")?,
        created_by: d.get("created_by")?,
        created_at: d.stamp("created_at")?,
        updated_at: d.stamp("updated_at")?,
    })
}

impl Store {
    /// The organization's dashboards, oldest first, a page of them and the total.
    pub async fn dashboards(
        &self,
        org_id: &str,
        limit: u32,
        offset: u64,
    ) -> StoreResult<(Vec<DashboardRow>, u64)> {
        let rows = sqlx::query(&self.sql(
            "SELECT * FROM dashboards WHERE org_id = $1 ORDER BY created_at, id LIMIT $2 OFFSET $3",
        ))
        .bind(org_id)
        .bind(i64::from(limit))
        .bind(i64::try_from(offset).unwrap_or(i64::MAX))
        .fetch_all(self.pool())
        .await?;
        let total: i64 =
            sqlx::query_scalar(&self.sql("SELECT COUNT(*) FROM dashboards WHERE org_id = $1"))
                .bind(org_id)
                .fetch_one(self.pool())
                .await?;
        Ok((
            rows.iter().map(from_row).collect::<StoreResult<_>>()?,
            total.unsigned_abs(),
        ))
    }

    /// One dashboard of the organization.
    pub async fn dashboard(&self, org_id: &str, id: &str) -> StoreResult<Option<DashboardRow>> {
        let row = sqlx::query(&self.sql("SELECT * FROM dashboards WHERE org_id = $1 AND id = $2"))
            .bind(org_id)
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(from_row).transpose()
    }
}

impl Transaction<'_> {
    /// Inserts a dashboard.
    pub async fn insert_dashboard(&mut self, row: &DashboardRow) -> StoreResult<()> {
        sqlx::query(&self.store.sql(
            "INSERT INTO dashboards (id, org_id, title, panels, version, created_by, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        ))
        .bind(&row.id)
        .bind(&row.org_id)
        .bind(&row.title)
        .bind(row.panels.to_string())
        .bind(row.version)
        .bind(&row.created_by)
        .bind(stamp(row.created_at))
        .bind(stamp(row.updated_at))
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    /// Replaces a dashboard's title and panels where its version is still
    /// `expected`, raising it; whether it was.
    pub async fn update_dashboard(
        &mut self,
        row: &DashboardRow,
        expected: i64,
    ) -> StoreResult<bool> {
        let done = sqlx::query(&self.store.sql(
            "UPDATE dashboards SET title = $3, panels = $4, version = $5, updated_at = $6
             WHERE org_id = $1 AND id = $2 AND version = $7",
        ))
        .bind(&row.org_id)
        .bind(&row.id)
        .bind(&row.title)
        .bind(row.panels.to_string())
        .bind(row.version)
        .bind(stamp(row.updated_at))
        .bind(expected)
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Deletes a dashboard; whether there was one.
    pub async fn delete_dashboard(&mut self, org_id: &str, id: &str) -> StoreResult<bool> {
        let done = sqlx::query(
            &self
                .store
                .sql("DELETE FROM dashboards WHERE org_id = $1 AND id = $2"),
        )
        .bind(org_id)
        .bind(id)
        .execute(&mut *self.tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }
}
