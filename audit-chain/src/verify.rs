//! The streaming chain verifier: rows go in one at a time in `seq` order; memory
//! stays constant however long the chain.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::event::SealedEvent;

/// Why verification stopped at a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum BreakReason {
    /// The row does not re-hash to its stored hash: it was altered.
    HashMismatch,
    /// The row's `prevHash` is not the previous row's hash: a row was removed,
    /// inserted or reordered before it.
    PrevHashMismatch,
    /// The row's `seq` is not the previous row's plus one.
    SeqGap {
        /// The seq that should have come.
        expected: u64,
        /// The seq that came.
        found: u64,
    },
    /// The row belongs to another chain, or its chain key does not follow from its
    /// organization fields.
    ChainKeyMismatch,
    /// The row's `createdAt` is earlier than the previous row's.
    CreatedAtDecreased,
}

/// The verdict on a chain: the API's `{ok, brokenAt?, count}` plus the range checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    /// True when every row checked is intact and linked.
    pub ok: bool,
    /// The first row that fails.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broken_at: Option<SealedEvent>,
    /// Why it fails.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<BreakReason>,
    /// Rows checked (up to and including the broken one).
    pub count: u64,
    /// The first surviving row's seq.
    pub first_seq: Option<u64>,
    /// The last row checked.
    pub last_seq: Option<u64>,
    /// The hash of the last intact row.
    pub head_hash: Option<String>,
}

#[derive(Debug, Clone)]
struct Last {
    seq: u64,
    hash: String,
    created_at: DateTime<Utc>,
}

/// Verifies one chain from rows pushed in `seq` order. The first surviving row's
/// `prevHash` is not checked: its predecessor may have been pruned.
///
/// Detected: any altered row (it no longer re-hashes), and any row removed, inserted
/// or reordered before a surviving row (links or seq break). Not detectable by a
/// plain hash chain: deletion of the newest rows, or a rewrite that recomputes every
/// later hash; signed checkpoints will close both.
#[derive(Debug, Clone, Default)]
pub struct ChainVerifier {
    buffer: String,
    chain_key: Option<String>,
    first_seq: Option<u64>,
    last: Option<Last>,
    count: u64,
    broken: Option<(SealedEvent, BreakReason)>,
}

impl ChainVerifier {
    /// A verifier with nothing checked yet.
    pub fn new() -> Self {
        ChainVerifier::default()
    }

    /// Checks the next row. Returns false once the chain is broken; later rows
    /// are then ignored.
    pub fn push(&mut self, row: &SealedEvent) -> bool {
        if self.broken.is_some() {
            return false;
        }
        self.count += 1;
        match self.check(row) {
            Ok(()) => {
                if self.first_seq.is_none() {
                    self.first_seq = Some(row.seq);
                    self.chain_key = Some(row.chain_key.clone());
                }
                let last = self.last.get_or_insert_with(|| Last {
                    seq: 0,
                    hash: String::new(),
                    created_at: row.created_at,
                });
                last.seq = row.seq;
                last.hash.clone_from(&row.hash);
                last.created_at = row.created_at;
                true
            }
            Err(reason) => {
                self.broken = Some((row.clone(), reason));
                false
            }
        }
    }

    fn check(&mut self, row: &SealedEvent) -> Result<(), BreakReason> {
        let derived_key = match row.affected_org_id.as_deref() {
            Some(affected) if !affected.is_empty() => affected,
            _ => row.org_id.as_str(),
        };
        if derived_key != row.chain_key
            || self
                .chain_key
                .as_ref()
                .is_some_and(|key| *key != row.chain_key)
        {
            return Err(BreakReason::ChainKeyMismatch);
        }
        if !row.hash_matches(&mut self.buffer) {
            return Err(BreakReason::HashMismatch);
        }
        if let Some(last) = &self.last {
            let expected = last.seq.saturating_add(1);
            if row.seq != expected {
                return Err(BreakReason::SeqGap {
                    expected,
                    found: row.seq,
                });
            }
            if row.prev_hash != last.hash {
                return Err(BreakReason::PrevHashMismatch);
            }
            if row.created_at < last.created_at {
                return Err(BreakReason::CreatedAtDecreased);
            }
        }
        Ok(())
    }

    /// The verdict.
    pub fn finish(self) -> Verification {
        let (broken_at, reason) = match self.broken {
            Some((row, reason)) => (Some(row), Some(reason)),
            None => (None, None),
        };
        Verification {
            ok: broken_at.is_none(),
            broken_at,
            reason,
            count: self.count,
            first_seq: self.first_seq,
            last_seq: self.last.as_ref().map(|l| l.seq),
            head_hash: self.last.map(|l| l.hash),
        }
    }
}

/// Verifies a whole chain at once.
pub fn verify<'a>(rows: impl IntoIterator<Item = &'a SealedEvent>) -> Verification {
    let mut verifier = ChainVerifier::new();
    for row in rows {
        if !verifier.push(row) {
            break;
        }
    }
    verifier.finish()
}
