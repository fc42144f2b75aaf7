//! Usage of counted resources (plugins, pipelines): each organization's own count and
//! its root's pool, which a team's usage draws from (SEMANTICS 3). A charge is one
//! conditional statement on the pool, never read, compare, then write; it runs in the
//! transaction of the create it pays for.

use sqlx::{AnyConnection, Row};

use super::{Store, StoreResult};

/// One charge (or release) of `amount` of `dimension` to `org_id` and its root's pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charge<'a> {
    /// The organization using the resource.
    pub org_id: &'a str,
    /// Its root (itself for a root organization).
    pub root_id: &'a str,
    /// `plugins` or `pipelines`.
    pub dimension: &'a str,
    /// The pool's effective limit; `None` for unlimited.
    pub limit: Option<u64>,
    /// How many.
    pub amount: u64,
}

/// A charge the pool could not take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaRefusal {
    /// The pool's limit.
    pub limit: u64,
    /// Used before.
    pub used: u64,
    /// Asked for.
    pub requested: u64,
}

fn wire(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Store {
    /// Charges the pool and the organization, or answers the refusal (changing
    /// nothing) when the pool's limit would be passed.
    pub(crate) async fn charge(
        &self,
        conn: &mut AnyConnection,
        charge: &Charge<'_>,
    ) -> StoreResult<Result<(), QuotaRefusal>> {
        for (table, key, id) in [
            ("quota_pool", "root_id", charge.root_id),
            ("quota_usage", "org_id", charge.org_id),
        ] {
            sqlx::query(&self.sql(&format!(
                "INSERT INTO {table} ({key}, dimension, used) VALUES ($1, $2, 0) ON CONFLICT DO NOTHING"
            )))
            .bind(id)
            .bind(charge.dimension)
            .execute(&mut *conn)
            .await?;
        }
        let limit = charge.limit.map_or(-1, wire);
        let done = sqlx::query(&self.sql(
            "UPDATE quota_pool SET used = used + $3 WHERE root_id = $1 AND dimension = $2 AND ($4 < 0 OR used + $3 <= $4)",
        ))
        .bind(charge.root_id)
        .bind(charge.dimension)
        .bind(wire(charge.amount))
        .bind(limit)
        .execute(&mut *conn)
        .await?;
        if done.rows_affected() == 0 {
            let used: i64 = sqlx::query(
                &self.sql("SELECT used FROM quota_pool WHERE root_id = $1 AND dimension = $2"),
            )
            .bind(charge.root_id)
            .bind(charge.dimension)
            .fetch_one(&mut *conn)
            .await?
            .try_get("used")?;
            return Ok(Err(QuotaRefusal {
                limit: charge.limit.unwrap_or(u64::MAX),
                used: used.unsigned_abs(),
                requested: charge.amount,
            }));
        }
        sqlx::query(
            &self.sql(
                "UPDATE quota_usage SET used = used + $3 WHERE org_id = $1 AND dimension = $2",
            ),
        )
        .bind(charge.org_id)
        .bind(charge.dimension)
        .bind(wire(charge.amount))
        .execute(&mut *conn)
        .await?;
        Ok(Ok(()))
    }

    /// Gives back what a charge took (never below zero).
    pub(crate) async fn release(
        &self,
        conn: &mut AnyConnection,
        charge: &Charge<'_>,
    ) -> StoreResult<()> {
        for (table, key, id) in [
            ("quota_pool", "root_id", charge.root_id),
            ("quota_usage", "org_id", charge.org_id),
        ] {
            sqlx::query(&self.sql(&format!(
                "UPDATE {table} SET used = CASE WHEN used > $3 THEN used - $3 ELSE 0 END WHERE {key} = $1 AND dimension = $2"
            )))
            .bind(id)
            .bind(charge.dimension)
            .bind(wire(charge.amount))
            .execute(&mut *conn)
            .await?;
        }
        Ok(())
    }

    /// The organization's own usage of `dimension`.
    pub async fn usage(&self, org_id: &str, dimension: &str) -> StoreResult<u64> {
        let row = sqlx::query(
            &self.sql("SELECT used FROM quota_usage WHERE org_id = $1 AND dimension = $2"),
        )
        .bind(org_id)
        .bind(dimension)
        .fetch_optional(self.pool())
        .await?;
        Ok(match row {
            Some(row) => row.try_get::<i64, _>("used")?.unsigned_abs(),
            None => 0,
        })
    }

    /// The pool's usage of `dimension` (a root and its teams).
    pub async fn pool_usage(&self, root_id: &str, dimension: &str) -> StoreResult<u64> {
        let row = sqlx::query(
            &self.sql("SELECT used FROM quota_pool WHERE root_id = $1 AND dimension = $2"),
        )
        .bind(root_id)
        .bind(dimension)
        .fetch_optional(self.pool())
        .await?;
        Ok(match row {
            Some(row) => row.try_get::<i64, _>("used")?.unsigned_abs(),
            None => 0,
        })
    }
}
