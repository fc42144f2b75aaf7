//! A pooler in transaction mode (pgbouncer) between the server and PostgreSQL:
//! `DATABASE_URL` names the pooler and `DATABASE_DIRECT_URL` the database itself.
//!
//! The pooler gives a client's connection a server connection for one transaction
//! only. A statement outside a transaction is two exchanges for sqlx (parse and
//! describe, then bind and execute, each ended by a Sync), which the pooler may send
//! to two different server connections; a prepared statement kept for the next use
//! would be on a server connection the next transaction may not get. So, on the
//! pooled path:
//! - every statement runs inside a transaction: a unit of work's, or one of its own
//!   ([`Statements`], what [`super::Store::pool`] answers) or of a few reads together
//!   ([`Connection`]), committed before the statement's answer is returned (a write
//!   acknowledged is committed);
//! - sqlx keeps no prepared statement (`statement-cache-capacity=0`), and every
//!   transaction begins by dropping those an earlier client left on the server
//!   connection ([`POOLED_BEGIN`]), so their names never collide;
//! - what needs a session of its own (migrations, LISTEN) connects to
//!   `DATABASE_DIRECT_URL` ([`super::Store::session_url`]); nothing on the pooled path
//!   sets anything for the session or takes a session lock.
//!
//! With direct connections every statement goes to the pool as it is.

use std::ops::{Deref, DerefMut};

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use futures_util::{StreamExt as _, TryStreamExt as _};
use sqlx::any::{AnyQueryResult, AnyRow, AnyStatement, AnyTypeInfo};
use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyConnection, AnyPool, Describe, Either, Execute, Executor};

use super::StoreResult;

/// How a transaction begins on the pooled path: the server connection the pooler
/// lends may hold statements another client prepared (sqlx names them by a count
/// of its own), dropped before any of this transaction's.
pub(crate) const POOLED_BEGIN: &str = "BEGIN; DEALLOCATE ALL";

/// The pooled URL as sqlx must read it: no statement kept between transactions.
pub(crate) fn pooled_url(url: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}statement-cache-capacity=0")
}

/// Begins a transaction on `pool`, through the pooler or not.
pub(crate) async fn begin(
    pool: &AnyPool,
    pooled: bool,
) -> Result<sqlx::Transaction<'static, Any>, sqlx::Error> {
    if pooled {
        pool.begin_with(POOLED_BEGIN).await
    } else {
        pool.begin().await
    }
}

/// The pool as the executor of single statements: on the pooled path each runs in
/// a transaction of its own, committed before its answer is returned.
#[derive(Debug, Clone, Copy)]
pub struct Statements<'s> {
    pub(super) pool: &'s AnyPool,
    pub(super) pooled: bool,
}

impl<'s> Executor<'s> for Statements<'s> {
    type Database = Any;

    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxStream<'e, Result<Either<AnyQueryResult, AnyRow>, sqlx::Error>>
    where
        's: 'e,
        E: 'q + Execute<'q, Any>,
    {
        if !self.pooled {
            return self.pool.fetch_many(query);
        }
        let pool = self.pool.clone();
        // The answers are read whole before the commit (a statement's answer is
        // bounded by its query's own LIMIT), then handed on.
        futures_util::stream::once(async move {
            let mut tx = begin(&pool, true).await?;
            let answers: Vec<_> = (&mut *tx).fetch_many(query).try_collect().await?;
            tx.commit().await?;
            Ok::<_, sqlx::Error>(futures_util::stream::iter(answers.into_iter().map(Ok)))
        })
        .try_flatten()
        .boxed()
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxFuture<'e, Result<Option<AnyRow>, sqlx::Error>>
    where
        's: 'e,
        E: 'q + Execute<'q, Any>,
    {
        if !self.pooled {
            return self.pool.fetch_optional(query);
        }
        let pool = self.pool.clone();
        Box::pin(async move {
            let mut tx = begin(&pool, true).await?;
            let row = (&mut *tx).fetch_optional(query).await?;
            tx.commit().await?;
            Ok(row)
        })
    }

    fn prepare_with<'e, 'q: 'e>(
        self,
        sql: &'q str,
        parameters: &'e [AnyTypeInfo],
    ) -> BoxFuture<'e, Result<AnyStatement<'q>, sqlx::Error>>
    where
        's: 'e,
    {
        self.pool.prepare_with(sql, parameters)
    }

    fn describe<'e, 'q: 'e>(self, sql: &'q str) -> BoxFuture<'e, Result<Describe<Any>, sqlx::Error>>
    where
        's: 'e,
    {
        self.pool.describe(sql)
    }
}

/// One connection of the pool for several statements that need not be one unit
/// (reads, or writes each of which stands alone): on the pooled path they run in
/// one transaction, so that the pooler keeps one server connection for them;
/// [`Connection::finish`] commits it.
pub(crate) enum Connection {
    Direct(PoolConnection<Any>),
    Pooled(sqlx::Transaction<'static, Any>),
}

impl Connection {
    /// Takes a connection of `pool`.
    pub(crate) async fn take(pool: &AnyPool, pooled: bool) -> Result<Connection, sqlx::Error> {
        Ok(if pooled {
            Connection::Pooled(begin(pool, true).await?)
        } else {
            Connection::Direct(pool.acquire().await?)
        })
    }

    /// Ends the statements' transaction on the pooled path (commits it): to be
    /// called before their answer is used, or what they wrote is rolled back.
    pub(crate) async fn finish(self) -> StoreResult<()> {
        if let Connection::Pooled(tx) = self {
            tx.commit().await?;
        }
        Ok(())
    }
}

impl Deref for Connection {
    type Target = AnyConnection;

    fn deref(&self) -> &AnyConnection {
        match self {
            Connection::Direct(conn) => conn,
            Connection::Pooled(tx) => tx,
        }
    }
}

impl DerefMut for Connection {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        match self {
            Connection::Direct(conn) => conn,
            Connection::Pooled(tx) => tx,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::pooled_url;

    #[test]
    fn the_pooled_url_keeps_no_statement() {
        assert_eq!(
            pooled_url("postgres://u@127.0.0.1:6432/db"),
            "postgres://u@127.0.0.1:6432/db?statement-cache-capacity=0"
        );
        assert_eq!(
            pooled_url("postgres://u@h/db?sslmode=disable"),
            "postgres://u@h/db?sslmode=disable&statement-cache-capacity=0"
        );
    }
}
