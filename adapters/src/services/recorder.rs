//! Live checks recorded together: the checks that arrive while a transaction is being
//! written wait for the next one, which writes all their rows (check log, snapshots,
//! notifications) in one statement per table and one commit; each check is answered
//! after that commit only. A check whose deadline passed before its transaction began
//! is not recorded (it answered 503); a failed transaction fails each of its checks
//! (503: nothing of them was recorded).
//!
//! Bounded: at most [`QUEUE`] checks wait; one more makes its request wait for room
//! (under its own deadline). [`WRITERS`] transactions are written at once, each of at
//! most [`BATCH`] checks.

use std::sync::{Arc, OnceLock};

use tokio::sync::{mpsc, oneshot, Mutex};

use crate::storage::{LiveCheck, Store, StoreError, StoreResult};

/// How many checks may wait for a transaction.
pub const QUEUE: usize = 1024;

/// How many checks one transaction records at most.
pub const BATCH: usize = 128;

/// How many transactions are written at once.
pub const WRITERS: usize = 2;

struct Waiting {
    check: LiveCheck,
    done: oneshot::Sender<StoreResult<()>>,
}

/// The queue of checks waiting to be recorded, and its writers (started at the
/// first check).
#[derive(Default)]
pub struct Recorder {
    queue: OnceLock<mpsc::Sender<Waiting>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").finish_non_exhaustive()
    }
}

impl Recorder {
    fn queue(&self, store: &Store) -> &mpsc::Sender<Waiting> {
        self.queue.get_or_init(|| {
            let (send, receive) = mpsc::channel(QUEUE);
            let receive = Arc::new(Mutex::new(receive));
            for _ in 0..WRITERS {
                tokio::spawn(write(store.clone(), receive.clone()));
            }
            send
        })
    }

    /// Records `check` with the others waiting, and answers after the commit.
    pub async fn record(&self, store: &Store, check: LiveCheck) -> StoreResult<()> {
        let (done, answer) = oneshot::channel();
        self.queue(store)
            .send(Waiting { check, done })
            .await
            .map_err(|_| StoreError::Unavailable("the check recorder stopped".to_owned()))?;
        answer
            .await
            .map_err(|_| StoreError::Unavailable("the check recorder stopped".to_owned()))?
    }
}

/// One writer: takes whatever waits (at least one check, at most [`BATCH`]), writes
/// it in one transaction, answers each, and starts again.
async fn write(store: Store, queue: Arc<Mutex<mpsc::Receiver<Waiting>>>) {
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        {
            let mut queue = queue.lock().await;
            if queue.recv_many(&mut batch, BATCH).await == 0 {
                return;
            }
        }
        // A check whose request has given up is not recorded.
        let (checks, answers): (Vec<LiveCheck>, Vec<_>) = batch
            .drain(..)
            .filter(|w: &Waiting| !w.done.is_closed())
            .map(|w| (w.check, w.done))
            .unzip();
        let outcome = store.record_live_checks(&checks).await;
        for answer in answers {
            let _ = answer.send(match &outcome {
                Ok(()) => Ok(()),
                Err(error) => Err(StoreError::Unavailable(error.to_string())),
            });
        }
    }
}
