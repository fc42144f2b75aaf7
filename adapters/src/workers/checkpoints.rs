//! The checkpoint signer: under the `audit-checkpoints` lease, signs a checkpoint for
//! every chain that advanced, once its last checkpoint is
//! `AUDIT_CHECKPOINT_INTERVAL_SECONDS` old or `AUDIT_CHECKPOINT_EVENTS` appends behind
//! (or it has none). Each is stored (one per chain and seq, whatever the number of
//! replicas) and, with `AUDIT_CHECKPOINT_DIR`, written to a file there too.

use std::time::Duration;

use audit_chain::{checkpoint_due, Checkpoint};
use chrono::{DateTime, Utc};

use super::Shutdown;
use crate::config::CheckpointSettings;
use crate::storage::{CheckpointRecord, Store, StoreError, StoreResult};

/// The lease the signer takes.
pub const LEASE: &str = "audit-checkpoints";
/// How often the signer looks at the chains.
pub const POLL: Duration = Duration::from_secs(2);

/// One round: signs what is due at `now`; returns how many checkpoints this call
/// stored.
pub async fn round(
    store: &Store,
    settings: &CheckpointSettings,
    now: DateTime<Utc>,
) -> StoreResult<usize> {
    let interval = i64::try_from(settings.interval_seconds).unwrap_or(i64::MAX);
    let mut signed = 0;
    for chain in store.checkpoint_candidates().await? {
        if !checkpoint_due(chain.seq, chain.last, now, interval, settings.events) {
            continue;
        }
        let checkpoint = Checkpoint {
            deployment: settings.origin.clone(),
            chain_key: chain.chain_key.clone(),
            seq: chain.seq,
            hash: chain.hash.clone(),
            time: now,
        };
        let note = checkpoint
            .sign(&settings.signer)
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        let record = CheckpointRecord {
            chain_key: chain.chain_key,
            seq: chain.seq,
            hash: chain.hash,
            signed_at: now,
            note,
        };
        if store.store_checkpoint(&record).await? {
            signed += 1;
            if let Some(dir) = &settings.dir {
                if let Err(error) = write_file(dir, &record).await {
                    tracing::error!(%error, chain = %record.chain_key, seq = record.seq,
                        "checkpoint stored but not written to AUDIT_CHECKPOINT_DIR");
                }
            }
        }
    }
    Ok(signed)
}

/// `<dir>/<chain key, hex-encoded>/<seq, 20 digits>.note`: file names that sort by
/// seq and cannot escape the directory whatever the chain key holds.
pub fn file_of(dir: &std::path::Path, chain_key: &str, seq: u64) -> std::path::PathBuf {
    dir.join(hex::encode(chain_key.as_bytes()))
        .join(format!("{seq:020}.note"))
}

async fn write_file(dir: &std::path::Path, record: &CheckpointRecord) -> std::io::Result<()> {
    let path = file_of(dir, &record.chain_key, record.seq);
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent).await?;
    }
    tokio::fs::write(&path, &record.note).await
}

/// The worker: a round every [`POLL`] while it holds the lease.
pub async fn run(
    store: Store,
    holder: String,
    settings: CheckpointSettings,
    mut shutdown: Shutdown,
) {
    loop {
        match store
            .take_lease(LEASE, &holder, Duration::from_secs(30), Utc::now())
            .await
        {
            Ok(Some(_)) => {
                if let Err(error) = round(&store, &settings, Utc::now()).await {
                    tracing::warn!(%error, "checkpoint round failed");
                }
            }
            Ok(None) => {}
            Err(error) => tracing::warn!(%error, "checkpoints: cannot take the lease"),
        }
        tokio::select! {
            _ = shutdown.wait() => break,
            _ = tokio::time::sleep(POLL) => {}
        }
    }
    let _ = store.release_lease(LEASE, &holder).await;
}
