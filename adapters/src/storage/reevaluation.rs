//! The re-evaluation queue: events written in the transaction of a change (an
//! inventory mutation, a rule change); on the consumer side, an entity's events claimed together (so
//! a burst of edits is evaluated once), `FOR UPDATE SKIP LOCKED` on PostgreSQL, each
//! claim fenced by its lease; done events deleted, failed ones retried later or dead
//! with their last error.

use chrono::{DateTime, Utc};
use sqlx::{AnyConnection, Row};

use super::{
    compliance_text, entity_table, placeholders, stamp, Dialect, Store, StoreError, StoreResult,
};

/// The entity of an event that stands for all the organization's entities of its
/// target (a rule or subscription change): the worker starts a scan for it.
pub const EVERYTHING: &str = "*";

/// An entity's pending events, claimed together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedEntity {
    /// The organization the events belong to (the tenant scope of their processing).
    pub org_id: String,
    /// `plugin` or `pipeline`.
    pub target: String,
    /// The entity.
    pub entity_id: String,
    /// The events claimed.
    pub ids: Vec<i64>,
    /// The most attempts any of them has had.
    pub attempts: u32,
    /// The claim's lease.
    pub lease_until: DateTime<Utc>,
}

/// The queue's state, for `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueDepth {
    /// Events waiting (pending or being processed).
    pub waiting: u64,
    /// Dead events.
    pub dead: u64,
    /// When the oldest waiting event was queued.
    pub oldest: Option<DateTime<Utc>>,
}

impl Store {
    /// Queues an entity for re-evaluation, in the caller's transaction.
    pub(crate) async fn enqueue_reevaluation(
        &self,
        conn: &mut AnyConnection,
        org_id: &str,
        target: &str,
        entity_id: &str,
        reason: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(&self.sql(
            "INSERT INTO reevaluation_queue (org_id, target, entity_id, reason, created_at) VALUES ($1, $2, $3, $4, $5)",
        ))
        .bind(org_id)
        .bind(target)
        .bind(entity_id)
        .bind(reason)
        .bind(stamp(now))
        .execute(&mut *conn)
        .await?;
        Ok(())
    }

    /// Queues a rule change, in the change's transaction: one event per organization
    /// it can affect (the rule's own, its teams, the organizations subscribed to it,
    /// for a published rule) that has entities of the rule's target, with the entity
    /// [`EVERYTHING`]. The
    /// worker turns each into a scan of that organization's entities of the target:
    /// the queue grows with the organizations a change reaches, never with their
    /// entities.
    pub(crate) async fn enqueue_rule_change(
        &self,
        conn: &mut AnyConnection,
        (org_id, rule_id, target): (&str, &str, &str),
        reason: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let table = entity_table(target)?;
        sqlx::query(&self.sql(&format!(
            "INSERT INTO reevaluation_queue (org_id, target, entity_id, reason, created_at) \
             SELECT id, $3, '*', $4, $5 FROM organizations o WHERE (id = $1 OR parent_org_id = $1 \
             OR id IN (SELECT org_id FROM subscriptions WHERE rule_id = $2)) \
             AND EXISTS (SELECT 1 FROM {table} t WHERE t.org_id = o.id)"
        )))
        .bind(org_id)
        .bind(rule_id)
        .bind(target)
        .bind(reason)
        .bind(stamp(now))
        .execute(&mut *conn)
        .await?;
        Ok(())
    }

    /// Queues a change of the organization's subscriptions to `rule_ids` (activated,
    /// deactivated, pinned, unsubscribed), in the change's transaction: one event per
    /// target of those rules it has entities of ([`EVERYTHING`]).
    pub(crate) async fn enqueue_subscription_change(
        &self,
        conn: &mut AnyConnection,
        org_id: &str,
        rule_ids: &[String],
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        if rule_ids.is_empty() {
            return Ok(());
        }
        let sql = self.sql(&format!(
            "INSERT INTO reevaluation_queue (org_id, target, entity_id, reason, created_at) \
             SELECT DISTINCT $1, target, '*', 'subscription.change', $2 FROM rules r WHERE id IN ({}) \
             AND ((r.target = 'pipeline' AND EXISTS (SELECT 1 FROM pipelines WHERE org_id = $1)) \
             OR (r.target = 'plugin' AND EXISTS (SELECT 1 FROM plugins WHERE org_id = $1)))",
            placeholders(3, rule_ids.len())
        ));
        let mut query = sqlx::query(&sql).bind(org_id.to_owned()).bind(stamp(now));
        for id in rule_ids {
            query = query.bind(id.clone());
        }
        query.execute(&mut *conn).await?;
        Ok(())
    }

    /// How many re-evaluation events wait for the organization.
    pub async fn pending_reevaluations(&self, org_id: &str) -> StoreResult<u64> {
        let n: i64 = sqlx::query(
            &self.sql("SELECT COUNT(*) AS n FROM reevaluation_queue WHERE org_id = $1"),
        )
        .bind(org_id)
        .fetch_one(self.pool())
        .await?
        .try_get("n")?;
        Ok(n.unsigned_abs())
    }

    /// Claims the oldest due entity's events (pending, or processing under an
    /// expired lease) until `lease_until`.
    pub async fn claim_reevaluation(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<Option<ClaimedEntity>> {
        let lock = match self.dialect() {
            Dialect::Postgres => " FOR UPDATE SKIP LOCKED",
            Dialect::Sqlite => "",
        };
        let due = "((status = 'pending' AND run_after <= $1) OR (status = 'processing' AND lease_until < $1))";
        // One statement, a write from the start: SQLite takes its write lock at once
        // (waiting its busy timeout) instead of failing to upgrade a read.
        // An entity another claim is judging (its events processing under a live
        // lease) is not claimed: a new event of it waits for that claim to end.
        let busy = "EXISTS (SELECT 1 FROM reevaluation_queue b WHERE b.org_id = q.org_id \
             AND b.target = q.target AND b.entity_id = q.entity_id \
             AND b.status = 'processing' AND b.lease_until >= $1)";
        let claimed = sqlx::query(&self.sql(&format!(
            "UPDATE reevaluation_queue SET status = 'processing', lease_until = $2 \
             WHERE {due} AND (org_id, target, entity_id) = (\
             SELECT q.org_id, q.target, q.entity_id FROM reevaluation_queue q WHERE {due} AND NOT {busy} \
             ORDER BY q.id LIMIT 1{lock}) \
             RETURNING id, attempts, org_id, target, entity_id"
        )))
        .bind(stamp(now))
        .bind(stamp(lease_until))
        .fetch_all(self.pool())
        .await?;
        let Some(first) = claimed.first() else {
            return Ok(None);
        };
        let org_id: String = first.try_get("org_id")?;
        let target: String = first.try_get("target")?;
        let entity_id: String = first.try_get("entity_id")?;
        let mut ids = Vec::with_capacity(claimed.len());
        let mut attempts = 0u32;
        for row in &claimed {
            ids.push(row.try_get::<i64, _>("id")?);
            let n = row.try_get::<i64, _>("attempts")?;
            attempts = attempts.max(u32::try_from(n).unwrap_or(u32::MAX));
        }
        if ids.is_empty() {
            return Ok(None);
        }
        Ok(Some(ClaimedEntity {
            org_id,
            target,
            entity_id,
            ids,
            attempts,
            lease_until,
        }))
    }

    /// Removes the claimed events once processed (if the claim still holds).
    pub async fn finish_reevaluation(&self, claimed: &ClaimedEntity) -> StoreResult<()> {
        let sql = format!(
            "DELETE FROM reevaluation_queue WHERE lease_until = $1 AND id IN ({})",
            placeholders(2, claimed.ids.len())
        );
        let sql = self.sql(&sql);
        let mut query = sqlx::query(&sql).bind(stamp(claimed.lease_until));
        for id in &claimed.ids {
            query = query.bind(*id);
        }
        query.execute(self.pool()).await?;
        Ok(())
    }

    /// Puts the claimed events back to be retried at `run_after`, or dead once they
    /// have had `max_attempts`; keeps `error`.
    pub async fn retry_reevaluation(
        &self,
        claimed: &ClaimedEntity,
        run_after: DateTime<Utc>,
        max_attempts: u32,
        error: &str,
    ) -> StoreResult<()> {
        let sql = format!(
            "UPDATE reevaluation_queue SET attempts = attempts + 1, \
             status = CASE WHEN attempts + 1 >= $1 THEN 'dead' ELSE 'pending' END, \
             run_after = $2, last_error = $3, lease_until = NULL WHERE lease_until = $4 AND id IN ({})",
            placeholders(5, claimed.ids.len())
        );
        let sql = self.sql(&sql);
        let mut query = sqlx::query(&sql)
            .bind(i64::from(max_attempts))
            .bind(stamp(run_after))
            .bind(error)
            .bind(stamp(claimed.lease_until));
        for id in &claimed.ids {
            query = query.bind(*id);
        }
        query.execute(self.pool()).await?;
        Ok(())
    }

    /// The queue's depth, dead events and oldest waiting event.
    pub async fn reevaluation_depth(&self) -> StoreResult<QueueDepth> {
        let row = sqlx::query(
            "SELECT SUM(CASE WHEN status = 'dead' THEN 0 ELSE 1 END) AS waiting, \
             SUM(CASE WHEN status = 'dead' THEN 1 ELSE 0 END) AS dead, \
             MIN(CASE WHEN status = 'dead' THEN NULL ELSE created_at END) AS oldest FROM reevaluation_queue",
        )
        .fetch_one(self.pool())
        .await?;
        let count = |name: &str| -> StoreResult<u64> {
            Ok(row
                .try_get::<Option<i64>, _>(name)?
                .unwrap_or(0)
                .unsigned_abs())
        };
        let oldest = row
            .try_get::<Option<String>, _>("oldest")?
            .map(|text| {
                DateTime::parse_from_rfc3339(&text)
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|e| StoreError::Corrupt(format!("reevaluation_queue.created_at: {e}")))
            })
            .transpose()?;
        Ok(QueueDepth {
            waiting: count("waiting")?,
            dead: count("dead")?,
            oldest,
        })
    }

    /// Keeps a re-evaluated entity's compliance result (`pipeline` or `plugin`); the
    /// entity's own `updatedAt` stays (a judgement is not an edit).
    pub async fn set_compliance(
        &self,
        (org_id, target, id): (&str, &str, &str),
        compliance: &compliance_core::Compliance,
    ) -> StoreResult<()> {
        let table = entity_table(target)?;
        sqlx::query(&self.sql(&format!(
            "UPDATE {table} SET compliance = $3 WHERE org_id = $1 AND id = $2"
        )))
        .bind(org_id)
        .bind(id)
        .bind(compliance_text(compliance)?)
        .execute(self.pool())
        .await?;
        Ok(())
    }
}
