//! Storage: one `Store` over PostgreSQL or SQLite (chosen by the URL's scheme), with
//! migrations per backend. Queries are written once with `$n` placeholders; the
//! `Dialect` rewrites them for SQLite (`?n`) and supplies the few statements that
//! differ. Every query that touches tenant data is scoped by organization.
//!
//! This module holds SQL and nothing else: no policy is decided here.

mod access;
mod accounts;
mod admin;
mod ai_settings;
mod alerts;
mod announcements;
mod audit;
mod billing;
mod builds;
mod checkpoints;
mod checks;
mod console;
mod conversations;
mod dashboards;
mod decode;
mod entitlement;
mod exemptions;
mod exports;
mod heartbeat;
mod intents;
mod invitations;
mod judgements;
mod keys;
mod lifecycle;
mod members;
mod messages;
mod migrate;
mod notifications;
mod orgs;
mod outbox;
mod pipelines;
mod places;
mod plugins;
mod policies;
mod pooler;
mod posture;
mod preferences;
pub mod primary;
pub use pooler::Statements;
mod quota;
mod reevaluation;
mod reports;
mod roles;
mod rows;
mod rules;
mod scans;
mod schedules;
mod sessions;
mod sso;
mod subjects;
mod subscriptions;
mod sweeps;
mod tokens;
mod unit;

use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyConnection, AnyPool, Executor};

pub use access::{AccessSnapshot, MyOrganization};
pub use accounts::{
    AccountMail, AccountRecord, NewAccount, NewAccountMail, SessionStanding, Verification,
};
pub use admin::{AccountFilter, AccountState, AdminAccountRow, ImpersonationRow, UserMembership};
pub use ai_settings::{AiSettingsRow, OwnProviderRow};
pub use alerts::{
    AlertDeliveryRow, AlertRuleRow, AlertTable, DestinationRow, EvaluationWrite, TransitionRow,
};
pub use announcements::{AnnouncementFields, AnnouncementRecord, Reader};
pub use audit::AuditFilter;
pub use billing::SubscriptionRecord;
pub use builds::{BuildJob, NextStep};
pub use checkpoints::{CheckpointCandidate, CheckpointRecord};
pub use checks::{CheckRecord, LiveCheck};
pub use console::{ConsoleImpersonation, ConsoleSessionRecord};
pub use conversations::{
    ConversationMessageRecord, ConversationRecord, FeedRow, NewMessage, ParticipantRecord, Rate,
};
pub use dashboards::DashboardRow;
pub use entitlement::{EntitlementWrite, LimitSync};
pub use exemptions::{ExemptionRecord, NewExemption};
pub use exports::{ExportRecord, ExportSource};
pub use intents::IntentRecord;
pub use invitations::{InvitationRecord, InvitationStatus};
pub use judgements::{digest as judgement_digest, DoorJudgement, JudgementSource, Kept};
pub use keys::{DataKeyRow, KeyConfigRow, OldSecret, SecretColumn, SECRET_COLUMNS};
pub use lifecycle::DeletedOrg;
pub use members::{MemberRecord, Seats};
pub use messages::MessageRecord;
pub use notifications::{
    Attempt, ClaimedDelivery, DigestMaker, HeldItem, HeldWindow, LogEntry, NewNotification,
};
pub use orgs::{NewOrganization, OrgRecord};
pub use outbox::{Fold, FoldKey, OutboxDepth, Pending};
pub use pipelines::{PipelineFields, PipelineFilter, PipelineRecord, RegistryEntry};
pub use plugins::{NewPlugin, PluginChange, PluginFilter, PluginRecord};
pub use policies::PolicyRecord;
pub use posture::{FailingRule, Judged, JudgedFilter, PostureSnapshot, StatusCounts};
pub use preferences::NotificationPreference;
pub(crate) use quota::refusal as quota_refusal;
pub use quota::{Charge, Charged, QuotaRefusal, UsageRow};
pub use reevaluation::{ClaimedEntity, QueueDepth, EVERYTHING};
pub use reports::{
    AttemptRow, Derived, ExecutionRow, NewReportEvent, ReportScope, StageRow, UnattributedRow,
};
pub use roles::RoleRecord;
pub(crate) use rows::{Cell, Inserts, Rows};
pub use rules::{RuleChange, RuleFilter, StoredRule};
pub use scans::{phases, EntityFilter, NewScan, ScanCounts, ScanRecord, ScanResult};
pub use schedules::{ScheduleFields, ScheduleRecord};
pub use sessions::{FamilyRecord, Rotation};
pub use sso::{
    BreakGlassRow, DomainRow, IdentityRow, IdpConfigRow, MemberRoles, PendingLinkRow,
    ProvisionedAccount, SignInAttemptRow, SsoPolicyRow, NO_PASSWORD,
};
pub use subjects::Subject;
pub use sweeps::{Flush, SweepState, SweptEntity};
pub use tokens::PersonalTokenRecord;
pub(crate) use unit::unit_of_work;
pub use unit::{Contention, Transaction, ATTEMPTS};

/// What went wrong in storage, in terms the API can answer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A uniqueness rule was broken.
    #[error("{0}")]
    Conflict(String),
    /// The row does not exist (in this organization).
    #[error("{0}")]
    NotFound(String),
    /// The data offered cannot be stored (for example an audit event that does not seal).
    #[error("{0}")]
    Invalid(String),
    /// A stored row does not decode (named by table and row; logged at error level).
    #[error("{0}")]
    Corrupt(String),
    /// The database cannot be reached.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// The database rolled the transaction back for a conflict with another one (a
    /// serialization failure or a deadlock): run again, it may well succeed.
    #[error("transaction rolled back for a conflict: {0}")]
    Contended(String),
    /// Anything else.
    #[error("database error: {0}")]
    Other(String),
}

/// The conflict a uniqueness rule answers.
pub const SAME_NAME: &str = "a record with the same name already exists";

/// A write a unique constraint refused, told in the caller's words (`message` is
/// made only then); any other error as it is.
pub(crate) fn taken<M: Into<String>>(
    message: impl FnOnce() -> M,
) -> impl FnOnce(sqlx::Error) -> StoreError {
    move |error| match StoreError::from(error) {
        StoreError::Conflict(_) => StoreError::Conflict(message().into()),
        other => other,
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        match &error {
            sqlx::Error::Database(db) if db.is_unique_violation() => {
                StoreError::Conflict(SAME_NAME.to_owned())
            }
            // The server went away under the connection: a restart (57P01..57P03), a
            // connection failure (class 08), or no slot for a new one (53300).
            // A server that cannot write: a standby (25006 read-only transaction,
            // 0A000 of a server in recovery), the old primary after a failover.
            sqlx::Error::Database(db)
                if db.code().is_some_and(|code| {
                    code.starts_with("08")
                        || code.starts_with("57P")
                        || code == "53300"
                        || code == "25006"
                        || (code == "0A000" && db.message().contains("recovery"))
                }) =>
            {
                primary::suspect();
                StoreError::Unavailable(error.to_string())
            }
            // A serialization failure or a deadlock: PostgreSQL rolled the transaction
            // back, and the same unit run again succeeds (the unit of work's runner
            // does; past its attempts, 503 with Retry-After, not 500). No server is
            // missing: the primary is not looked for.
            // SQLite's own: a transaction that read and then wants to write while
            // another holds the write lock is refused at once (SQLITE_BUSY, 5, and
            // its extended codes; SQLITE_LOCKED, 6), whatever the busy timeout: the
            // same conflict, settled the same way.
            sqlx::Error::Database(db)
                if db.code().is_some_and(|code| {
                    code == "40001"
                        || code == "40P01"
                        || code == "5"
                        || code == "6"
                        || code == "261"
                        || code == "517"
                }) =>
            {
                StoreError::Contended(error.to_string())
            }
            sqlx::Error::RowNotFound => StoreError::NotFound("record".to_owned()),
            sqlx::Error::Io(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Tls(_)
            | sqlx::Error::WorkerCrashed => {
                primary::suspect();
                StoreError::Unavailable(error.to_string())
            }
            _ => StoreError::Other(error.to_string()),
        }
    }
}

/// Result of a storage call.
pub type StoreResult<T> = Result<T, StoreError>;

/// Which SQL dialect the pool speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// PostgreSQL.
    Postgres,
    /// SQLite.
    Sqlite,
}

/// The database.
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    dialect: Dialect,
    /// How many changes of the kept facts this process has seen (its own writes,
    /// and other replicas' through [`FACTS_CHANNEL`]): a kept fact loaded under an
    /// older count is not used.
    facts: Arc<AtomicU64>,
    /// The hosts, when `DATABASE_URL` names several (the pool follows the primary).
    primary: Option<Arc<primary::Primary>>,
    /// `DATABASE_DIRECT_URL`, when the pool's connections go through a pooler in
    /// transaction mode (`pooler`): sessions of their own connect there.
    direct: Option<Arc<str>>,
}

/// The kept facts changed (organizations, memberships, Roles, the super-admin flag,
/// notification preferences, approved exemptions): on PostgreSQL the triggers of
/// migration 0015 send it inside every such change's transaction; each replica's
/// kept facts (`services::kept`) follow it.
pub const FACTS_CHANNEL: &str = "compliance_facts";

/// A key configuration or a data key changed (payload: the organization's id): on
/// PostgreSQL the triggers of migration 0024 send it; every replica drops the data
/// keys it unwrapped.
pub const KEYS_CHANNEL: &str = "compliance_keys";

/// The `last_error` of a webhook delivery waiting for its organization's key (not an
/// attempt: it is sent once the key opens again).
pub const WAITING_FOR_KEY: &str =
    "waiting: the organization's key cannot be used (KMS_UNAVAILABLE)";

/// An account's limits changed (`give-back <root>`: replicas give back the units
/// they reserved) or its usage was reset (`forget <root>`: the reset counted them).
pub const QUOTA_CHANNEL: &str = "compliance_quota";

/// Which server a store connects to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// The primary: every write, and reads.
    Primary,
    /// A streaming standby: the reports' reads.
    Standby,
}

/// What every standby session sets first.
const STANDBY_SESSION: &str =
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

/// `$n` placeholders as SQLite's `?n`; a `$` inside a quoted literal or identifier
/// (`'...'`, `"..."`, quotes doubled inside) or not followed by a digit is left alone.
fn sqlite_placeholders(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut quote: Option<char> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match quote {
            Some(open) => {
                // A doubled quote inside a literal is the quote itself: it closes
                // and reopens, which this toggling reads the same way.
                if c == open {
                    quote = None;
                }
                out.push(c);
            }
            None => match c {
                '\'' | '"' => {
                    quote = Some(c);
                    out.push(c);
                }
                '$' if chars.peek().is_some_and(char::is_ascii_digit) => out.push('?'),
                _ => out.push(c),
            },
        }
    }
    out
}

/// A timestamp as stored: RFC 3339, UTC, microseconds.
pub(crate) fn stamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// The table of a target's entities (`pipeline` or `plugin`).
pub(crate) fn entity_table(target: &str) -> StoreResult<&'static str> {
    match target {
        "pipeline" => Ok("pipelines"),
        "plugin" => Ok("plugins"),
        other => Err(StoreError::Invalid(format!(
            "no entities of target `{other}`"
        ))),
    }
}

/// `$from, $from+1, ...`: `n` placeholders for an `IN (...)` or `VALUES` list.
pub(crate) fn placeholders(from: usize, n: usize) -> String {
    (from..from + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `count` rows of `width` placeholders each, numbered from `$first`:
/// `($1, $2), ($3, $4)`.
pub(crate) fn value_rows(first: usize, width: usize, count: usize) -> String {
    (0..count)
        .map(|i| format!("({})", placeholders(first + i * width, width)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A new random identifier.
pub fn new_id() -> String {
    crate::new_id()
}

/// The pool, for test harnesses that create and drop databases.
#[doc(hidden)]
pub fn pool_for_tests(store: &Store) -> &AnyPool {
    &store.pool
}

/// The executor the storage runs single statements on (behind a pooler, each in a
/// transaction of its own), for tests.
pub fn statements_for_tests(store: &Store) -> pooler::Statements<'_> {
    store.pool()
}

impl Store {
    /// The organization's entities of `target` whose ids are among `ids` (those that
    /// exist, in no particular order) as a judge reads them, 500 ids a query: a batch
    /// of the re-evaluation queue reads its entities together.
    pub async fn subjects_of(
        &self,
        target: &str,
        org_id: &str,
        ids: &[&str],
    ) -> StoreResult<Vec<Subject>> {
        let table = entity_table(target)?;
        let columns = subjects::subject_columns(target)?;
        let mut found = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let sql = self.sql(&format!(
                "SELECT {columns} FROM {table} WHERE org_id = $1 AND id IN ({})",
                placeholders(2, chunk.len())
            ));
            let mut query = sqlx::query(&sql).bind(org_id.to_owned());
            for id in chunk {
                query = query.bind((*id).to_owned());
            }
            for row in query.fetch_all(self.pool()).await? {
                found.push(subjects::subject_from_row(target, &row)?);
            }
        }
        Ok(found)
    }
}

impl Store {
    /// A page of a filtered list and how many rows match: `SELECT {select} FROM {from}
    /// WHERE {condition} ORDER BY {order_by}` with LIMIT and OFFSET, and its COUNT(*).
    /// `condition` uses `$1..$n` for `binds`, in order; the two queries share them.
    pub(crate) async fn page(
        &self,
        (select, from, condition, order_by): (&str, &str, &str, &str),
        binds: &[Option<String>],
        limit: u32,
        offset: u64,
    ) -> StoreResult<(Vec<sqlx::any::AnyRow>, u64)> {
        use sqlx::Row;
        let n = binds.len();
        let sql = self.sql(&format!(
            "SELECT {select} FROM {from} WHERE {condition} ORDER BY {order_by} LIMIT ${} OFFSET ${}",
            n + 1,
            n + 2
        ));
        let mut query = sqlx::query(&sql);
        for value in binds {
            query = query.bind(value.clone());
        }
        let rows = query
            .bind(i64::from(limit))
            .bind(i64::try_from(offset).unwrap_or(i64::MAX))
            .fetch_all(self.pool())
            .await?;
        let count_sql = self.sql(&format!(
            "SELECT COUNT(*) AS n FROM {from} WHERE {condition}"
        ));
        let mut count = sqlx::query(&count_sql);
        for value in binds {
            count = count.bind(value.clone());
        }
        let total = count.fetch_one(self.pool()).await?.try_get::<i64, _>("n")?;
        Ok((rows, total.unsigned_abs()))
    }
}

#[cfg(test)]
mod tests {
    use super::sqlite_placeholders;

    #[test]
    fn placeholders_are_rewritten_outside_literals_only() {
        assert_eq!(
            sqlite_placeholders("SELECT a FROM t WHERE b = $1 AND c = $12"),
            "SELECT a FROM t WHERE b = ?1 AND c = ?12"
        );
        assert_eq!(
            sqlite_placeholders("SELECT '$1', 'it''s $2', \"col$3\" FROM t WHERE x = $4"),
            "SELECT '$1', 'it''s $2', \"col$3\" FROM t WHERE x = ?4"
        );
        assert_eq!(
            sqlite_placeholders("SELECT json_extract(doc, '$.name') FROM t WHERE id = $1"),
            "SELECT json_extract(doc, '$.name') FROM t WHERE id = ?1"
        );
        assert_eq!(sqlite_placeholders("SELECT $ FROM t"), "SELECT $ FROM t");
    }
}
