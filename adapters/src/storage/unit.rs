//! A unit of work: the storage steps of one workflow, committed together or not at
//! all, opened by the service that owns the workflow and run by one runner, which
//! runs the whole unit again when PostgreSQL rolled it back for a conflict.

use std::time::Duration;

use audit_chain::AuditEvent;

use super::{Store, StoreError, StoreResult};

/// Several storage steps committed together or not at all: a service opens one with
/// [`Store::unit_of_work`] (or, for a unit that must not run twice,
/// [`Store::transaction`]), calls its steps, and it commits; dropped without a commit
/// (an error on the way, a panic, a cancelled request), it rolls back.
pub struct Transaction<'s> {
    pub(super) store: &'s Store,
    pub(super) tx: sqlx::Transaction<'static, sqlx::Any>,
    /// The unit answers without keeping what it wrote (see [`Transaction::abandon`]).
    abandoned: bool,
}

impl Transaction<'_> {
    /// Makes every step of the transaction durable at once (or none of them, when
    /// the unit was abandoned).
    pub async fn commit(self) -> StoreResult<()> {
        if self.abandoned {
            self.tx.rollback().await?;
        } else {
            self.tx.commit().await?;
        }
        Ok(())
    }

    /// Marks the unit to be rolled back when it ends, though it answers a value (a
    /// refusal decided after a write: an idempotent repeat, a throttle, a lost
    /// race): what it wrote is not kept.
    pub fn abandon(&mut self) {
        self.abandoned = true;
    }

    /// The audit events of the workflow, in its transaction: durable exactly when
    /// the change they record is.
    pub async fn enqueue_audit(&mut self, events: &[AuditEvent]) -> StoreResult<()> {
        self.store.enqueue(&mut self.tx, events).await
    }
}

/// How many times a unit of work runs at most when PostgreSQL keeps rolling it back
/// for a conflict (a serialization failure, 40001, or a deadlock, 40P01).
pub const ATTEMPTS: u32 = 4;

/// The longest pause before the second run; each later one may wait twice as long.
const FIRST_PAUSE: Duration = Duration::from_millis(8);

/// An error that says whether the database rolled the transaction back for a
/// conflict with another one (the same unit, run again, may well succeed).
pub trait Contention {
    /// Whether it is such a rollback.
    fn contended(&self) -> bool;
}

impl Contention for StoreError {
    fn contended(&self) -> bool {
        matches!(self, StoreError::Contended(_))
    }
}

/// The pause before run `attempt + 1`: "full jitter", a random share of a window that
/// doubles with each attempt, so units that collided do not collide again in step.
pub fn pause(attempt: u32, random: u32) -> Duration {
    let window = FIRST_PAUSE.saturating_mul(1 << attempt.saturating_sub(1).min(8));
    let window_us = u64::try_from(window.as_micros()).unwrap_or(u64::MAX);
    Duration::from_micros(u64::from(random) % window_us.max(1))
}

impl Store {
    /// Begins a [`Transaction`] that the caller commits itself (a unit that must not
    /// run twice: one that calls another service between its steps).
    pub async fn transaction(&self) -> StoreResult<Transaction<'_>> {
        Ok(Transaction {
            store: self,
            tx: self.begin().await?,
            abandoned: false,
        })
    }

    /// After run `attempt` of a unit of work: `None` when it is to run again (PostgreSQL
    /// rolled it back for a conflict and attempts are left; the jittered pause has
    /// been waited), else its outcome. The loop is [`unit_of_work!`]'s.
    pub async fn settle<T, E: Contention>(
        &self,
        attempt: &mut u32,
        outcome: Result<T, E>,
    ) -> Option<Result<T, E>> {
        match outcome {
            Err(error) if error.contended() && *attempt < ATTEMPTS => {
                let random = getrandom::u32().unwrap_or(*attempt);
                tracing::info!(
                    attempt = *attempt,
                    "a transaction rolled back for a conflict runs again"
                );
                tokio::time::sleep(pause(*attempt, random)).await;
                *attempt += 1;
                None
            }
            other => Some(other),
        }
    }
}

/// Runs a unit of work: `unit_of_work!(store, |tx| body)` begins a transaction on
/// `store` (a `&Store`), evaluates `body` (a `Result`, with `tx` the
/// `&mut Transaction` of its steps; `?` leaves the unit) and commits (rolls back
/// when the body called [`Transaction::abandon`]). When
/// PostgreSQL rolls it back for a conflict (40001, 40P01: at a statement or at the
/// commit) the whole unit runs again in a new transaction, at most [`ATTEMPTS`] times
/// in all, after a jittered pause; any other error rolls back and is the answer.
/// The error type is `ServiceError` unless named: `|tx| -> StoreError body`.
///
/// A macro rather than a function taking a closure: the body borrows the caller's
/// variables freely and the workflow's future stays `Send` (an async closure over a
/// borrowed transaction is not, to today's compiler). The body must do nothing
/// outside the database that cannot be done twice: what follows the commit (a
/// signal, a mail) comes after the macro.
macro_rules! unit_of_work {
    ($store:expr, |$tx:ident| $body:block) => {
        $crate::storage::unit_of_work!($store, |$tx| -> $crate::services::ServiceError $body)
    };
    ($store:expr, |$tx:ident| -> $error:ty $body:block) => {{
        let store: &$crate::storage::Store = $store;
        let mut attempt = 1_u32;
        loop {
            let outcome: ::std::result::Result<_, $error> = async {
                let mut unit = store.transaction().await?;
                // The body is a block of its own: its `return` answers the unit (and
                // commits it), never skips the commit.
                let value: ::std::result::Result<_, $error> = async {
                    let $tx = &mut unit;
                    $body
                }
                .await;
                let value = value?;
                unit.commit().await?;
                Ok(value)
            }
            .await;
            if let Some(settled) = store.settle(&mut attempt, outcome).await {
                break settled;
            }
        }
    }};
}
pub(crate) use unit_of_work;

#[cfg(test)]
mod tests {
    use super::pause;
    use std::time::Duration;

    #[test]
    fn pauses_are_jittered_within_a_doubling_window() {
        for attempt in 1..=3u32 {
            let window = Duration::from_millis(8 << (attempt - 1));
            for random in [0, 1, 7_999, 8_000, 31_999, u32::MAX] {
                assert!(pause(attempt, random) < window, "{attempt} {random}");
            }
        }
        assert_eq!(pause(1, 0), Duration::ZERO);
        assert_eq!(pause(2, 9_000), Duration::from_micros(9_000));
        // A window that would grow past reason stops growing.
        assert!(pause(40, u32::MAX) < Duration::from_millis(8 << 8));
    }

    /// What a unit keeps: everything when its body answers (even by an early
    /// `return`), nothing when it fails or was abandoned.
    #[tokio::test]
    async fn a_unit_keeps_what_its_body_answers_and_nothing_else() {
        use crate::storage::{Store, StoreError};
        let path = std::env::temp_dir().join(format!("unit-{}.db", uuid::Uuid::new_v4()));
        let store = Store::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        sqlx::query("CREATE TABLE kept (n INTEGER)")
            .execute(store.pool())
            .await
            .unwrap();
        let count = || async {
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM kept")
                .fetch_one(store.pool())
                .await
                .unwrap()
        };
        for (n, early, abandon, fail) in [
            (1, false, false, false),
            (2, true, false, false),
            (3, false, true, false),
            (4, false, false, true),
        ] {
            let answered = crate::storage::unit_of_work!(&store, |tx| -> StoreError {
                sqlx::query("INSERT INTO kept (n) VALUES ($1)")
                    .bind(n)
                    .execute(&mut *tx.tx)
                    .await?;
                if early {
                    return Ok(n);
                }
                if abandon {
                    tx.abandon();
                }
                if fail {
                    return Err(StoreError::Invalid("refused".to_owned()));
                }
                Ok(n)
            });
            assert_eq!(answered.ok(), (!fail).then_some(n));
        }
        // 1 (answered) and 2 (an early return) are kept; 3 (abandoned) and 4 (failed)
        // are not.
        assert_eq!(count().await, 2);
        store.close().await;
        let _ = std::fs::remove_file(&path);
    }
}
