//! The re-evaluation queue: events written in the transaction of a change (an
//! inventory mutation, a rule change); on the consumer side, an entity's events claimed together (so
//! a burst of edits is evaluated once), `FOR UPDATE SKIP LOCKED` on PostgreSQL, each
//! claim fenced by its lease; done events deleted, failed ones retried later or dead
//! with their last error.

use chrono::{DateTime, Utc};
use sqlx::{AnyConnection, Row};

use super::judgements::{JudgementSource, Kept};
use super::{entity_table, placeholders, stamp, Dialect, Store, StoreError, StoreResult};

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

    /// Claims the due events (pending, or processing under an expired lease) of up to
    /// `limit` entities until `lease_until`, in one statement: the entities of the
    /// oldest due events (looked for among the oldest `2 × limit`), every due event
    /// of each, grouped by entity, oldest first. An entity another claim holds (its events processing under a live
    /// lease) is not claimed; a new event of it waits for that claim to end.
    pub async fn claim_reevaluations(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<ClaimedEntity>> {
        let lock = match self.dialect() {
            Dialect::Postgres => " FOR UPDATE SKIP LOCKED",
            Dialect::Sqlite => "",
        };
        let due = |t: &str| {
            format!(
                "(({t}.status = 'pending' AND {t}.run_after <= $1) OR ({t}.status = 'processing' AND {t}.lease_until < $1))"
            )
        };
        let same = |t: &str| {
            format!(
                "{t}.org_id = q.org_id AND {t}.target = q.target AND {t}.entity_id = q.entity_id"
            )
        };
        let busy = format!(
            "EXISTS (SELECT 1 FROM reevaluation_queue b WHERE {} \
             AND b.status = 'processing' AND b.lease_until >= $1)",
            same("b")
        );
        // Only an entity's oldest due event stands for it: two claims that meet on an
        // entity lock the same row, so one of them skips the entity instead of both
        // waiting on each other's rows.
        let earlier = format!(
            "EXISTS (SELECT 1 FROM reevaluation_queue e WHERE {} AND e.id < q.id AND {})",
            same("e"),
            due("e")
        );
        // One statement, a write from the start: SQLite takes its write lock at once
        // (waiting its busy timeout) instead of failing to upgrade a read. The
        // conditions are weighed on the oldest due events only (two per entity
        // wanted), so the statement's cost stays bounded whatever the queue's depth
        // and whatever plan the statistics of a fast-filled table lead to. Only the
        // chosen events are locked (each its entity's oldest due one): a claim never
        // holds a row of an entity another claim chose.
        let rows = sqlx::query(&self.sql(&format!(
            "WITH candidates AS MATERIALIZED (\
             SELECT q.id, q.org_id, q.target, q.entity_id FROM reevaluation_queue q \
             WHERE {} ORDER BY q.id LIMIT $4), \
             chosen AS MATERIALIZED (\
             SELECT r.org_id, r.target, r.entity_id FROM reevaluation_queue r WHERE r.id IN (\
             SELECT q.id FROM candidates q WHERE NOT {busy} AND NOT {earlier}) \
             ORDER BY r.id LIMIT $3{lock}) \
             UPDATE reevaluation_queue SET status = 'processing', lease_until = $2 \
             WHERE {} AND (org_id, target, entity_id) IN (SELECT org_id, target, entity_id FROM chosen) \
             RETURNING id, attempts, org_id, target, entity_id",
            due("q"),
            due("reevaluation_queue"),
        )))
        .bind(stamp(now))
        .bind(stamp(lease_until))
        .bind(i64::from(limit))
        .bind(i64::from(limit).saturating_mul(2))
        .fetch_all(self.pool())
        .await?;
        let mut claimed: Vec<ClaimedEntity> = Vec::new();
        for row in &rows {
            let org_id: String = row.try_get("org_id")?;
            let target: String = row.try_get("target")?;
            let entity_id: String = row.try_get("entity_id")?;
            let id = row.try_get::<i64, _>("id")?;
            let attempts = row.try_get::<i64, _>("attempts")?;
            let attempts = u32::try_from(attempts).map_err(|_| {
                StoreError::Corrupt(format!(
                    "reevaluation_queue.attempts of event {id}: `{attempts}` is not a count"
                ))
            })?;
            let known = claimed
                .iter_mut()
                .find(|c| c.org_id == org_id && c.target == target && c.entity_id == entity_id);
            match known {
                Some(entity) => {
                    entity.ids.push(id);
                    entity.attempts = entity.attempts.max(attempts);
                }
                None => claimed.push(ClaimedEntity {
                    org_id,
                    target,
                    entity_id,
                    ids: vec![id],
                    attempts,
                    lease_until,
                }),
            }
        }
        for entity in &mut claimed {
            entity.ids.sort_unstable();
        }
        claimed.sort_by_key(|entity| entity.ids.first().copied());
        Ok(claimed)
    }

    /// Removes the events of every claimed entity once processed (each only if its
    /// claim's lease still holds), in one statement per lease and 500 events.
    pub async fn finish_reevaluations(&self, claimed: &[ClaimedEntity]) -> StoreResult<()> {
        let mut leases: Vec<DateTime<Utc>> = claimed.iter().map(|c| c.lease_until).collect();
        leases.sort_unstable();
        leases.dedup();
        for lease in &leases {
            let ids: Vec<i64> = claimed
                .iter()
                .filter(|c| c.lease_until == *lease)
                .flat_map(|c| c.ids.iter().copied())
                .collect();
            for chunk in ids.chunks(500) {
                self.delete_claimed(chunk, lease).await?;
            }
        }
        Ok(())
    }

    async fn delete_claimed(&self, ids: &[i64], lease_until: &DateTime<Utc>) -> StoreResult<()> {
        let sql = format!(
            "DELETE FROM reevaluation_queue WHERE lease_until = $1 AND id IN ({})",
            placeholders(2, ids.len())
        );
        let sql = self.sql(&sql);
        let mut query = sqlx::query(&sql).bind(stamp(*lease_until));
        for id in ids {
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

    /// Keeps the judgements of re-evaluated entities of one organization and target
    /// (their check-log rows); the entity's own `updatedAt` stays: a judgement is not
    /// an edit, and an entity whose judgement says the same is not rewritten.
    pub async fn keep_rejudged(
        &self,
        (org_id, target): (&str, &str),
        rows: &[Kept<'_>],
    ) -> StoreResult<()> {
        let mut conn = self.connection().await?;
        self.keep_judgements(&mut conn, (org_id, target), JudgementSource::Check, rows)
            .await?;
        conn.finish().await
    }
}

impl super::Transaction<'_> {
    /// Queues an entity for re-evaluation, as a step of the unit that changed it.
    pub async fn enqueue_reevaluation(
        &mut self,
        (org_id, target, entity_id): (&str, &str, &str),
        reason: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        self.store
            .enqueue_reevaluation(&mut self.tx, org_id, target, entity_id, reason, now)
            .await
    }
}
