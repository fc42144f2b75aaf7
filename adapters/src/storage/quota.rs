//! Usage and limits of quota types: each organization's own usage, and each root's
//! pool (its own usage and its teams', SEMANTICS 3) with the limit in force, which
//! the entitlement synchronization writes. A charge is one conditional UPDATE on the
//! pool row, whose limit is in the same row: never read, compare, then write. The
//! per-period types (apiCalls, aiCalls) carry the month they count in; a charge in a
//! new month starts from zero in the same statement.

use sqlx::{AnyConnection, Row};

use super::decode::Decoder;

use super::{stamp, Store, StoreError, StoreResult};

/// One charge (or release) of `amount` of `dimension` to `org_id` and its root's pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charge<'a> {
    /// The organization using the resource.
    pub org_id: &'a str,
    /// Its root (itself for a root organization).
    pub root_id: &'a str,
    /// The quota type (`plugins`, `pipelines`, `apiCalls`...).
    pub dimension: &'a str,
    /// The period the usage counts in (`2026-11-01` for a monthly type; empty for a
    /// type without periods).
    pub period: &'a str,
    /// How many.
    pub amount: u64,
}

/// What `entitlements` says of adding `amount` to `used` under the wire limit
/// `limit` (-1 unlimited): `None` when it fits (the rule is [`entitlements::charge`];
/// a wire limit below -1 refuses nothing, as the SQL's `limit_value < 0` does).
pub(crate) fn refusal(used: i64, limit: i64, amount: u64) -> Option<QuotaRefusal> {
    let limit = entitlements::Limit::from_wire(limit)?;
    match entitlements::charge(used.unsigned_abs(), limit, amount) {
        Err(entitlements::QuotaError::Exceeded {
            used,
            limit,
            requested,
        }) => Some(QuotaRefusal {
            limit,
            used,
            requested,
        }),
        _ => None,
    }
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

/// What a charge did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charged {
    /// Counted.
    Done,
    /// Over the limit: nothing counted.
    Refused(QuotaRefusal),
    /// The pool has no limit yet: synchronize the entitlement, then charge again.
    Unsynced,
}

/// One row of usage: the pool's (a root's whole account) or an organization's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageRow {
    /// The quota type.
    pub dimension: String,
    /// Used in the current period (0 when the stored period has passed).
    pub used: u64,
    /// The limit in force (pool rows only; -1 unlimited; `None` not synchronized).
    pub limit: Option<i64>,
}

fn wire(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// `used` as counted in the period bound at `$n`: zero when the stored period is
/// another.
fn used_in(n: u8) -> String {
    format!("(CASE WHEN COALESCE(period_start, '') = ${n} THEN used ELSE 0 END)")
}

impl Store {
    /// Charges the organization and the pool, or answers the refusal when the pool's
    /// limit would be passed; the caller then drops its transaction, which rolls back
    /// the organization's row too.
    pub(crate) async fn try_charge(
        &self,
        conn: &mut AnyConnection,
        charge: &Charge<'_>,
    ) -> StoreResult<Charged> {
        // The organization's own row first (a root's too: the pool adds its teams'),
        // so that the pool row, which every charge of the account waits for, is held
        // from its UPDATE to the commit only. A refusal rolls both back.
        sqlx::query(&self.sql(
            "INSERT INTO quota_usage (org_id, dimension, used, period_start) VALUES ($1, $2, $3, $4)
             ON CONFLICT (org_id, dimension) DO UPDATE SET
               used = CASE WHEN COALESCE(quota_usage.period_start, '') = $4 THEN quota_usage.used ELSE 0 END + $3,
               period_start = $4",
        ))
        .bind(charge.org_id)
        .bind(charge.dimension)
        .bind(wire(charge.amount))
        .bind(charge.period)
        .execute(&mut *conn)
        .await?;
        let used = used_in(4);
        // A row another transaction is writing may be invisible to the UPDATE and
        // visible to the read after it: a row whose limit allows the charge is
        // tried again rather than refused.
        let mut attempts = 0;
        loop {
            let done = sqlx::query(&self.sql(&format!(
                "UPDATE quota_pool SET used = {used} + $3, period_start = $4
                 WHERE root_id = $1 AND dimension = $2 AND limit_value IS NOT NULL
                   AND (limit_value < 0 OR {used} + $3 <= limit_value)"
            )))
            .bind(charge.root_id)
            .bind(charge.dimension)
            .bind(wire(charge.amount))
            .bind(charge.period)
            .execute(&mut *conn)
            .await?;
            if done.rows_affected() > 0 {
                break;
            }
            let row = sqlx::query(&self.sql(&format!(
                "SELECT {} AS used, limit_value FROM quota_pool WHERE root_id = $1 AND dimension = $2",
                used_in(3)
            )))
            .bind(charge.root_id)
            .bind(charge.dimension)
            .bind(charge.period)
            .fetch_optional(&mut *conn)
            .await?;
            let Some(row) = row else {
                return Ok(Charged::Unsynced);
            };
            let d = Decoder::new(&row, "quota_pool", &[]);
            let limit: Option<i64> = d.get("limit_value")?;
            let used: i64 = d.get("used")?;
            let Some(limit) = limit else {
                return Ok(Charged::Unsynced);
            };
            // entitlements decides whether the pool takes the charge.
            if let Some(refusal) = refusal(used, limit, charge.amount) {
                return Ok(Charged::Refused(refusal));
            }
            attempts += 1;
            if attempts >= 3 {
                return Err(StoreError::Unavailable(format!(
                    "the {} pool of {} is contended",
                    charge.dimension, charge.root_id
                )));
            }
        }
        Ok(Charged::Done)
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

    /// What an earlier increment with this key counted: (org, type, amount).
    pub async fn increment_by_key(
        &self,
        service: &str,
        key: &str,
    ) -> StoreResult<Option<(String, String, u64)>> {
        let row = sqlx::query(&self.sql(
            "SELECT org_id, dimension, amount FROM quota_increments WHERE service = $1 AND idempotency_key = $2",
        ))
        .bind(service)
        .bind(key)
        .fetch_optional(self.pool())
        .await?;
        row.map(|row| {
            let d = Decoder::new(&row, "quota_increments", &["idempotency_key"]);
            Ok((
                d.get("org_id")?,
                d.get("dimension")?,
                d.get::<i64>("amount")?.unsigned_abs(),
            ))
        })
        .transpose()
    }

    /// The pool rows of a root (usage of the account, limits) in `period`.
    pub async fn pool_rows(&self, root_id: &str, period: &str) -> StoreResult<Vec<UsageRow>> {
        self.usage_rows("quota_pool", "root_id", root_id, period)
            .await
    }

    /// An organization's own usage rows in `period`.
    pub async fn own_rows(&self, org_id: &str, period: &str) -> StoreResult<Vec<UsageRow>> {
        self.usage_rows("quota_usage", "org_id", org_id, period)
            .await
    }

    async fn usage_rows(
        &self,
        table: &'static str,
        key: &str,
        id: &str,
        period: &str,
    ) -> StoreResult<Vec<UsageRow>> {
        let limit = if table == "quota_pool" {
            "limit_value"
        } else {
            "NULL AS limit_value"
        };
        // Monthly types count in `period`; the others' stored period is empty.
        let rows = sqlx::query(&self.sql(&format!(
            "SELECT dimension, CASE WHEN COALESCE(period_start, '') IN ('', $2) THEN used ELSE 0 END AS used, {limit}
             FROM {table} WHERE {key} = $1"
        )))
        .bind(id)
        .bind(period)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let d = Decoder::new(row, table, &[]);
                Ok(UsageRow {
                    dimension: d.get("dimension")?,
                    used: d.get::<i64>("used")?.unsigned_abs(),
                    limit: d.get("limit_value")?,
                })
            })
            .collect()
    }

    /// The organization's own usage of `dimension` (any period).
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

    /// The pool's usage of `dimension` (a root and its teams; any period).
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

    /// Starts `period` for the monthly types wherever an earlier one is stored:
    /// their usage goes back to zero. Returns the rows reset.
    pub async fn start_period(&self, dimensions: &[&str], period: &str) -> StoreResult<u64> {
        let mut reset = 0;
        for table in ["quota_pool", "quota_usage"] {
            for dimension in dimensions {
                let done = sqlx::query(&self.sql(&format!(
                    "UPDATE {table} SET used = 0, period_start = $2
                     WHERE dimension = $1 AND COALESCE(period_start, '') <> $2"
                )))
                .bind(*dimension)
                .bind(period)
                .execute(self.pool())
                .await?;
                reset += done.rows_affected();
            }
        }
        Ok(reset)
    }

    /// Forgets increments' idempotency keys older than `cutoff`.
    pub async fn prune_increment_keys(
        &self,
        cutoff: chrono::DateTime<chrono::Utc>,
    ) -> StoreResult<u64> {
        let done = sqlx::query(&self.sql("DELETE FROM quota_increments WHERE created_at < $1"))
            .bind(stamp(cutoff))
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected())
    }
}

impl super::Transaction<'_> {
    /// Charges the organization and its root's pool in one conditional statement on
    /// the pool row (the limit is in the row): what it did. A charge the pool did
    /// not take leaves the organization's row to the unit's rollback.
    pub async fn charge(&mut self, charge: &Charge<'_>) -> StoreResult<Charged> {
        self.store.try_charge(&mut self.tx, charge).await
    }

    /// Gives back what a charge took (never below zero).
    pub async fn release(&mut self, charge: &Charge<'_>) -> StoreResult<()> {
        self.store.release(&mut self.tx, charge).await
    }
}

impl super::Transaction<'_> {
    /// Gives back units a charge reserved and nobody spent, in the period they were
    /// charged in only: after that period's end (or a reset) they are not counted any
    /// more. One transaction for the organization's row and the pool's.
    pub async fn give_back(&mut self, charge: &Charge<'_>) -> StoreResult<()> {
        for (table, key, id) in [
            ("quota_pool", "root_id", charge.root_id),
            ("quota_usage", "org_id", charge.org_id),
        ] {
            sqlx::query(&self.store.sql(&format!(
                "UPDATE {table} SET used = CASE WHEN used > $3 THEN used - $3 ELSE 0 END
                 WHERE {key} = $1 AND dimension = $2 AND COALESCE(period_start, '') = $4"
            )))
            .bind(id)
            .bind(charge.dimension)
            .bind(wire(charge.amount))
            .bind(charge.period)
            .execute(&mut *self.tx)
            .await?;
        }
        Ok(())
    }
}

impl super::Transaction<'_> {
    /// A charge with its idempotency key, if any (an increment, an API call): a key
    /// seen before answers `Done` and counts nothing again.
    pub async fn charge_now(
        &mut self,
        charge: &Charge<'_>,
        idempotency: Option<(&str, &str)>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> StoreResult<Charged> {
        if let Some((service, key)) = idempotency {
            let fresh = sqlx::query(&self.store.sql(
                "INSERT INTO quota_increments (service, idempotency_key, org_id, dimension, amount, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
            ))
            .bind(service)
            .bind(key)
            .bind(charge.org_id)
            .bind(charge.dimension)
            .bind(wire(charge.amount))
            .bind(stamp(now))
            .execute(&mut *self.tx)
            .await?;
            if fresh.rows_affected() == 0 {
                // Counted before (or the key names another increment: the service
                // answers that).
                return Ok(Charged::Done);
            }
        }
        self.store.try_charge(&mut self.tx, charge).await
    }
}

impl super::Transaction<'_> {
    /// Sets usage of `dimensions` to zero: a root's pool and its whole subtree, or a
    /// team's own usage (given back to its root's pool).
    pub async fn reset_usage(
        &mut self,
        (org_id, root_id): (&str, &str),
        dimensions: &[&str],
    ) -> StoreResult<()> {
        for dimension in dimensions {
            if org_id == root_id {
                sqlx::query(
                    &self.store.sql(
                        "UPDATE quota_pool SET used = 0 WHERE root_id = $1 AND dimension = $2",
                    ),
                )
                .bind(root_id)
                .bind(*dimension)
                .execute(&mut *self.tx)
                .await?;
                sqlx::query(&self.store.sql(
                    "UPDATE quota_usage SET used = 0 WHERE dimension = $2
                       AND org_id IN (SELECT id FROM organizations WHERE id = $1 OR parent_org_id = $1)",
                ))
                .bind(root_id)
                .bind(*dimension)
                .execute(&mut *self.tx)
                .await?;
            } else {
                sqlx::query(&self.store.sql(
                    "UPDATE quota_pool SET used = CASE WHEN quota_pool.used > t.used THEN quota_pool.used - t.used ELSE 0 END
                     FROM (SELECT used FROM quota_usage WHERE org_id = $2 AND dimension = $3) AS t
                     WHERE root_id = $1 AND dimension = $3",
                ))
                .bind(root_id)
                .bind(org_id)
                .bind(*dimension)
                .execute(&mut *self.tx)
                .await?;
                sqlx::query(
                    &self.store.sql(
                        "UPDATE quota_usage SET used = 0 WHERE org_id = $1 AND dimension = $2",
                    ),
                )
                .bind(org_id)
                .bind(*dimension)
                .execute(&mut *self.tx)
                .await?;
            }
        }
        self.store
            .notify_in(
                &mut self.tx,
                super::QUOTA_CHANNEL,
                &format!("forget {root_id}"),
            )
            .await?;
        Ok(())
    }
}
