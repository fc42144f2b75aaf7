//! Connecting a store: to the primary or a standby, through a pooler or directly, with
//! the dialect's session settings; and closing it.

use super::*;

/// Which server a store connects to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// The primary: every write, and reads.
    Primary,
    /// A streaming standby: the reports' reads.
    Standby,
}

/// What every standby session sets first.
pub(super) const STANDBY_SESSION: &str =
    "SET statement_timeout = 25000; SET default_transaction_read_only = on";

impl Store {
    /// Connects to `url` (`postgres://...` or `sqlite://...`; a SQLite file is created
    /// if missing).
    pub async fn connect(url: &str) -> StoreResult<Store> {
        Store::open(url, Role::Primary, None).await
    }

    /// Connects to `url`, through a pooler when `direct` names the database itself
    /// (`DATABASE_DIRECT_URL`, see [`Store::connect_pooled`]).
    pub async fn connect_primary(url: &str, direct: Option<&str>) -> StoreResult<Store> {
        match direct {
            Some(direct) => Store::connect_pooled(url, direct).await,
            None => Store::connect(url).await,
        }
    }

    /// Connects to the primary through a pooler in transaction mode at `url`
    /// (pgbouncer's `pool_mode = transaction`), `direct` naming the database itself
    /// for what needs a session of its own (LISTEN): every statement then runs in a
    /// transaction, no prepared statement is kept between transactions (see
    /// `storage::pooler`). Both name one host.
    pub async fn connect_pooled(url: &str, direct: &str) -> StoreResult<Store> {
        if url.starts_with("sqlite:") || direct.starts_with("sqlite:") {
            return Err(StoreError::Other(
                "a pooler stands in front of PostgreSQL only".to_owned(),
            ));
        }
        for named in [url, direct] {
            if primary::split_hosts(named)
                .map_err(StoreError::Other)?
                .len()
                > 1
            {
                return Err(StoreError::Other(
                    "with a pooler, DATABASE_URL and DATABASE_DIRECT_URL name one host each"
                        .to_owned(),
                ));
            }
        }
        Store::open(&pooler::pooled_url(url), Role::Primary, Some(direct)).await
    }

    /// Connects to a streaming standby that the reports read: its sessions are
    /// read-only, and each statement is cancelled after 25 s,
    /// under PostgreSQL's default `max_standby_streaming_delay` (30 s), so that
    /// replay cancels none of them and none holds replay back. With several hosts,
    /// the first.
    pub async fn connect_standby(url: &str) -> StoreResult<Store> {
        Store::open(url, Role::Standby, None).await
    }

    async fn open(url: &str, role: Role, direct: Option<&str>) -> StoreResult<Store> {
        sqlx::any::install_default_drivers();
        let dialect = if url.starts_with("sqlite:") {
            Dialect::Sqlite
        } else {
            Dialect::Postgres
        };
        let url = match dialect {
            Dialect::Sqlite if !url.contains("mode=") => {
                format!("{url}{}mode=rwc", if url.contains('?') { "&" } else { "?" })
            }
            _ => url.to_owned(),
        };
        let primary = match (dialect, role) {
            (Dialect::Postgres, Role::Primary) => primary::Primary::of(&url)?,
            _ => None,
        };
        let options = match &primary {
            Some(primary) => {
                let (index, options) = primary.find().await?;
                primary.opened_on(index);
                options
            }
            None => {
                let url = match dialect {
                    // What sqlx would not read (`target_session_attrs`) left out.
                    Dialect::Postgres => primary::split_hosts(&url)
                        .map_err(StoreError::Other)?
                        .into_iter()
                        .next()
                        .unwrap_or(url),
                    Dialect::Sqlite => url,
                };
                AnyConnectOptions::from_str(&url).map_err(|e| StoreError::Other(e.to_string()))?
            }
        };
        let follows = primary.clone();
        let checks = primary.clone();
        let pool = AnyPoolOptions::new()
            .max_connections(match dialect {
                Dialect::Postgres => 16,
                Dialect::Sqlite => 8,
            })
            .acquire_timeout(Duration::from_secs(5))
            // No round trip to test a connection before each use: every statement
            // would cost two (sqlx already tests it when it comes back). A connection
            // that died idle fails the one statement given to it (the caller answers
            // 503, fail closed) and is then dropped.
            .test_before_acquire(false)
            // After the pool moved to a new primary, a connection opened before is
            // closed instead of used (it may be on the old one).
            .before_acquire(move |_, meta| {
                let keep = follows
                    .as_ref()
                    .is_none_or(|primary| primary.opened_since_move(meta.age));
                Box::pin(async move { Ok(keep) })
            })
            .after_connect(move |conn, _| {
                let checks = checks.clone();
                Box::pin(async move {
                    if dialect == Dialect::Sqlite {
                        conn.execute("PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;")
                            .await?;
                    }
                    if dialect == Dialect::Postgres && role == Role::Standby {
                        conn.execute(STANDBY_SESSION).await?;
                    }
                    // Among several hosts, a connection is only ever to the primary.
                    if checks.is_some() && primary::in_recovery(conn).await.unwrap_or(true) {
                        return Err(sqlx::Error::Io(std::io::Error::other(
                            "the database host is a standby (in recovery), not the primary",
                        )));
                    }
                    Ok(())
                })
            })
            .connect_with(options)
            .await?;
        Ok(Store {
            pool,
            dialect,
            facts: Arc::new(AtomicU64::new(0)),
            primary,
            direct: direct.map(Arc::from),
        })
    }

    /// Connects to a database that must already exist: a SQLite file is opened
    /// read-write but never created (for verbs that only read, such as export).
    pub async fn open_existing(url: &str) -> StoreResult<Store> {
        if let Some(rest) = url.strip_prefix("sqlite:") {
            let path = rest.trim_start_matches("//");
            let path = path.split('?').next().unwrap_or_default();
            if path.is_empty() || path == ":memory:" || !std::path::Path::new(path).is_file() {
                return Err(StoreError::NotFound(format!(
                    "the SQLite file `{path}` does not exist"
                )));
            }
            let separator = if url.contains('?') { "&" } else { "?" };
            return Store::connect(&format!("{url}{separator}mode=rw")).await;
        }
        Store::connect(url).await
    }

    /// Tells every process listening on `channel` (PostgreSQL `NOTIFY`), inside a
    /// transaction: PostgreSQL delivers it at the commit, atomically with the change,
    /// and never when the transaction rolls back. Nothing to do on SQLite, whose
    /// database one process serves.
    pub(crate) async fn notify_in(
        &self,
        conn: &mut AnyConnection,
        channel: &str,
        payload: &str,
    ) -> StoreResult<()> {
        if self.dialect == Dialect::Postgres {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(channel)
                .bind(payload)
                .execute(&mut *conn)
                .await?;
        }
        Ok(())
    }

    /// The count of changes of the kept facts seen so far.
    pub fn facts_version(&self) -> u64 {
        self.facts.load(Ordering::Acquire)
    }

    /// Records a change of the kept facts: called after the commit of every write of
    /// organizations, memberships, Roles, the super-admin flag, notification
    /// preferences and exemptions, and when another replica's change is heard of.
    pub fn facts_changed(&self) {
        self.facts.fetch_add(1, Ordering::AcqRel);
    }

    /// Whether the pool follows a primary among several hosts.
    pub fn follows_primary(&self) -> bool {
        self.primary.is_some()
    }

    /// Keeps the pool on the primary (one round of the `primary` worker): when its
    /// host is no longer the primary, or does not answer, the pool moves to the host
    /// that is, the kept facts are dropped (changes may have been missed) and the
    /// LISTEN connection reconnects ([`Store::primary_moves`]). Answers whether it
    /// moved; an error when no host is the primary now.
    pub async fn keep_primary(&self) -> StoreResult<bool> {
        let Some(primary) = &self.primary else {
            return Ok(false);
        };
        if primary::pool_on_primary(&self.pool).await {
            return Ok(false);
        }
        let (index, options) = primary.find().await?;
        primary.move_to(&self.pool, index, options);
        self.facts_changed();
        Ok(true)
    }

    /// Counts the pool's moves to a new primary (never changes with one host).
    pub fn primary_moves(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.primary.as_ref().map(|primary| primary.moves())
    }

    /// The URL a session of its own (LISTEN) connects to: `DATABASE_DIRECT_URL`
    /// behind a pooler, the primary's host, or `url` itself with one host.
    pub fn session_url(&self, url: &str) -> String {
        if let Some(direct) = &self.direct {
            return direct.to_string();
        }
        match &self.primary {
            Some(primary) => primary.current_url().to_owned(),
            None => primary::split_hosts(url)
                .ok()
                .and_then(|hosts| hosts.into_iter().next())
                .unwrap_or_else(|| url.to_owned()),
        }
    }

    /// Whether the database answers.
    pub async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(self.pool()).await?;
        Ok(())
    }

    /// The backend's dialect.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Rewrites `$n` placeholders for the backend.
    pub(crate) fn sql(&self, text: &str) -> String {
        match self.dialect {
            Dialect::Postgres => text.to_owned(),
            Dialect::Sqlite => sqlite_placeholders(text),
        }
    }

    /// The executor of single statements (each in a transaction of its own behind
    /// a pooler).
    pub(crate) fn pool(&self) -> pooler::Statements<'_> {
        pooler::Statements {
            pool: &self.pool,
            pooled: self.direct.is_some(),
        }
    }

    /// A connection for several statements that are not one unit of work (see
    /// [`pooler::Connection`]): its [`pooler::Connection::finish`] ends it.
    pub(crate) async fn connection(&self) -> StoreResult<pooler::Connection> {
        Ok(pooler::Connection::take(&self.pool, self.direct.is_some()).await?)
    }

    /// Begins a transaction (see [`pooler::begin`]).
    pub(crate) async fn begin(&self) -> StoreResult<sqlx::Transaction<'static, sqlx::Any>> {
        Ok(pooler::begin(&self.pool, self.direct.is_some()).await?)
    }

    /// Whether the pool's connections go through a pooler in transaction mode.
    pub fn pooled(&self) -> bool {
        self.direct.is_some()
    }

    /// Closes the pool.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}
