//! Signed checkpoints of the audit chains: SQL only.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::decode::Decoder;
use super::{stamp, Store, StoreResult};

/// A stored checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointRecord {
    /// The chain.
    pub chain_key: String,
    /// Its last seq when signed.
    pub seq: u64,
    /// Its head hash then.
    pub hash: String,
    /// When it was signed.
    pub signed_at: DateTime<Utc>,
    /// The signed note.
    pub note: String,
}

/// A chain's head and its latest checkpoint, for the signer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointCandidate {
    /// The chain.
    pub chain_key: String,
    /// Its head.
    pub seq: u64,
    /// Its head hash.
    pub hash: String,
    /// Its latest checkpoint: seq and time.
    pub last: Option<(u64, DateTime<Utc>)>,
}

fn record_from_row(row: &sqlx::any::AnyRow) -> StoreResult<CheckpointRecord> {
    let d = Decoder::new(row, "audit_checkpoints", &["chain_key"]);
    let seq: i64 = d.get("seq")?;
    Ok(CheckpointRecord {
        chain_key: d.get("chain_key")?,
        seq: u64::try_from(seq).map_err(|_| d.reject("seq", "negative"))?,
        hash: d.get("hash")?,
        signed_at: d.stamp("signed_at")?,
        note: d.get("note")?,
    })
}

impl Store {
    /// Every chain whose head is past its latest checkpoint.
    pub async fn checkpoint_candidates(&self) -> StoreResult<Vec<CheckpointCandidate>> {
        let rows = sqlx::query(
            "SELECT h.chain_key, h.seq, h.hash, c.seq AS last_seq, c.signed_at AS last_at
             FROM audit_chain_heads h
             LEFT JOIN audit_checkpoints c ON c.chain_key = h.chain_key
               AND c.seq = (SELECT MAX(seq) FROM audit_checkpoints m WHERE m.chain_key = h.chain_key)
             WHERE h.seq > COALESCE(c.seq, 0)",
        )
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let d = Decoder::new(row, "audit_chain_heads", &["chain_key"]);
                let seq: i64 = d.get("seq")?;
                let last_seq: Option<i64> = d.get("last_seq")?;
                let last_at = d.opt_stamp("last_at")?;
                Ok(CheckpointCandidate {
                    chain_key: d.get("chain_key")?,
                    seq: seq.unsigned_abs(),
                    hash: d.get("hash")?,
                    last: last_seq.zip(last_at).map(|(s, at)| (s.unsigned_abs(), at)),
                })
            })
            .collect()
    }

    /// Stores a checkpoint; false when one for this (chain, seq) exists already.
    pub async fn store_checkpoint(&self, record: &CheckpointRecord) -> StoreResult<bool> {
        let done = sqlx::query(&self.sql(
            "INSERT INTO audit_checkpoints (chain_key, seq, hash, signed_at, note) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (chain_key, seq) DO NOTHING",
        ))
        .bind(&record.chain_key)
        .bind(i64::try_from(record.seq).unwrap_or(i64::MAX))
        .bind(&record.hash)
        .bind(stamp(record.signed_at))
        .bind(&record.note)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// A page of a chain's checkpoints, newest first, and how many there are.
    pub async fn checkpoints(
        &self,
        chain_key: &str,
        limit: u32,
        offset: u64,
    ) -> StoreResult<(Vec<CheckpointRecord>, u64)> {
        let (rows, total) = self
            .page(
                (
                    "chain_key, seq, hash, signed_at, note",
                    "audit_checkpoints",
                    "chain_key = $1",
                    "seq DESC",
                ),
                &[Some(chain_key.to_owned())],
                limit,
                offset,
            )
            .await?;
        let items = rows
            .iter()
            .map(record_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((items, total))
    }

    /// Every checkpoint note of a chain, oldest first (for verification).
    pub async fn checkpoint_notes(&self, chain_key: &str) -> StoreResult<Vec<String>> {
        let rows = sqlx::query(&self.sql(
            "SELECT chain_key, seq, hash, signed_at, note FROM audit_checkpoints WHERE chain_key = $1 ORDER BY seq",
        ))
        .bind(chain_key)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| record_from_row(row).map(|r| r.note))
            .collect()
    }
}
