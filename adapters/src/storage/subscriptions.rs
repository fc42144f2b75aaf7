//! An organization's subscriptions to published rules, always scoped by organization.

use chrono::{DateTime, Utc};
use compliance_core::Subscription;

use super::decode::Decoder;
use super::orgs::found;
use super::{stamp, taken, Store, StoreResult};

fn subscription_from_row(row: &sqlx::any::AnyRow) -> StoreResult<Subscription> {
    let d = Decoder::new(row, "subscriptions", &["rule_id"]);
    Ok(Subscription {
        rule_id: d.get("rule_id")?,
        active: d.flag("active")?,
        pinned_version: d.opt_u32("pinned_version")?,
    })
}

impl Store {
    /// An organization's subscriptions.
    pub async fn subscriptions(&self, org_id: &str) -> StoreResult<Vec<Subscription>> {
        let rows = sqlx::query(&self.sql("SELECT rule_id, active, pinned_version FROM subscriptions WHERE org_id = $1 ORDER BY created_at, rule_id"))
            .bind(org_id)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(subscription_from_row).collect()
    }

    /// A page of an organization's subscriptions (oldest first) and how many there are.
    pub async fn subscriptions_page(
        &self,
        org_id: &str,
        limit: u32,
        offset: u64,
    ) -> StoreResult<(Vec<Subscription>, u64)> {
        let (rows, total) = self
            .page(
                (
                    "rule_id, active, pinned_version",
                    "subscriptions",
                    "org_id = $1",
                    "created_at, rule_id",
                ),
                &[Some(org_id.to_owned())],
                limit,
                offset,
            )
            .await?;
        let items = rows
            .iter()
            .map(subscription_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((items, total))
    }
}

impl super::Transaction<'_> {
    /// Subscribes (inactive); a second subscription to the same rule is a conflict.
    pub async fn subscribe(
        &mut self,
        org_id: &str,
        rule_id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(&self.store.sql(
            "INSERT INTO subscriptions (org_id, rule_id, active, pinned_version, created_at, updated_at) VALUES ($1, $2, 0, NULL, $3, $3)",
        ))
        .bind(org_id)
        .bind(rule_id)
        .bind(stamp(now))
        .execute(&mut *self.tx)
        .await
        .map_err(taken(|| "already subscribed to that rule"))?;
        Ok(())
    }
}

impl super::Transaction<'_> {
    /// Subscribes (inactive) to each rule not yet subscribed; returns how many were new.
    pub async fn subscribe_missing(
        &mut self,
        org_id: &str,
        rule_ids: &[String],
        now: DateTime<Utc>,
    ) -> StoreResult<u64> {
        let mut added = 0;
        for rule_id in rule_ids {
            let done = sqlx::query(&self.store.sql(
                "INSERT INTO subscriptions (org_id, rule_id, active, pinned_version, created_at, updated_at) VALUES ($1, $2, 0, NULL, $3, $3)
                 ON CONFLICT (org_id, rule_id) DO NOTHING",
            ))
            .bind(org_id)
            .bind(rule_id)
            .bind(stamp(now))
            .execute(&mut *self.tx)
            .await?;
            added += done.rows_affected();
        }
        Ok(added)
    }
}

impl super::Transaction<'_> {
    /// Activates or deactivates subscriptions; every rule must be subscribed.
    pub async fn set_subscriptions_active(
        &mut self,
        org_id: &str,
        rule_ids: &[String],
        active: bool,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        for rule_id in rule_ids {
            let done = sqlx::query(&self.store.sql("UPDATE subscriptions SET active = $3, updated_at = $4 WHERE org_id = $1 AND rule_id = $2"))
                .bind(org_id)
                .bind(rule_id)
                .bind(i64::from(active))
                .bind(stamp(now))
                .execute(&mut *self.tx)
                .await?;
            found(
                done.rows_affected(),
                &format!("subscription to `{rule_id}`"),
            )?;
        }
        self.store
            .enqueue_subscription_change(&mut self.tx, org_id, rule_ids, now)
            .await?;
        Ok(())
    }
}

impl super::Transaction<'_> {
    /// Pins a subscription to a version, or unpins it (`None`).
    pub async fn pin_subscription(
        &mut self,
        org_id: &str,
        rule_id: &str,
        version: Option<u32>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let done = sqlx::query(&self.store.sql("UPDATE subscriptions SET pinned_version = $3, updated_at = $4 WHERE org_id = $1 AND rule_id = $2"))
            .bind(org_id)
            .bind(rule_id)
            .bind(version.map(i64::from))
            .bind(stamp(now))
            .execute(&mut *self.tx)
            .await?;
        found(done.rows_affected(), "subscription")?;
        self.store
            .enqueue_subscription_change(&mut self.tx, org_id, &[rule_id.to_owned()], now)
            .await?;
        Ok(())
    }
}

impl super::Transaction<'_> {
    /// Removes a subscription.
    pub async fn unsubscribe(
        &mut self,
        org_id: &str,
        rule_id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let done = sqlx::query(
            &self
                .store
                .sql("DELETE FROM subscriptions WHERE org_id = $1 AND rule_id = $2"),
        )
        .bind(org_id)
        .bind(rule_id)
        .execute(&mut *self.tx)
        .await?;
        found(done.rows_affected(), "subscription")?;
        self.store
            .enqueue_subscription_change(&mut self.tx, org_id, &[rule_id.to_owned()], now)
            .await?;
        Ok(())
    }
}
