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
mod connection;
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
