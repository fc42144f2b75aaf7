//! The audit trail's rows: the serialized append, queries, chain reads and pruning.

use audit_chain::{seal, AuditEvent, ChainHead, SealedEvent, GENESIS_HASH};
use chrono::{DateTime, Utc};

use super::decode::Decoder;
use super::{stamp, Dialect, Store, StoreError, StoreResult};

/// Filters of `GET /audit`.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    /// Events of this organization: its own (`orgId`) or operated on (`affectedOrgId`).
    pub org_id: Option<String>,
    /// Exact action.
    pub action: Option<String>,
    /// Exact actor.
    pub actor_id: Option<String>,
    /// Exact target type.
    pub target_type: Option<String>,
    /// Exact target id.
    pub target_id: Option<String>,
    /// Exact outcome.
    pub outcome: Option<String>,
    /// `createdAt` at or after.
    pub from: Option<DateTime<Utc>>,
    /// `createdAt` before.
    pub to: Option<DateTime<Utc>>,
}

const COLUMNS: &str = "id, chain_key, seq, action, actor_id, actor_email, org_id, affected_org_id, target_type, target_id,
    details, outcome, occurred_at, created_at, service, idempotency_key, redaction_version, prev_hash, hash";

fn event_from_row(row: &sqlx::any::AnyRow) -> StoreResult<SealedEvent> {
    let d = Decoder::new(row, "audit_events", &["id"]);
    let seq: i64 = d.get("seq")?;
    Ok(SealedEvent {
        id: d.get("id")?,
        seq: u64::try_from(seq)
            .map_err(|_| d.reject("seq", format_args!("`{seq}` is negative")))?,
        chain_key: d.get("chain_key")?,
        action: d.get("action")?,
        actor_id: d.get("actor_id")?,
        actor_email: d.get("actor_email")?,
        org_id: d.get("org_id")?,
        affected_org_id: d.get("affected_org_id")?,
        target_type: d.get("target_type")?,
        target_id: d.get("target_id")?,
        details: d.json("details")?,
        outcome: d.get("outcome")?,
        occurred_at: d.stamp("occurred_at")?,
        created_at: d.stamp("created_at")?,
        service: d.get("service")?,
        idempotency_key: d.get("idempotency_key")?,
        redaction_version: d.u32("redaction_version")?,
        prev_hash: d.get("prev_hash")?,
        hash: d.get("hash")?,
    })
}

fn key_reused(key: &str) -> StoreError {
    StoreError::Conflict(format!(
        "the Idempotency-Key `{key}` was already used by this service for a different event"
    ))
}

impl Store {
    /// Appends an event to its chain: under the chain head's lock, returns the stored
    /// row for an `idempotencyKey` seen before (and appends nothing), else seals the
    /// event after the head and stores it. Returns the row and whether it is new.
    pub async fn append_audit(
        &self,
        event: AuditEvent,
        now: DateTime<Utc>,
    ) -> StoreResult<(SealedEvent, bool)> {
        let Some(key) = event.idempotency_key.clone() else {
            return self.append_once(event, now).await;
        };
        let incoming = event.clone();
        match self.append_once(event, now).await {
            Err(StoreError::Conflict(_)) => {
                // The same service sent the same key at the same moment (possibly for
                // another chain): the unique index kept one. A redelivery gets that
                // row; another event under the key is refused.
                let stored = self.audit_by_key(incoming.service.as_deref(), &key).await?;
                match stored {
                    Some(row) if row.records(&incoming) => Ok((row, false)),
                    _ => Err(key_reused(&key)),
                }
            }
            other => other,
        }
    }

    async fn append_once(
        &self,
        event: AuditEvent,
        now: DateTime<Utc>,
    ) -> StoreResult<(SealedEvent, bool)> {
        let mut tx = self.pool().begin().await?;
        let appended = self.append_in(&mut tx, event, now).await?;
        if appended.1 {
            tx.commit().await?;
        } else {
            tx.rollback().await?;
        }
        Ok(appended)
    }

    /// The append, inside the caller's transaction (the ingest's own, or the relay's,
    /// which also deletes the outbox row).
    pub(crate) async fn append_in(
        &self,
        tx: &mut sqlx::AnyConnection,
        event: AuditEvent,
        now: DateTime<Utc>,
    ) -> StoreResult<(SealedEvent, bool)> {
        let chain_key = event.chain_key().to_owned();
        // One statement creates the head if missing and locks it: an upsert that
        // updates takes the row lock on PostgreSQL, and a write takes SQLite's write
        // lock (waiting its busy timeout). Everything after runs under that lock.
        let head = sqlx::query(&self.sql(
            "INSERT INTO audit_chain_heads (chain_key, seq, hash, created_at) VALUES ($1, 0, $2, NULL)
             ON CONFLICT (chain_key) DO UPDATE SET chain_key = excluded.chain_key
             RETURNING seq, hash, created_at",
        ))
        .bind(&chain_key)
        .bind(GENESIS_HASH)
        .fetch_one(&mut *tx)
        .await?;
        if let Some(key) = &event.idempotency_key {
            // Keys belong to the service that sent them; checked under the head's lock.
            let stored = sqlx::query(&self.sql(&format!(
                "SELECT {COLUMNS} FROM audit_events WHERE service = $1 AND idempotency_key = $2"
            )))
            .bind(&event.service)
            .bind(key)
            .fetch_optional(&mut *tx)
            .await?;
            if let Some(row) = stored {
                let row = event_from_row(&row)?;
                // Only a redelivery of the same event is answered with its row: never
                // a row of another chain, never another event's.
                return if row.records(&event) {
                    Ok((row, false))
                } else {
                    Err(key_reused(key))
                };
            }
        }
        let d = Decoder::new(&head, "audit_chain_heads", &[]);
        let seq: i64 = d.get("seq")?;
        let head = ChainHead {
            chain_key: chain_key.clone(),
            seq: u64::try_from(seq)
                .map_err(|_| d.reject("seq", format_args!("`{seq}` is negative")))?,
            hash: d.get("hash")?,
            created_at: d.opt_stamp("created_at")?,
        };
        let (row, _) = seal(&head, event, now).map_err(|e| StoreError::Invalid(e.to_string()))?;
        // On PostgreSQL the row and the new head go in one statement; SQLite has no
        // data-modifying CTE, so it takes two.
        let insert = format!(
            "INSERT INTO audit_events ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)"
        );
        let advance = "UPDATE audit_chain_heads SET seq = $3, hash = $19, created_at = $14 WHERE chain_key = $2";
        let statements = match self.dialect() {
            Dialect::Postgres => vec![format!("WITH inserted AS ({insert}) {advance}")],
            Dialect::Sqlite => vec![insert, advance.to_owned()],
        };
        for statement in statements {
            sqlx::query(&self.sql(&statement))
                .bind(&row.id)
                .bind(&row.chain_key)
                .bind(i64::try_from(row.seq).unwrap_or(i64::MAX))
                .bind(&row.action)
                .bind(&row.actor_id)
                .bind(&row.actor_email)
                .bind(&row.org_id)
                .bind(&row.affected_org_id)
                .bind(&row.target_type)
                .bind(&row.target_id)
                .bind(row.details.to_string())
                .bind(&row.outcome)
                .bind(stamp(row.occurred_at))
                .bind(stamp(row.created_at))
                .bind(&row.service)
                .bind(&row.idempotency_key)
                .bind(i64::from(row.redaction_version))
                .bind(&row.prev_hash)
                .bind(&row.hash)
                .execute(&mut *tx)
                .await?;
        }
        Ok((row, true))
    }

    /// The row a service stored under an idempotency key.
    pub async fn audit_by_key(
        &self,
        service: Option<&str>,
        key: &str,
    ) -> StoreResult<Option<SealedEvent>> {
        let row = sqlx::query(&self.sql(&format!(
            "SELECT {COLUMNS} FROM audit_events WHERE service = $1 AND idempotency_key = $2"
        )))
        .bind(service)
        .bind(key)
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(event_from_row).transpose()
    }

    /// A page of events matching `filter`, newest first (or oldest with `ascending`),
    /// and how many match.
    pub async fn audit_events(
        &self,
        filter: &AuditFilter,
        limit: u32,
        offset: u64,
        ascending: bool,
    ) -> StoreResult<(Vec<SealedEvent>, u64)> {
        let mut clauses: Vec<String> = Vec::new();
        let mut binds: Vec<String> = Vec::new();
        let mut add = |clause: &str, value: String| {
            binds.push(value);
            clauses.push(clause.replace('#', &format!("${}", binds.len())));
        };
        if let Some(org) = &filter.org_id {
            add("(org_id = # OR affected_org_id = #)", org.clone());
        }
        for (column, value) in [
            ("action", &filter.action),
            ("actor_id", &filter.actor_id),
            ("target_type", &filter.target_type),
            ("target_id", &filter.target_id),
            ("outcome", &filter.outcome),
        ] {
            if let Some(value) = value {
                add(&format!("{column} = #"), value.clone());
            }
        }
        if let Some(from) = filter.from {
            add("created_at >= #", stamp(from));
        }
        if let Some(to) = filter.to {
            add("created_at < #", stamp(to));
        }
        let condition = if clauses.is_empty() {
            "1 = 1".to_owned()
        } else {
            clauses.join(" AND ")
        };
        let order = if ascending { "ASC" } else { "DESC" };
        let binds: Vec<Option<String>> = binds.into_iter().map(Some).collect();
        let order_by = format!("created_at {order}, chain_key {order}, seq {order}");
        let (rows, total) = self
            .page(
                (COLUMNS, "audit_events", &condition, &order_by),
                &binds,
                limit,
                offset,
            )
            .await?;
        let events = rows
            .iter()
            .map(event_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((events, total))
    }

    /// Up to `limit` rows of a chain with `seq > after`, in `seq` order: a chain is
    /// read in batches so that memory does not grow with it.
    pub async fn chain_batch(
        &self,
        chain_key: &str,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<SealedEvent>> {
        let rows = sqlx::query(&self.sql(&format!(
            "SELECT {COLUMNS} FROM audit_events WHERE chain_key = $1 AND seq > $2 ORDER BY seq LIMIT $3"
        )))
        .bind(chain_key)
        .bind(i64::try_from(after).unwrap_or(i64::MAX))
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(event_from_row).collect()
    }

    /// Deletes rows created before `cutoff`. `createdAt` never decreases along a chain,
    /// so what goes is a prefix of each chain. Returns how many rows went.
    pub async fn prune_audit(&self, cutoff: DateTime<Utc>) -> StoreResult<u64> {
        let done = sqlx::query(&self.sql("DELETE FROM audit_events WHERE created_at < $1"))
            .bind(stamp(cutoff))
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected())
    }
}
