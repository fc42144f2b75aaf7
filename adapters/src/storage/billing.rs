//! Billing subscriptions: one per account root, with its add-ons and a version that
//! every entitlement change raises (see `Store::commit_entitlement`).

use chrono::{DateTime, Utc};

use super::decode::Decoder;
use super::{stamp, Store, StoreResult};

/// A root's billing subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionRecord {
    /// Its id (`:id` of the add-on endpoints).
    pub id: String,
    /// The account root.
    pub org_id: String,
    /// `active`.
    pub status: String,
    /// Raised by every change.
    pub version: i64,
    /// (bundle id, quantity), in bundle order.
    pub addons: Vec<(String, i64)>,
    /// Features granted beside the add-ons (JSON array as stored).
    pub granted_features: String,
    /// When it was opened.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

const COLUMNS: &str = "id, org_id, status, version, granted_features, created_at, updated_at";

impl Store {
    /// The root's subscription, opened (with no add-ons) on first use.
    pub async fn subscription_of(
        &self,
        org_id: &str,
        new_id: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<SubscriptionRecord> {
        if let Some(found) = self.subscription_where("org_id", org_id).await? {
            return Ok(found);
        }
        sqlx::query(&self.sql(
            "INSERT INTO billing_subscriptions (id, org_id, status, version, created_at, updated_at)
             VALUES ($1, $2, 'active', 0, $3, $3) ON CONFLICT DO NOTHING",
        ))
        .bind(new_id)
        .bind(org_id)
        .bind(stamp(now))
        .execute(self.pool())
        .await?;
        self.subscription_where("org_id", org_id)
            .await?
            .ok_or_else(|| super::StoreError::NotFound("subscription".to_owned()))
    }

    /// A subscription by its id.
    pub async fn subscription(&self, id: &str) -> StoreResult<Option<SubscriptionRecord>> {
        self.subscription_where("id", id).await
    }

    async fn subscription_where(
        &self,
        column: &str,
        value: &str,
    ) -> StoreResult<Option<SubscriptionRecord>> {
        let Some(row) = sqlx::query(&self.sql(&format!(
            "SELECT {COLUMNS} FROM billing_subscriptions WHERE {column} = $1"
        )))
        .bind(value)
        .fetch_optional(self.pool())
        .await?
        else {
            return Ok(None);
        };
        let d = Decoder::new(&row, "billing_subscriptions", &["id"]);
        let id: String = d.get("id")?;
        let addons = sqlx::query(&self.sql(
            "SELECT bundle_id, quantity FROM billing_addons WHERE subscription_id = $1 ORDER BY bundle_id",
        ))
        .bind(&id)
        .fetch_all(self.pool())
        .await?
        .iter()
        .map(|row| {
            let d = Decoder::new(row, "billing_addons", &["bundle_id"]);
            Ok((d.get("bundle_id")?, d.get("quantity")?))
        })
        .collect::<StoreResult<Vec<(String, i64)>>>()?;
        Ok(Some(SubscriptionRecord {
            org_id: d.get("org_id")?,
            status: d.get("status")?,
            version: d.get("version")?,
            granted_features: d.get("granted_features")?,
            created_at: d.stamp("created_at")?,
            updated_at: d.stamp("updated_at")?,
            addons,
            id,
        }))
    }
}
