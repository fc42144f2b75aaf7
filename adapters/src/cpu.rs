//! A bounded pool of CPU threads for work that must not run on the async runtime.
//!
//! Parsing a 1 MB attribute document and running 100 regexes over it takes a second
//! of CPU; on a tokio worker that second stalls every other request of the worker
//! (health checks included). Validation hands that work to this pool instead: a fixed
//! number of threads (the machine's cores by default), fed by a bounded queue. A job
//! whose caller stopped waiting (its deadline passed) is skipped if it has not
//! started; a full queue is refused at once, so an overload answers 503 instead of
//! growing a backlog. Background work (the re-evaluation queue, a scan's sweep) takes
//! its turn instead ([`CpuPool::run_in_background`]): at most one of its jobs per
//! thread is in the pool at a time, the rest wait outside it, so it neither fills the
//! queue that requests need nor is refused by it (a full queue makes it wait).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Why a job did not produce its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// Every thread is busy and the queue is full.
    #[error("the evaluation pool is saturated")]
    Busy,
    /// The job panicked, or the pool is shutting down.
    #[error("the evaluation job failed")]
    Failed,
}

/// A fixed set of threads that run CPU-heavy jobs off the async runtime.
#[derive(Debug)]
pub struct CpuPool {
    sender: SyncSender<Job>,
    queued: Arc<AtomicUsize>,
    /// One permit per thread: the background jobs let into the pool at a time.
    background: tokio::sync::Semaphore,
}

impl CpuPool {
    /// `threads` threads (at least one) and room for `queue` waiting jobs.
    pub fn new(threads: usize, queue: usize) -> Self {
        let threads = threads.max(1);
        let (sender, receiver) = sync_channel::<Job>(queue.max(1));
        let receiver = Arc::new(Mutex::new(receiver));
        for i in 0..threads {
            let receiver = Arc::clone(&receiver);
            let spawned = std::thread::Builder::new()
                .name(format!("compliance-cpu-{i}"))
                .spawn(move || work(&receiver));
            if let Err(error) = spawned {
                tracing::error!(%error, "could not start an evaluation thread");
            }
        }
        CpuPool {
            sender,
            queued: Arc::new(AtomicUsize::new(0)),
            background: tokio::sync::Semaphore::new(threads),
        }
    }

    /// One thread per core, and a queue of 16 jobs per thread.
    pub fn per_core() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        CpuPool::new(cores, cores * 16)
    }

    /// Jobs accepted and not yet finished (waiting or running).
    pub fn in_flight(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Runs `job` on a pool thread. Dropping the returned future (a deadline that
    /// passed) cancels the job if it has not started.
    pub async fn run<T, F>(&self, job: F) -> Result<T, PoolError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        self.submit(job, false).await
    }

    /// Runs background `job` on a pool thread once fewer background jobs than threads
    /// are in the pool, waiting for that, and then for room in the queue when
    /// requests have filled it: never refused, only [`PoolError::Failed`] when the job
    /// panics or the pool stops. A sweep or the re-evaluation queue waits its turn
    /// here instead of retrying a refused job.
    pub async fn run_in_background<T, F>(&self, job: F) -> Result<T, PoolError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let _turn = self
            .background
            .acquire()
            .await
            .map_err(|_| PoolError::Failed)?;
        self.submit(job, true).await
    }

    /// Queues `job`; when the queue is full, refused ([`PoolError::Busy`]) or, when
    /// `wait`, sent once there is room (a blocking send on a blocking thread: at most
    /// one per background turn).
    async fn submit<T, F>(&self, job: F, wait: bool) -> Result<T, PoolError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let (done, result) = oneshot::channel();
        let cancelled = Arc::new(AtomicBool::new(false));
        let guard = CancelOnDrop(Arc::clone(&cancelled));
        let queued = Arc::clone(&self.queued);
        queued.fetch_add(1, Ordering::Relaxed);
        let counter = Arc::clone(&queued);
        let boxed: Job = Box::new(move || {
            // Counted out before the answer leaves, so a caller that got its answer
            // never sees its own job in flight.
            let _counted = CountOut(counter);
            if !cancelled.load(Ordering::Relaxed) {
                let output = job();
                drop(_counted);
                let _ = done.send(output);
            }
        });
        match self.sender.try_send(boxed) {
            Ok(()) => {}
            Err(TrySendError::Full(boxed)) if wait => {
                let sender = self.sender.clone();
                let sent = tokio::task::spawn_blocking(move || sender.send(boxed)).await;
                if !matches!(sent, Ok(Ok(()))) {
                    queued.fetch_sub(1, Ordering::Relaxed);
                    return Err(PoolError::Failed);
                }
            }
            Err(TrySendError::Full(_)) => {
                queued.fetch_sub(1, Ordering::Relaxed);
                return Err(PoolError::Busy);
            }
            Err(TrySendError::Disconnected(_)) => {
                queued.fetch_sub(1, Ordering::Relaxed);
                return Err(PoolError::Failed);
            }
        }
        let outcome = result.await.map_err(|_| PoolError::Failed);
        drop(guard);
        outcome
    }
}

struct CountOut(Arc<AtomicUsize>);

impl Drop for CountOut {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn work(receiver: &Mutex<Receiver<Job>>) {
    loop {
        let job = match receiver.lock() {
            Ok(receiver) => receiver.recv(),
            Err(_) => return,
        };
        let Ok(job) = job else { return };
        // A panicking job loses its own answer (the caller sees Failed), not the thread.
        if catch_unwind(AssertUnwindSafe(job)).is_err() {
            tracing::error!("an evaluation job panicked");
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;
    use std::time::Duration;

    /// Fills a pool of one thread and a queue of one: a request runs (blocked until
    /// `release` is sent twice) and another waits. Answers the two and the release.
    async fn filled(
        pool: &Arc<CpuPool>,
    ) -> (
        tokio::task::JoinHandle<Result<(), PoolError>>,
        tokio::task::JoinHandle<Result<(), PoolError>>,
        std::sync::mpsc::Sender<()>,
    ) {
        let (started, started_rx) = std::sync::mpsc::channel::<()>();
        let (release, gate) = std::sync::mpsc::channel::<()>();
        let gate = Arc::new(Mutex::new(gate));
        let blocking = move || {
            let _ = started.send(());
            let _ = gate.lock().unwrap().recv();
        };
        let first = tokio::spawn({
            let (pool, job) = (Arc::clone(pool), blocking.clone());
            async move { pool.run(job).await }
        });
        tokio::task::spawn_blocking(move || started_rx.recv_timeout(Duration::from_secs(10)))
            .await
            .unwrap()
            .unwrap();
        let second = tokio::spawn({
            let (pool, job) = (Arc::clone(pool), blocking);
            async move { pool.run(job).await }
        });
        while pool.in_flight() < 2 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        (first, second, release)
    }

    #[tokio::test]
    async fn runs_jobs_off_the_runtime_and_refuses_when_full() {
        let pool = CpuPool::new(1, 1);
        assert_eq!(pool.run(|| 2 + 2).await, Ok(4));
        let name = pool
            .run(|| std::thread::current().name().map(str::to_owned))
            .await
            .unwrap();
        assert_eq!(name.as_deref(), Some("compliance-cpu-0"));

        // One job runs, one waits; the third is refused at once.
        let pool = Arc::new(pool);
        let (first, second, release) = filled(&pool).await;
        assert_eq!(pool.run(|| ()).await, Err(PoolError::Busy));
        release.send(()).unwrap();
        release.send(()).unwrap();
        assert_eq!(first.await.unwrap(), Ok(()));
        assert_eq!(second.await.unwrap(), Ok(()));
        assert_eq!(pool.in_flight(), 0);
    }

    #[tokio::test]
    async fn background_jobs_take_their_turn_and_leave_the_queue_to_requests() {
        // One thread, room for four: 64 background jobs at once all run (none is
        // refused), and never more than one of them is in the pool at a time.
        let pool = Arc::new(CpuPool::new(1, 4));
        let most = Arc::new(AtomicUsize::new(0));
        let jobs: Vec<_> = (0..64)
            .map(|i| {
                let (pool, most) = (Arc::clone(&pool), Arc::clone(&most));
                let in_pool = Arc::clone(&pool.queued);
                tokio::spawn(async move {
                    pool.run_in_background(move || {
                        // The jobs in the pool, this one included, while it runs.
                        most.fetch_max(in_pool.load(Ordering::Relaxed), Ordering::Relaxed);
                        std::thread::sleep(Duration::from_micros(200));
                        i * 2
                    })
                    .await
                })
            })
            .collect();
        for (i, job) in jobs.into_iter().enumerate() {
            assert_eq!(job.await.unwrap(), Ok(i * 2));
        }
        assert!(most.load(Ordering::Relaxed) <= 1, "{most:?}");
        // Meanwhile a request is let in: the queue has room.
        assert_eq!(pool.run(|| 1).await, Ok(1));
    }

    #[tokio::test]
    async fn a_background_job_waits_for_room_instead_of_being_refused() {
        // One thread, room for one: a request runs and another waits, so the queue is
        // full; a request is refused, a background job waits and runs once there is
        // room.
        let pool = Arc::new(CpuPool::new(1, 1));
        let (first, second, release) = filled(&pool).await;
        assert_eq!(pool.run(|| 0).await, Err(PoolError::Busy));
        let background = tokio::spawn({
            let pool = Arc::clone(&pool);
            async move { pool.run_in_background(|| 42).await }
        });
        while pool.in_flight() < 3 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert!(!background.is_finished());
        release.send(()).unwrap();
        release.send(()).unwrap();
        assert_eq!(background.await.unwrap(), Ok(42));
        assert_eq!(first.await.unwrap(), Ok(()));
        assert_eq!(second.await.unwrap(), Ok(()));
    }

    #[tokio::test]
    async fn a_panicking_job_fails_alone() {
        let pool = CpuPool::new(1, 4);
        let failed = pool.run(|| -> u8 { panic!("boom") }).await;
        assert_eq!(failed, Err(PoolError::Failed));
        assert_eq!(pool.run(|| 7).await, Ok(7));
    }
}
