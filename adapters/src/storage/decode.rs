//! Strict decoding of stored rows. A column that does not hold what the schema
//! promises is an error naming the table and the row, logged at error level: never a
//! default (a bad timestamp is not 1970, an unknown tier is not developer, an
//! unreadable rule is not skipped).

use std::fmt::Display;

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use sqlx::any::AnyRow;
use sqlx::Row;

use super::StoreError;

/// The error for a row that does not decode; logged once, here.
pub(crate) fn corrupt(table: &str, key: &str, what: impl Display) -> StoreError {
    tracing::error!(table, row = key, problem = %what, "a stored row does not decode");
    StoreError::Corrupt(format!("the {table} row `{key}` cannot be read: {what}"))
}

/// Reads the columns of one row of `table`, strictly.
pub(crate) struct Decoder<'r> {
    row: &'r AnyRow,
    table: &'static str,
    key: String,
}

impl<'r> Decoder<'r> {
    /// `key` names the columns that identify the row (for the error message).
    pub fn new(row: &'r AnyRow, table: &'static str, key: &[&str]) -> Self {
        let key = key
            .iter()
            .map(|c| {
                row.try_get::<Option<String>, _>(*c)
                    .ok()
                    .flatten()
                    .unwrap_or_else(|| "?".to_owned())
            })
            .collect::<Vec<_>>()
            .join("/");
        Decoder { row, table, key }
    }

    fn fail(&self, column: &str, what: impl Display) -> StoreError {
        corrupt(
            self.table,
            &self.key,
            format_args!("column `{column}`: {what}"),
        )
    }

    /// A column read as sqlx reads it.
    pub fn get<T>(&self, column: &str) -> Result<T, StoreError>
    where
        T: for<'a> sqlx::Decode<'a, sqlx::Any> + sqlx::Type<sqlx::Any>,
    {
        self.row
            .try_get::<T, _>(column)
            .map_err(|e| self.fail(column, e))
    }

    /// An RFC 3339 timestamp.
    pub fn stamp(&self, column: &str) -> Result<DateTime<Utc>, StoreError> {
        let text: String = self.get(column)?;
        self.parse_stamp(column, &text)
    }

    /// An optional RFC 3339 timestamp.
    pub fn opt_stamp(&self, column: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
        self.get::<Option<String>>(column)?
            .map(|text| self.parse_stamp(column, &text))
            .transpose()
    }

    fn parse_stamp(&self, column: &str, text: &str) -> Result<DateTime<Utc>, StoreError> {
        DateTime::parse_from_rfc3339(text)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|e| self.fail(column, format_args!("`{text}` is not a timestamp ({e})")))
    }

    /// A 0/1 flag.
    pub fn flag(&self, column: &str) -> Result<bool, StoreError> {
        match self.get::<i64>(column)? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(self.fail(column, format_args!("`{other}` is not a flag"))),
        }
    }

    /// JSON text holding a `T`.
    pub fn json<T: DeserializeOwned>(&self, column: &str) -> Result<T, StoreError> {
        let text: String = self.get(column)?;
        serde_json::from_str(&text).map_err(|e| self.fail(column, e))
    }

    /// Optional JSON text holding a `T`.
    pub fn opt_json<T: DeserializeOwned>(&self, column: &str) -> Result<Option<T>, StoreError> {
        self.get::<Option<String>>(column)?
            .map(|text| serde_json::from_str(&text).map_err(|e| self.fail(column, e)))
            .transpose()
    }

    /// A non-negative integer that fits a `u32`.
    pub fn u32(&self, column: &str) -> Result<u32, StoreError> {
        let n: i64 = self.get(column)?;
        u32::try_from(n).map_err(|_| self.fail(column, format_args!("`{n}` is out of range")))
    }

    /// An optional non-negative integer that fits a `u32`.
    pub fn opt_u32(&self, column: &str) -> Result<Option<u32>, StoreError> {
        self.get::<Option<i64>>(column)?
            .map(|n| {
                u32::try_from(n)
                    .map_err(|_| self.fail(column, format_args!("`{n}` is out of range")))
            })
            .transpose()
    }

    /// A text column that must be one of the names `parse` knows.
    pub fn named<T>(
        &self,
        column: &str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<T, StoreError> {
        let text: String = self.get(column)?;
        parse(&text).ok_or_else(|| self.fail(column, format_args!("unknown value `{text}`")))
    }

    /// The same check for a value already read (for example an element of a list).
    pub fn reject(&self, column: &str, what: impl Display) -> StoreError {
        self.fail(column, what)
    }
}
