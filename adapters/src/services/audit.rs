//! The audit trail as the API serves it: other services' events appended to a
//! chain, the query, a chain's verification (streamed in batches, with its signed
//! checkpoints), and the checkpoints themselves.

use audit_chain::{AuditEvent, SealedEvent};
use chrono::Utc;

use super::{ServiceError, ServiceResult};
use crate::replica::Appender;
use crate::storage::{unit_of_work, Store, StoreError};
pub use crate::storage::{AuditFilter, CheckpointRecord};

/// The rows a verification reads at a time.
pub const VERIFY_BATCH: u32 = 1_000;

/// Records the audit events of an action that changes nothing else (a render, a
/// test delivery, a refused sign-in): durable before the answer leaves.
pub async fn record(store: &Store, events: &[AuditEvent]) -> ServiceResult<()> {
    unit_of_work!(store, |tx| { Ok(tx.enqueue_audit(events).await?) })
}

/// Appends another service's event, once per idempotency key: (row, whether new),
/// sealed with the other events that arrive with it (`services::grouped`) and
/// answered after their commit. The action must be one a remote service may record.
pub async fn ingest(
    db: &Store,
    appender: &Appender,
    event: AuditEvent,
) -> ServiceResult<(SealedEvent, bool)> {
    audit_chain::check_remote_action(&event.action).map_err(|e| match e {
        audit_chain::ActionError::PlatformAuthority(_) => {
            ServiceError::Forbidden("a remote service cannot record a platform authority action")
        }
        other => ServiceError::invalid("action", other.to_string()),
    })?;
    let store = db.clone();
    let appended = appender
        .submit(event, move |events: Vec<AuditEvent>| {
            let store = store.clone();
            async move { append_group(&store, events).await }
        })
        .await
        .ok_or(ServiceError::Unavailable)?;
    Ok(appended?)
}

/// Appends events that arrived together (`services::grouped`) in one transaction;
/// when the group fails as a whole (a key another replica stores at this moment),
/// one by one, each with its own outcome.
async fn append_group(
    store: &Store,
    events: Vec<AuditEvent>,
) -> Vec<Result<(SealedEvent, bool), StoreError>> {
    match store.append_audit_group(events.clone(), Utc::now()).await {
        Ok(outcomes) => outcomes,
        Err(_) => {
            let mut outcomes = Vec::with_capacity(events.len());
            for event in events {
                outcomes.push(store.append_audit(event, Utc::now()).await);
            }
            outcomes
        }
    }
}

/// A page of events: (events, total).
pub async fn query(
    store: &Store,
    filter: &AuditFilter,
    (limit, offset, ascending): (u32, u64, bool),
) -> ServiceResult<(Vec<SealedEvent>, u64)> {
    Ok(store.audit_events(filter, limit, offset, ascending).await?)
}

/// A page of a chain's signed checkpoints, newest first, and the latest one:
/// (checkpoints, total, latest).
pub async fn checkpoints(
    store: &Store,
    chain: &str,
    limit: u32,
    offset: u64,
) -> ServiceResult<(Vec<CheckpointRecord>, u64, Option<CheckpointRecord>)> {
    let (items, total) = store.checkpoints(chain, limit, offset).await?;
    // Newest first: the first page already starts with the latest.
    let latest = match (offset, items.first()) {
        (0, first) => first.cloned(),
        _ => store.checkpoints(chain, 1, 0).await?.0.into_iter().next(),
    };
    Ok((items, total, latest))
}

/// What a verification answers: the chain's own verdict and, when checkpoints are
/// signed, the verdict of the chain against them; `ok` only when both hold.
#[derive(Debug, Clone)]
pub struct ChainReport {
    /// The chain links and every row re-hashes, and it agrees with its checkpoints.
    pub ok: bool,
    /// The hash chain alone.
    pub chain: audit_chain::Verification,
    /// The chain against its signed checkpoints (absent when checkpoints are off).
    pub checkpoints: Option<audit_chain::CheckpointVerdict>,
}

impl serde::Serialize for ChainReport {
    /// The chain's fields (`brokenAt`, `count`, ...), with `ok` for both verdicts and
    /// `checkpoints` beside them.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut value = serde_json::to_value(&self.chain).map_err(serde::ser::Error::custom)?;
        if let Some(object) = value.as_object_mut() {
            object.insert("ok".to_owned(), self.ok.into());
            if let Some(checkpoints) = &self.checkpoints {
                object.insert(
                    "checkpoints".to_owned(),
                    serde_json::to_value(checkpoints).map_err(serde::ser::Error::custom)?,
                );
            }
        }
        value.serialize(serializer)
    }
}

/// Streams a stored chain through the verifier in batches of [`VERIFY_BATCH`] (its
/// memory does not grow with the chain).
pub async fn verify_chain(
    store: &Store,
    chain: &str,
    checkpoints: Option<&audit_chain::NoteVerifier>,
) -> ServiceResult<ChainReport> {
    let mut check = match checkpoints {
        Some(key) => {
            let notes = store.checkpoint_notes(chain).await?;
            Some(audit_chain::CheckpointCheck::new(
                chain,
                notes.iter().map(String::as_str),
                key,
            ))
        }
        None => None,
    };
    let mut verifier = audit_chain::ChainVerifier::new();
    let mut after = 0;
    loop {
        let batch = store.chain_batch(chain, after, VERIFY_BATCH).await?;
        let Some(last) = batch.last() else { break };
        after = last.seq;
        let full = batch.len() == VERIFY_BATCH as usize;
        let mut intact = true;
        for row in &batch {
            if let Some(check) = &mut check {
                check.push(row);
            }
            if !verifier.push(row) {
                intact = false;
                break;
            }
        }
        if !intact || !full {
            break;
        }
    }
    let chain = verifier.finish();
    let checkpoints = check.map(audit_chain::CheckpointCheck::finish);
    Ok(ChainReport {
        ok: chain.ok && checkpoints.as_ref().is_none_or(|c| c.ok),
        chain,
        checkpoints,
    })
}

/// The most rows one export segment holds.
pub const MAX_EXPORT_SEGMENT: u32 = 10_000;

/// A segment of a chain as `compliance audit verify` and the console read it: the
/// rows after `after` (up to `limit`), and the newest signed checkpoint the segment
/// reaches (none when checkpoints are off or none is that old).
pub async fn export_segment(
    store: &Store,
    chain: &str,
    after: u64,
    limit: u32,
) -> ServiceResult<(Option<String>, Vec<SealedEvent>)> {
    let rows = store
        .chain_batch(chain, after, limit.clamp(1, MAX_EXPORT_SEGMENT))
        .await?;
    let reached = rows.last().map_or(0, |row| row.seq);
    let (recent, _) = store.checkpoints(chain, 100, 0).await?;
    let note = recent
        .into_iter()
        .find(|c| c.seq <= reached && rows.first().is_some_and(|first| c.seq >= first.seq))
        .map(|c| c.note);
    Ok((note, rows))
}
