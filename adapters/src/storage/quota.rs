//! Usage and limits of quota types: each organization's own usage, and each root's
//! pool (its own usage and its teams', SEMANTICS 3) with the limit in force, which
//! the entitlement synchronization writes. A charge is one conditional UPDATE on the
//! pool row, whose limit is in the same row: never read, compare, then write. The
//! per-period types (apiCalls, aiCalls) carry the month they count in; a charge in a
//! new month starts from zero in the same statement.

use sqlx::{AnyConnection, Row};

use super::decode::Decoder;
use audit_chain::AuditEvent;

use super::orgs::{org_from_row, ORG_COLUMNS};
use super::{stamp, OrgRecord, Store, StoreError, StoreResult};

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
/// `limit` (-1 unlimited): `None` when it fits.
pub(crate) fn refusal(used: i64, limit: i64, amount: u64) -> Option<QuotaRefusal> {
    let used = used.unsigned_abs();
    match entitlements::Limit::from_wire(limit)? {
        entitlements::Limit::Finite(n)
            if !entitlements::Limit::Finite(n).allows(used.saturating_add(amount)) =>
        {
            Some(QuotaRefusal {
                limit: n,
                used,
                requested: amount,
            })
        }
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

/// The limits and seats an entitlement synchronization writes for an account root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitSync {
    /// The account root.
    pub root_id: String,
    /// Limit per quota type (-1 unlimited).
    pub limits: Vec<(&'static str, i64)>,
    /// The seat limit (-1 unlimited).
    pub seats: i64,
    /// Purchased and granted features (JSON array).
    pub features: String,
}

/// One change of an account's entitlement, committed with its synchronization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntitlementWrite<'a> {
    /// The subscription and the version the change was computed from: a change made
    /// meanwhile makes this one answer `false` (compute again).
    pub subscription: (&'a str, i64),
    /// The add-ons after the change (all of them), when they change.
    pub addons: Option<Vec<(String, i64)>>,
    /// The root's new tier, when it changes.
    pub tier: Option<entitlements::Tier>,
    /// Limit overrides to set (`Some`) or clear (`None`).
    pub overrides: Vec<(&'static str, Option<i64>)>,
    /// Features granted beside the add-ons, when they change (JSON array).
    pub granted_features: Option<String>,
    /// The billing service's version of a seat-limit update: an older one than the
    /// stored is ignored (the write answers `false`).
    pub seat_version: Option<i64>,
    /// What to synchronize.
    pub sync: LimitSync,
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

    /// [`Store::try_charge`] for a create whose pool the service synchronized first:
    /// a pool without a limit fails closed.
    pub(crate) async fn charge(
        &self,
        conn: &mut AnyConnection,
        charge: &Charge<'_>,
    ) -> StoreResult<Result<(), QuotaRefusal>> {
        match self.try_charge(conn, charge).await? {
            Charged::Done => Ok(Ok(())),
            Charged::Refused(refusal) => Ok(Err(refusal)),
            Charged::Unsynced => Err(StoreError::Other(format!(
                "the {} limit of {} is not synchronized",
                charge.dimension, charge.root_id
            ))),
        }
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

    /// A charge in a transaction of its own (an increment, an API call).
    pub async fn charge_now(
        &self,
        charge: &Charge<'_>,
        idempotency: Option<(&str, &str)>,
        audit: &[AuditEvent],
        now: chrono::DateTime<chrono::Utc>,
    ) -> StoreResult<Charged> {
        let mut tx = self.pool().begin().await?;
        if let Some((service, key)) = idempotency {
            let fresh = sqlx::query(&self.sql(
                "INSERT INTO quota_increments (service, idempotency_key, org_id, dimension, amount, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
            ))
            .bind(service)
            .bind(key)
            .bind(charge.org_id)
            .bind(charge.dimension)
            .bind(wire(charge.amount))
            .bind(stamp(now))
            .execute(&mut *tx)
            .await?;
            if fresh.rows_affected() == 0 {
                // Counted before (or the key names another increment: the service
                // answers that).
                return Ok(Charged::Done);
            }
        }
        let outcome = self.try_charge(&mut tx, charge).await?;
        if outcome == Charged::Done {
            self.enqueue(&mut tx, audit).await?;
            tx.commit().await?;
        }
        Ok(outcome)
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

    /// Whether the root's entitlement is synchronized: a limit on each of
    /// `dimensions` in its pool, and a seat limit.
    pub async fn entitlement_synced(
        &self,
        root_id: &str,
        dimensions: &[&str],
    ) -> StoreResult<bool> {
        let row = sqlx::query(&self.sql(
            "SELECT seat_limit, (SELECT COUNT(*) FROM quota_pool WHERE root_id = $1 AND limit_value IS NOT NULL) AS n
             FROM organizations WHERE id = $1",
        ))
        .bind(root_id)
        .fetch_optional(self.pool())
        .await?;
        let Some(row) = row else { return Ok(false) };
        let d = Decoder::new(&row, "organizations", &[]);
        let seats: Option<i64> = d.get("seat_limit")?;
        let n: i64 = d.get("n")?;
        Ok(seats.is_some() && n.unsigned_abs() >= dimensions.len() as u64)
    }

    /// A root's limit overrides.
    pub async fn quota_overrides(&self, root_id: &str) -> StoreResult<Vec<(String, i64)>> {
        let rows = sqlx::query(
            &self.sql("SELECT dimension, limit_value FROM quota_overrides WHERE org_id = $1"),
        )
        .bind(root_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let d = Decoder::new(row, "quota_overrides", &["org_id"]);
                Ok((d.get("dimension")?, d.get("limit_value")?))
            })
            .collect()
    }

    /// Commits an entitlement change and its synchronization in one transaction.
    /// `false`: the subscription changed meanwhile (or a seat update is stale), and
    /// nothing was written.
    pub async fn commit_entitlement(
        &self,
        write: &EntitlementWrite<'_>,
        now: chrono::DateTime<chrono::Utc>,
        audit: &[AuditEvent],
    ) -> StoreResult<bool> {
        let at = stamp(now);
        let mut tx = self.pool().begin().await?;
        let (subscription, version) = write.subscription;
        let bumped = sqlx::query(&self.sql(
            "UPDATE billing_subscriptions SET version = version + 1, updated_at = $3,
               granted_features = COALESCE($4, granted_features)
             WHERE id = $1 AND version = $2",
        ))
        .bind(subscription)
        .bind(version)
        .bind(&at)
        .bind(write.granted_features.clone())
        .execute(&mut *tx)
        .await?;
        if bumped.rows_affected() == 0 {
            return Ok(false);
        }
        let root = write.sync.root_id.as_str();
        if let Some(seat_version) = write.seat_version {
            let fresh = sqlx::query(&self.sql(
                "UPDATE organizations SET seat_version = $2 WHERE id = $1 AND (seat_version IS NULL OR seat_version < $2)",
            ))
            .bind(root)
            .bind(seat_version)
            .execute(&mut *tx)
            .await?;
            if fresh.rows_affected() == 0 {
                return Ok(false);
            }
        }
        if let Some(addons) = &write.addons {
            sqlx::query(&self.sql("DELETE FROM billing_addons WHERE subscription_id = $1"))
                .bind(subscription)
                .execute(&mut *tx)
                .await?;
            for (bundle, quantity) in addons {
                sqlx::query(&self.sql(
                    "INSERT INTO billing_addons (subscription_id, bundle_id, quantity, updated_at) VALUES ($1, $2, $3, $4)",
                ))
                .bind(subscription)
                .bind(bundle)
                .bind(quantity)
                .bind(&at)
                .execute(&mut *tx)
                .await?;
            }
        }
        if let Some(tier) = write.tier {
            // The root and its teams move together: a team's tier is its root's.
            sqlx::query(&self.sql(
                "UPDATE organizations SET tier = $2, updated_at = $3 WHERE (id = $1 OR parent_org_id = $1) AND deleted_at IS NULL",
            ))
            .bind(root)
            .bind(super::orgs::tier_name(tier))
            .bind(&at)
            .execute(&mut *tx)
            .await?;
        }
        for (dimension, value) in &write.overrides {
            if let Some(value) = value {
                sqlx::query(&self.sql(
                    "INSERT INTO quota_overrides (org_id, dimension, limit_value, updated_at) VALUES ($1, $2, $3, $4)
                     ON CONFLICT (org_id, dimension) DO UPDATE SET limit_value = excluded.limit_value, updated_at = excluded.updated_at",
                ))
                .bind(root)
                .bind(*dimension)
                .bind(*value)
                .bind(&at)
                .execute(&mut *tx)
                .await?;
            } else {
                sqlx::query(
                    &self.sql("DELETE FROM quota_overrides WHERE org_id = $1 AND dimension = $2"),
                )
                .bind(root)
                .bind(*dimension)
                .execute(&mut *tx)
                .await?;
            }
        }
        self.write_limits(&mut tx, &write.sync).await?;
        self.enqueue(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Writes the synchronized limits to the root's pool rows and its seats to the
    /// organization.
    async fn write_limits(&self, conn: &mut AnyConnection, sync: &LimitSync) -> StoreResult<()> {
        for (dimension, limit) in &sync.limits {
            sqlx::query(&self.sql(
                "INSERT INTO quota_pool (root_id, dimension, used, limit_value, period_start) VALUES ($1, $2, 0, $3, '')
                 ON CONFLICT (root_id, dimension) DO UPDATE SET limit_value = excluded.limit_value",
            ))
            .bind(&sync.root_id)
            .bind(*dimension)
            .bind(*limit)
            .execute(&mut *conn)
            .await?;
        }
        sqlx::query(
            &self.sql("UPDATE organizations SET seat_limit = $2, seat_features = $3 WHERE id = $1"),
        )
        .bind(&sync.root_id)
        .bind(sync.seats)
        .bind(&sync.features)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }

    /// Sets usage of `dimensions` to zero: a root's pool and its whole subtree, or a
    /// team's own usage (given back to its root's pool).
    pub async fn reset_usage(
        &self,
        (org_id, root_id): (&str, &str),
        dimensions: &[&str],
        audit: &[AuditEvent],
    ) -> StoreResult<()> {
        let mut tx = self.pool().begin().await?;
        for dimension in dimensions {
            if org_id == root_id {
                sqlx::query(
                    &self.sql(
                        "UPDATE quota_pool SET used = 0 WHERE root_id = $1 AND dimension = $2",
                    ),
                )
                .bind(root_id)
                .bind(*dimension)
                .execute(&mut *tx)
                .await?;
                sqlx::query(&self.sql(
                    "UPDATE quota_usage SET used = 0 WHERE dimension = $2
                       AND org_id IN (SELECT id FROM organizations WHERE id = $1 OR parent_org_id = $1)",
                ))
                .bind(root_id)
                .bind(*dimension)
                .execute(&mut *tx)
                .await?;
            } else {
                sqlx::query(&self.sql(
                    "UPDATE quota_pool SET used = CASE WHEN quota_pool.used > t.used THEN quota_pool.used - t.used ELSE 0 END
                     FROM (SELECT used FROM quota_usage WHERE org_id = $2 AND dimension = $3) AS t
                     WHERE root_id = $1 AND dimension = $3",
                ))
                .bind(root_id)
                .bind(org_id)
                .bind(*dimension)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    &self.sql(
                        "UPDATE quota_usage SET used = 0 WHERE org_id = $1 AND dimension = $2",
                    ),
                )
                .bind(org_id)
                .bind(*dimension)
                .execute(&mut *tx)
                .await?;
            }
        }
        self.enqueue(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(())
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

    /// Account roots whose pool is at or above `threshold` percent of a finite limit
    /// on any type, in `period` (a zero limit counts as full, as
    /// `entitlements::Usage::percent_used` says): (a page of them, how many).
    pub async fn roots_at_risk(
        &self,
        threshold: f64,
        period: &str,
        limit: u32,
        offset: u64,
    ) -> StoreResult<(Vec<OrgRecord>, u64)> {
        let real = match self.dialect() {
            super::Dialect::Postgres => "DOUBLE PRECISION",
            super::Dialect::Sqlite => "REAL",
        };
        let condition = format!(
            "deleted_at IS NULL AND parent_org_id IS NULL AND EXISTS (
               SELECT 1 FROM quota_pool p WHERE p.root_id = organizations.id AND p.limit_value >= 0
                 AND (CASE WHEN COALESCE(p.period_start, '') IN ('', $1) THEN p.used ELSE 0 END) * 100.0
                     >= CAST($2 AS {real}) * p.limit_value)"
        );
        self.organizations_where(
            &condition,
            &[Some(period.to_owned()), Some(threshold.to_string())],
            limit,
            offset,
        )
        .await
    }

    /// Whether the root's stored limits, seats and features are those of `sync`
    /// already (then synchronizing again would change nothing).
    pub async fn is_synced_to(&self, sync: &LimitSync) -> StoreResult<bool> {
        let Some(row) = sqlx::query(
            &self.sql("SELECT seat_limit, seat_features FROM organizations WHERE id = $1"),
        )
        .bind(&sync.root_id)
        .fetch_optional(self.pool())
        .await?
        else {
            return Ok(false);
        };
        let d = Decoder::new(&row, "organizations", &[]);
        let seats: Option<i64> = d.get("seat_limit")?;
        let features: Option<String> = d.get("seat_features")?;
        if seats != Some(sync.seats) || features.as_deref() != Some(sync.features.as_str()) {
            return Ok(false);
        }
        let pool = self.pool_rows(&sync.root_id, "").await?;
        Ok(sync.limits.iter().all(|(dimension, limit)| {
            pool.iter()
                .any(|r| r.dimension == *dimension && r.limit == Some(*limit))
        }))
    }

    /// The billing service's last seat-limit version applied to a root.
    pub async fn seat_version(&self, root_id: &str) -> StoreResult<Option<u64>> {
        let row = sqlx::query(&self.sql("SELECT seat_version FROM organizations WHERE id = $1"))
            .bind(root_id)
            .fetch_optional(self.pool())
            .await?;
        let Some(row) = row else { return Ok(None) };
        let version: Option<i64> = Decoder::new(&row, "organizations", &[]).get("seat_version")?;
        Ok(version.map(i64::unsigned_abs))
    }

    /// A page of live organizations (roots only when `roots`), oldest first, and how
    /// many there are.
    pub async fn organizations_page(
        &self,
        roots: bool,
        limit: u32,
        offset: u64,
    ) -> StoreResult<(Vec<OrgRecord>, u64)> {
        let condition = if roots {
            "deleted_at IS NULL AND parent_org_id IS NULL"
        } else {
            "deleted_at IS NULL"
        };
        self.organizations_where(condition, &[], limit, offset)
            .await
    }

    async fn organizations_where(
        &self,
        condition: &str,
        binds: &[Option<String>],
        limit: u32,
        offset: u64,
    ) -> StoreResult<(Vec<OrgRecord>, u64)> {
        let (rows, total) = self
            .page(
                (ORG_COLUMNS, "organizations", condition, "created_at, id"),
                binds,
                limit,
                offset,
            )
            .await?;
        let records = rows.iter().map(org_from_row).collect::<StoreResult<_>>()?;
        Ok((records, total))
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
