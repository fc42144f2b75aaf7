//! Several PostgreSQL hosts, one primary: `DATABASE_URL` may name hosts the way libpq
//! does (`postgres://user@h1:5432,h2:5433/db?target_session_attrs=read-write`). The
//! store opens its pool on the host that is not in recovery, and the `primary` worker
//! keeps it there: each second (and at once after a statement failed for want of a
//! server) it asks the pool's host whether it is still the primary; when it is not,
//! or does not answer, it asks every host in turn and moves the pool to the one that
//! is. Connections opened before the move are closed when next taken from the pool,
//! so no statement runs on the old primary once the move is made; until a primary is
//! found, statements fail as unavailable (503 with `Retry-After`).
//!
//! With one host nothing of this runs: a restart of that host is the pool's ordinary
//! reconnection.

use std::str::FromStr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::any::AnyConnectOptions;
use sqlx::{AnyConnection, AnyPool, Connection, Row};
use tokio::sync::{watch, Notify};

use super::{StoreError, StoreResult};

/// How long one host may take to answer whether it is the primary.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

/// Woken when a statement failed for want of a server (see [`suspect`]).
static SUSPECT: Notify = Notify::const_new();

/// A statement failed because its server went away or refused to write: the
/// `primary` worker looks at once instead of at its next second. A hint only: the
/// worker decides by asking the hosts.
pub(crate) fn suspect() {
    SUSPECT.notify_one();
}

/// Resolves at the next [`suspect`] hint.
pub(crate) async fn suspected() {
    SUSPECT.notified().await;
}

pub use crate::config::split_hosts;

/// Where the pool is, and since when.
#[derive(Debug)]
pub(crate) struct Primary {
    /// One URL per host, in the order `DATABASE_URL` names them.
    hosts: Vec<String>,
    /// The host the pool connects to.
    current: AtomicUsize,
    /// When the store was made: the clock of `moved_ms`.
    epoch: Instant,
    /// When the pool last moved, in milliseconds after `epoch`.
    moved_ms: AtomicU64,
    /// How many times the pool moved: the LISTEN connection follows it.
    moves: watch::Sender<u64>,
}

impl Primary {
    /// The hosts of `url`, when there are several; the pool starts on none of them
    /// ([`Primary::find`] says which).
    pub(crate) fn of(url: &str) -> StoreResult<Option<Arc<Primary>>> {
        let hosts = split_hosts(url).map_err(StoreError::Other)?;
        if hosts.len() < 2 {
            return Ok(None);
        }
        Ok(Some(Arc::new(Primary {
            hosts,
            current: AtomicUsize::new(0),
            epoch: Instant::now(),
            moved_ms: AtomicU64::new(0),
            moves: watch::channel(0).0,
        })))
    }

    /// The URL of the host the pool is on (a session of its own, for LISTEN).
    pub(crate) fn current_url(&self) -> &str {
        let index = self.current.load(Ordering::Acquire);
        self.hosts
            .get(index)
            .or_else(|| self.hosts.first())
            .map_or("", String::as_str)
    }

    /// Whether a connection `age` old was opened since the pool last moved.
    pub(crate) fn opened_since_move(&self, age: Duration) -> bool {
        let moved = Duration::from_millis(self.moved_ms.load(Ordering::Acquire));
        let since_move = self.epoch.elapsed().saturating_sub(moved);
        age <= since_move
    }

    /// Counts the pool's moves (changes when it moves).
    pub(crate) fn moves(&self) -> watch::Receiver<u64> {
        self.moves.subscribe()
    }

    /// Records the host the pool was opened on.
    pub(crate) fn opened_on(&self, index: usize) {
        self.current.store(index, Ordering::Release);
    }

    /// The first host, in order, that answers and is not in recovery.
    pub(crate) async fn find(&self) -> StoreResult<(usize, AnyConnectOptions)> {
        let mut why = Vec::new();
        for (index, url) in self.hosts.iter().enumerate() {
            match ask(url).await {
                Ok(false) => {
                    let options = AnyConnectOptions::from_str(url)
                        .map_err(|e| StoreError::Other(e.to_string()))?;
                    return Ok((index, options));
                }
                Ok(true) => why.push(format!("host {} takes no writes", index + 1)),
                Err(error) => why.push(format!("host {}: {error}", index + 1)),
            }
        }
        Err(StoreError::Unavailable(format!(
            "no primary among the database hosts ({})",
            why.join("; ")
        )))
    }

    /// Moves the pool to the host `index` (which [`Primary::find`] chose): new
    /// connections go there, older ones are closed when next taken.
    pub(crate) fn move_to(&self, pool: &AnyPool, index: usize, options: AnyConnectOptions) {
        pool.set_connect_options(options);
        self.current.store(index, Ordering::Release);
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.moved_ms.store(now, Ordering::Release);
        self.moves.send_modify(|moves| *moves += 1);
    }
}

/// Whether the host of `url` is in recovery (a standby), asked on a connection of
/// its own within [`ASK_TIMEOUT`].
async fn ask(url: &str) -> StoreResult<bool> {
    let asked = async {
        let mut conn = AnyConnection::connect(url).await?;
        let standby = in_recovery(&mut conn).await;
        let _ = conn.close().await;
        standby
    };
    match tokio::time::timeout(ASK_TIMEOUT, asked).await {
        Ok(answer) => answer,
        Err(_) => Err(StoreError::Unavailable(
            "the host did not answer in time".to_owned(),
        )),
    }
}

/// Whether the server of `conn` takes no writes: in recovery (a standby), or
/// read-only by default (libpq's test for `target_session_attrs=read-write`; a
/// promoted standby that pg_auto_failover holds read-only until the old primary is
/// known to be demoted, against a split brain).
pub(crate) async fn in_recovery(conn: &mut AnyConnection) -> StoreResult<bool> {
    let row = sqlx::query(
        "SELECT CASE WHEN pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on' \
         THEN 1 ELSE 0 END AS standby",
    )
    .fetch_one(&mut *conn)
    .await?;
    Ok(row.try_get::<i32, _>("standby")? != 0)
}

/// Whether the pool's host is still the primary, asked within [`ASK_TIMEOUT`].
pub(crate) async fn pool_on_primary(pool: &AnyPool) -> bool {
    let asked = async {
        let mut conn = pool.acquire().await?;
        in_recovery(&mut conn).await
    };
    matches!(
        tokio::time::timeout(ASK_TIMEOUT, asked).await,
        Ok(Ok(false))
    )
}

#[cfg(test)]
mod tests {
    use super::split_hosts;

    #[test]
    fn hosts_are_split_the_way_libpq_names_them() {
        assert_eq!(
            split_hosts("postgres://app:s3cret@h1:5432,h2:5433/db?target_session_attrs=read-write&sslmode=disable")
                .unwrap(),
            vec![
                "postgres://app:s3cret@h1:5432/db?sslmode=disable".to_owned(),
                "postgres://app:s3cret@h2:5433/db?sslmode=disable".to_owned(),
            ]
        );
        assert_eq!(
            split_hosts("postgresql://h1,[::1]:6000/db").unwrap(),
            vec![
                "postgresql://h1/db".to_owned(),
                "postgresql://[::1]:6000/db".to_owned()
            ]
        );
        // One host: the URL as it was, less what the server decides itself.
        assert_eq!(
            split_hosts("postgres://postgres@127.0.0.1:5432/postgres?target_session_attrs=any")
                .unwrap(),
            vec!["postgres://postgres@127.0.0.1:5432/postgres".to_owned()]
        );
        // An `@` in the password does not end the user part early.
        assert_eq!(
            split_hosts("postgres://u:p@ss@a,b").unwrap(),
            vec![
                "postgres://u:p@ss@a".to_owned(),
                "postgres://u:p@ss@b".to_owned()
            ]
        );
        assert!(split_hosts("postgres://u@a,,b/db").is_err());
        // No host (a socket named by a parameter): one URL, as it was.
        assert_eq!(
            split_hosts("postgres:///db?host=/run/postgresql").unwrap(),
            vec!["postgres:///db?host=/run/postgresql".to_owned()]
        );
        assert!(split_hosts("no scheme").is_err());
    }
}
