//! The check log's writer: live checks are recorded in groups. A check waits for
//! the commit of the group that holds it before it is answered (durable before
//! acknowledged); the checks that arrive while a group commits form the next one,
//! so concurrent checks share one statement and one commit instead of each taking a
//! transaction of its own. The queue is bounded: a full queue makes the checks wait
//! their turn (within their own deadline), never grows.

use std::sync::OnceLock;

use tokio::sync::{mpsc, oneshot};

use crate::storage::{LiveCheck, Store, StoreError, StoreResult, MAX_CHECKS_PER_STATEMENT};

/// Checks waiting for the writer, at most.
pub const QUEUE: usize = 1024;

/// The writer of one process, started with its first check.
#[derive(Debug, Default)]
pub struct CheckLog {
    writer: OnceLock<mpsc::Sender<Pending>>,
}

#[derive(Debug)]
struct Pending {
    check: LiveCheck,
    done: oneshot::Sender<StoreResult<()>>,
}

impl CheckLog {
    /// Records `check` with the others waiting, and returns once they are committed.
    pub async fn record(&self, store: &Store, check: LiveCheck) -> StoreResult<()> {
        let writer = self.writer.get_or_init(|| start(store.clone()));
        let (done, committed) = oneshot::channel();
        writer
            .send(Pending { check, done })
            .await
            .map_err(|_| StoreError::Unavailable("the check log's writer stopped".to_owned()))?;
        committed.await.map_err(|_| {
            StoreError::Unavailable("the check log's writer stopped before the commit".to_owned())
        })?
    }
}

/// Starts the writer: it ends when every sender is gone (the state is dropped).
fn start(store: Store) -> mpsc::Sender<Pending> {
    let (sender, mut queue) = mpsc::channel::<Pending>(QUEUE);
    tokio::spawn(async move {
        let mut group: Vec<Pending> = Vec::with_capacity(MAX_CHECKS_PER_STATEMENT);
        while let Some(first) = queue.recv().await {
            group.push(first);
            while group.len() < MAX_CHECKS_PER_STATEMENT {
                match queue.try_recv() {
                    Ok(next) => group.push(next),
                    Err(_) => break,
                }
            }
            commit(&store, &mut group).await;
        }
    });
    sender
}

/// Commits `group` and answers each of its checks. When the group as a whole fails,
/// each check is tried alone, so that one check's failure is its own.
async fn commit(store: &Store, group: &mut Vec<Pending>) {
    let checks: Vec<&LiveCheck> = group.iter().map(|p| &p.check).collect();
    let result = store.record_live_checks(&checks).await;
    if result.is_ok() || group.len() == 1 {
        for pending in group.drain(..) {
            // A check whose request went away is recorded all the same.
            let _ = pending.done.send(result.clone());
        }
        return;
    }
    for pending in group.drain(..) {
        let alone = store.record_live_checks(&[&pending.check]).await;
        let _ = pending.done.send(alone);
    }
}
