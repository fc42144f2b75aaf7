//! An account's entitlement as stored: the limits, seats and features a
//! synchronization writes, the overrides a system admin set, and the account roots the
//! quota workers read.

use sqlx::AnyConnection;

use super::decode::Decoder;

use super::orgs::{org_from_row, ORG_COLUMNS};
use super::{stamp, OrgRecord, Store, StoreResult};

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

impl Store {
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

    /// Account roots whose pool, in `period`, passes `test` on any type (entitlements
    /// decides the comparison; the database makes it over the rows): (a page of
    /// them, how many).
    pub async fn roots_at_risk(
        &self,
        test: entitlements::AtRiskTest,
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
               SELECT 1 FROM quota_pool p WHERE p.root_id = organizations.id AND (
                 (p.limit_value = 0 AND CAST($4 AS INTEGER) = 1)
                 OR (p.limit_value > 0
                   AND (CASE WHEN COALESCE(p.period_start, '') IN ('', $1) THEN p.used ELSE 0 END)
                       * CAST($2 AS {real}) >= CAST($3 AS {real}) * p.limit_value)))"
        );
        let parameters = [
            Some(period.to_owned()),
            Some(test.used_factor.to_string()),
            Some(test.limit_factor.to_string()),
            Some(i64::from(test.zero_limit_at_risk).to_string()),
        ];
        self.organizations_where(&condition, &parameters, limit, offset)
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
}

impl super::Transaction<'_> {
    /// Writes an entitlement change and its synchronization. `false`: the
    /// subscription changed meanwhile (or a seat update is stale); the caller then
    /// keeps nothing of its unit.
    pub async fn commit_entitlement(
        &mut self,
        write: &EntitlementWrite<'_>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> StoreResult<bool> {
        let at = stamp(now);

        let (subscription, version) = write.subscription;
        let bumped = sqlx::query(&self.store.sql(
            "UPDATE billing_subscriptions SET version = version + 1, updated_at = $3,
               granted_features = COALESCE($4, granted_features)
             WHERE id = $1 AND version = $2",
        ))
        .bind(subscription)
        .bind(version)
        .bind(&at)
        .bind(write.granted_features.clone())
        .execute(&mut *self.tx)
        .await?;
        if bumped.rows_affected() == 0 {
            return Ok(false);
        }
        let root = write.sync.root_id.as_str();
        if let Some(seat_version) = write.seat_version {
            let fresh = sqlx::query(&self.store.sql(
                "UPDATE organizations SET seat_version = $2 WHERE id = $1 AND (seat_version IS NULL OR seat_version < $2)",
            ))
            .bind(root)
            .bind(seat_version)
            .execute(&mut *self.tx)
            .await?;
            if fresh.rows_affected() == 0 {
                return Ok(false);
            }
        }
        if let Some(addons) = &write.addons {
            sqlx::query(
                &self
                    .store
                    .sql("DELETE FROM billing_addons WHERE subscription_id = $1"),
            )
            .bind(subscription)
            .execute(&mut *self.tx)
            .await?;
            for (bundle, quantity) in addons {
                sqlx::query(&self.store.sql(
                    "INSERT INTO billing_addons (subscription_id, bundle_id, quantity, updated_at) VALUES ($1, $2, $3, $4)",
                ))
                .bind(subscription)
                .bind(bundle)
                .bind(quantity)
                .bind(&at)
                .execute(&mut *self.tx)
                .await?;
            }
        }
        if let Some(tier) = write.tier {
            // The root and its teams move together: a team's tier is its root's.
            sqlx::query(&self.store.sql(
                "UPDATE organizations SET tier = $2, updated_at = $3 WHERE (id = $1 OR parent_org_id = $1) AND deleted_at IS NULL",
            ))
            .bind(root)
            .bind(super::orgs::tier_name(tier))
            .bind(&at)
            .execute(&mut *self.tx)
            .await?;
        }
        for (dimension, value) in &write.overrides {
            if let Some(value) = value {
                sqlx::query(&self.store.sql(
                    "INSERT INTO quota_overrides (org_id, dimension, limit_value, updated_at) VALUES ($1, $2, $3, $4)
                     ON CONFLICT (org_id, dimension) DO UPDATE SET limit_value = excluded.limit_value, updated_at = excluded.updated_at",
                ))
                .bind(root)
                .bind(*dimension)
                .bind(*value)
                .bind(&at)
                .execute(&mut *self.tx)
                .await?;
            } else {
                sqlx::query(
                    &self
                        .store
                        .sql("DELETE FROM quota_overrides WHERE org_id = $1 AND dimension = $2"),
                )
                .bind(root)
                .bind(*dimension)
                .execute(&mut *self.tx)
                .await?;
            }
        }
        self.store.write_limits(&mut self.tx, &write.sync).await?;
        self.store
            .notify_in(
                &mut self.tx,
                super::QUOTA_CHANNEL,
                &format!("give-back {root}"),
            )
            .await?;
        Ok(true)
    }
}
