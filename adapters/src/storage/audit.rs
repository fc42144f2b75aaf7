//! The audit trail's rows: the serialized append, queries, chain reads and pruning.

use audit_chain::{seal, AuditEvent, ChainHead, SealedEvent, GENESIS_HASH};
use chrono::{DateTime, Utc};

use super::decode::Decoder;
use super::unit::unit_of_work;
use super::{stamp, Cell, Dialect, Rows, Store, StoreError, StoreResult};

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

/// A sealed row's values, in the order of [`COLUMNS`].
fn row_cells(row: &SealedEvent) -> [Cell; 19] {
    [
        Cell::from(row.id.as_str()),
        Cell::from(row.chain_key.as_str()),
        Cell::from(i64::try_from(row.seq).unwrap_or(i64::MAX)),
        Cell::from(row.action.as_str()),
        Cell::from(row.actor_id.as_str()),
        Cell::from(row.actor_email.clone()),
        Cell::from(row.org_id.as_str()),
        Cell::from(row.affected_org_id.clone()),
        Cell::from(row.target_type.clone()),
        Cell::from(row.target_id.clone()),
        Cell::from(row.details.to_string()),
        Cell::from(row.outcome.clone()),
        Cell::from(stamp(row.occurred_at)),
        Cell::from(stamp(row.created_at)),
        Cell::from(row.service.clone()),
        Cell::from(row.idempotency_key.clone()),
        Cell::from(i64::from(row.redaction_version)),
        Cell::from(row.prev_hash.as_str()),
        Cell::from(row.hash.as_str()),
    ]
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
        unit_of_work!(self, |tx| -> StoreError {
            let appended = self.append_in(&mut tx.tx, event.clone(), now).await?;
            if !appended.1 {
                // A redelivery answered with its row: nothing to keep.
                tx.abandon();
            }
            Ok(appended)
        })
    }

    /// The append, inside the caller's transaction (the ingest's own, or the relay's,
    /// which also deletes the outbox row).
    pub(crate) async fn append_in(
        &self,
        tx: &mut sqlx::AnyConnection,
        event: AuditEvent,
        now: DateTime<Utc>,
    ) -> StoreResult<(SealedEvent, bool)> {
        let head = self.lock_head(tx, event.chain_key()).await?;
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

    /// Creates the chain's head if missing and locks it, in one statement: an upsert
    /// that updates takes the row lock on PostgreSQL, and a write takes SQLite's write
    /// lock (waiting its busy timeout). Everything after runs under that lock.
    async fn lock_head(
        &self,
        tx: &mut sqlx::AnyConnection,
        chain_key: &str,
    ) -> StoreResult<ChainHead> {
        let head = sqlx::query(&self.sql(
            "INSERT INTO audit_chain_heads (chain_key, seq, hash, created_at) VALUES ($1, 0, $2, NULL)
             ON CONFLICT (chain_key) DO UPDATE SET chain_key = excluded.chain_key
             RETURNING seq, hash, created_at",
        ))
        .bind(chain_key)
        .bind(GENESIS_HASH)
        .fetch_one(&mut *tx)
        .await?;
        let d = Decoder::new(&head, "audit_chain_heads", &[]);
        let seq: i64 = d.get("seq")?;
        Ok(ChainHead {
            chain_key: chain_key.to_owned(),
            seq: u64::try_from(seq)
                .map_err(|_| d.reject("seq", format_args!("`{seq}` is negative")))?,
            hash: d.get("hash")?,
            created_at: d.opt_stamp("created_at")?,
        })
    }

    /// Appends events that arrived together, in one transaction: the heads of their
    /// chains locked once each (in the order of their keys, so that two groups never
    /// wait for each other), the events sealed in their order of arrival, their rows
    /// written in one statement and each head advanced once. An event's outcome is
    /// that of [`Store::append_audit`]: a key seen before (stored, or earlier in the
    /// group) answers the first row for the same event, and is refused for another;
    /// an event that does not seal is refused alone. Anything else (a key another
    /// replica stores at this moment) fails the whole group, and nothing of it is
    /// stored: the caller then appends its events one by one.
    pub async fn append_audit_group(
        &self,
        events: Vec<AuditEvent>,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<StoreResult<(SealedEvent, bool)>>> {
        use std::collections::{BTreeMap, BTreeSet, HashMap};
        let mut outcomes: Vec<Option<StoreResult<(SealedEvent, bool)>>> =
            (0..events.len()).map(|_| None).collect();
        // The keys of the group, per service.
        let mut keys: BTreeMap<Option<String>, BTreeSet<String>> = BTreeMap::new();
        for event in &events {
            if let Some(key) = &event.idempotency_key {
                keys.entry(event.service.clone())
                    .or_default()
                    .insert(key.clone());
            }
        }
        let mut chains: BTreeMap<String, Vec<(usize, AuditEvent)>> = BTreeMap::new();
        for (i, event) in events.into_iter().enumerate() {
            chains
                .entry(event.chain_key().to_owned())
                .or_default()
                .push((i, event));
        }
        unit_of_work!(self, |tx| -> super::StoreError {
            let mut locked = self.lock_heads(&mut tx.tx, chains.keys()).await?;
            let mut rows = Rows::new(19);
            let mut heads = Rows::new(4);
            // Keys to the row stored or sealed first under them: the stored ones are read
            // under the first head's lock (as a single append reads its key under its
            // head's), the group's own are added as they are sealed.
            let mut known: Option<HashMap<(Option<String>, String), SealedEvent>> = None;
            // By reference: a unit rolled back for a conflict runs again on the same
            // events.
            for (chain_key, arrived) in &chains {
                let mut head = locked.remove(chain_key).ok_or_else(|| {
                    StoreError::Other(format!("the head of {chain_key} was not locked"))
                })?;
                let known = match &mut known {
                    Some(known) => known,
                    None => known.insert(self.audits_by_keys(&mut tx.tx, &keys).await?),
                };
                let before = head.seq;
                for (i, event) in arrived.iter().cloned() {
                    let earlier = event
                        .idempotency_key
                        .as_ref()
                        .and_then(|key| known.get(&(event.service.clone(), key.clone())));
                    let outcome = match earlier {
                        Some(row) if row.records(&event) => Ok((row.clone(), false)),
                        Some(_) => Err(key_reused(
                            event.idempotency_key.as_deref().unwrap_or_default(),
                        )),
                        None => match seal(&head, event, now) {
                            Ok((row, next)) => {
                                head = next;
                                if let Some(key) = &row.idempotency_key {
                                    known.insert((row.service.clone(), key.clone()), row.clone());
                                }
                                rows.push(row_cells(&row));
                                Ok((row, true))
                            }
                            Err(e) => Err(StoreError::Invalid(e.to_string())),
                        },
                    };
                    if let Some(slot) = outcomes.get_mut(i) {
                        *slot = Some(outcome);
                    }
                }
                if head.seq != before {
                    heads.push([
                        Cell::from(head.chain_key.as_str()),
                        Cell::from(i64::try_from(head.seq).unwrap_or(i64::MAX)),
                        Cell::from(head.hash.as_str()),
                        Cell::from(head.created_at.map(stamp)),
                    ]);
                }
            }
            rows.insert(
                self,
                &mut tx.tx,
                &format!("INSERT INTO audit_events ({COLUMNS})"),
                "",
            )
            .await?;
            heads
                .insert(
                    self,
                    &mut tx.tx,
                    "INSERT INTO audit_chain_heads (chain_key, seq, hash, created_at)",
                    "ON CONFLICT (chain_key) DO UPDATE SET seq = excluded.seq, hash = excluded.hash, created_at = excluded.created_at",
                )
                .await?;
            Ok(())
        })?;
        Ok(outcomes
            .into_iter()
            .map(|o| {
                o.unwrap_or_else(|| Err(StoreError::Other("an event was not appended".to_owned())))
            })
            .collect())
    }

    /// Creates the heads of `chain_keys` if missing and locks them, in one statement
    /// (in the order of the keys, so that two groups never wait for each other).
    async fn lock_heads(
        &self,
        tx: &mut sqlx::AnyConnection,
        chain_keys: impl Iterator<Item = &String>,
    ) -> StoreResult<std::collections::HashMap<String, ChainHead>> {
        let mut wanted = Rows::new(2);
        for key in chain_keys {
            wanted.push([Cell::from(key.as_str()), Cell::from(GENESIS_HASH)]);
        }
        let rows = wanted
            .fetch(
                self,
                tx,
                "INSERT INTO audit_chain_heads (chain_key, hash, seq, created_at) SELECT v.column1, v.column2, 0, NULL FROM (",
                ") AS v WHERE true ORDER BY v.column1 ON CONFLICT (chain_key) DO UPDATE SET chain_key = excluded.chain_key RETURNING chain_key, seq, hash, created_at",
            )
            .await?;
        rows.iter()
            .map(|row| {
                let d = Decoder::new(row, "audit_chain_heads", &["chain_key"]);
                let chain_key: String = d.get("chain_key")?;
                let seq: i64 = d.get("seq")?;
                let head = ChainHead {
                    chain_key: chain_key.clone(),
                    seq: u64::try_from(seq)
                        .map_err(|_| d.reject("seq", format_args!("`{seq}` is negative")))?,
                    hash: d.get("hash")?,
                    created_at: d.opt_stamp("created_at")?,
                };
                Ok((chain_key, head))
            })
            .collect()
    }

    /// The rows services stored under these keys, inside a transaction: one query
    /// per service.
    async fn audits_by_keys(
        &self,
        tx: &mut sqlx::AnyConnection,
        keys: &std::collections::BTreeMap<Option<String>, std::collections::BTreeSet<String>>,
    ) -> StoreResult<std::collections::HashMap<(Option<String>, String), SealedEvent>> {
        let mut found = std::collections::HashMap::new();
        for (service, keys) in keys {
            let statement = self.sql(&format!(
                "SELECT {COLUMNS} FROM audit_events WHERE service = $1 AND idempotency_key IN ({})",
                super::placeholders(2, keys.len())
            ));
            let mut query = sqlx::query(&statement).bind(service.clone());
            for key in keys {
                query = query.bind(key.clone());
            }
            for row in query.fetch_all(&mut *tx).await? {
                let row = event_from_row(&row)?;
                if let Some(key) = row.idempotency_key.clone() {
                    found.insert((row.service.clone(), key), row);
                }
            }
        }
        Ok(found)
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
