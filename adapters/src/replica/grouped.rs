//! Work that arrives together is written together: the items that arrive while a
//! transaction is being written wait for the next one, which takes them all (up to
//! [`BATCH`]) in one transaction; each item is answered after that commit only, with
//! its own outcome. Live checks (their check-log rows, snapshots and notifications)
//! and audit appends (sealed in order under one lock of each chain's head) use it.
//!
//! Bounded: at most [`QUEUE`] items wait; one more makes its request wait for room
//! (under its own deadline). [`WRITERS`] transactions are written at once. An item
//! whose request gave up before its transaction began is not written.

use std::future::Future;
use std::sync::{Arc, OnceLock};

use tokio::sync::{mpsc, oneshot, Mutex};

/// How many items may wait for a transaction.
pub const QUEUE: usize = 1024;

/// How many items one transaction takes at most.
pub const BATCH: usize = 128;

/// How many transactions are written at once.
pub const WRITERS: usize = 2;

type Waiting<T, R> = (T, oneshot::Sender<R>);

/// A queue of items waiting to be written together, and its writers (started at the
/// first item).
pub struct Grouped<T, R> {
    queue: OnceLock<mpsc::Sender<Waiting<T, R>>>,
}

impl<T, R> Default for Grouped<T, R> {
    fn default() -> Self {
        Grouped {
            queue: OnceLock::new(),
        }
    }
}

impl<T, R> std::fmt::Debug for Grouped<T, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grouped").finish_non_exhaustive()
    }
}

impl<T: Send + 'static, R: Send + 'static> Grouped<T, R> {
    /// Writes `item` with the others waiting and answers its outcome after the
    /// commit; `None` when the writers stopped. `write` takes a group and answers one
    /// outcome per item, in order (the first call's `write` serves every call).
    pub async fn submit<F, Fut>(&self, item: T, write: F) -> Option<R>
    where
        F: Fn(Vec<T>) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Vec<R>> + Send + 'static,
    {
        let queue = self.queue.get_or_init(|| {
            let (send, receive) = mpsc::channel(QUEUE);
            let receive = Arc::new(Mutex::new(receive));
            for _ in 0..WRITERS {
                tokio::spawn(writer(receive.clone(), write.clone()));
            }
            send
        });
        let (done, answer) = oneshot::channel();
        queue.send((item, done)).await.ok()?;
        answer.await.ok()
    }
}

/// One writer: takes whatever waits (at least one item, at most [`BATCH`]), writes
/// it, answers each, and starts again.
async fn writer<T, R, F, Fut>(queue: Arc<Mutex<mpsc::Receiver<Waiting<T, R>>>>, write: F)
where
    F: Fn(Vec<T>) -> Fut,
    Fut: Future<Output = Vec<R>>,
{
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        {
            let mut queue = queue.lock().await;
            if queue.recv_many(&mut batch, BATCH).await == 0 {
                return;
            }
        }
        let (items, answers): (Vec<T>, Vec<oneshot::Sender<R>>) = batch
            .drain(..)
            .filter(|(_, done): &Waiting<T, R>| !done.is_closed())
            .unzip();
        if items.is_empty() {
            continue;
        }
        for (outcome, answer) in write(items).await.into_iter().zip(answers) {
            let _ = answer.send(outcome);
        }
    }
}
