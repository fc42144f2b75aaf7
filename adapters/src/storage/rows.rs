//! Multi-row statements: values bound with their types (`Cell`), rows of them
//! (`Rows`), and several inserts written together (`Inserts`).

use sqlx::AnyConnection;

use super::{value_rows, Dialect, Store, StoreResult};

/// One value of a multi-row statement, bound with its type.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell {
    /// Text, or NULL.
    Text(Option<String>),
    /// An integer, or NULL.
    Int(Option<i64>),
}

impl Cell {
    /// `query` with this cell bound as its next parameter.
    fn bind<'q>(
        self,
        query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
    ) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
        match self {
            Cell::Text(text) => query.bind(text),
            Cell::Int(n) => query.bind(n),
        }
    }
}

impl From<String> for Cell {
    fn from(text: String) -> Cell {
        Cell::Text(Some(text))
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Cell {
        Cell::Text(Some(text.to_owned()))
    }
}

impl From<Option<String>> for Cell {
    fn from(text: Option<String>) -> Cell {
        Cell::Text(text)
    }
}

impl From<i64> for Cell {
    fn from(n: i64) -> Cell {
        Cell::Int(Some(n))
    }
}

impl From<Option<i64>> for Cell {
    fn from(n: Option<i64>) -> Cell {
        Cell::Int(n)
    }
}

/// The rows of one multi-row `INSERT`: written in statements of at most
/// [`Rows::CHUNK`] rows, within both backends' limits on bound parameters.
#[derive(Debug)]
pub(crate) struct Rows {
    width: usize,
    cells: Vec<Cell>,
}

impl Rows {
    /// Rows per statement.
    const CHUNK: usize = 200;

    /// No rows yet, of `width` columns.
    pub(crate) fn new(width: usize) -> Rows {
        Rows {
            width,
            cells: Vec::new(),
        }
    }

    /// One more row (of the width given).
    pub(crate) fn push<const N: usize>(&mut self, row: [Cell; N]) {
        debug_assert_eq!(N, self.width);
        self.cells.extend(row);
    }

    /// Each statement `head VALUES (...), (...) tail` with its chunk of cells.
    fn statements<'a>(
        &'a self,
        store: &'a Store,
        (head, tail): (&'a str, &'a str),
    ) -> impl Iterator<Item = (String, &'a [Cell])> + 'a {
        let width = self.width.max(1);
        self.cells.chunks(width * Rows::CHUNK).map(move |chunk| {
            let values = value_rows(1, width, chunk.len() / width);
            (store.sql(&format!("{head} VALUES {values} {tail}")), chunk)
        })
    }

    pub(crate) fn bound<'q, 'c>(
        statement: &'q str,
        cells: impl IntoIterator<Item = &'c Cell>,
    ) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
        cells
            .into_iter()
            .fold(sqlx::query(statement), |query, cell| {
                cell.clone().bind(query)
            })
    }

    /// Whether no row was pushed.
    pub(crate) fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// `(...), (...)` for every row, numbering the parameters from `*next` on.
    fn values_from(&self, next: &mut usize) -> String {
        let width = self.width.max(1);
        let rows = self.cells.len() / width;
        let values = value_rows(*next, width, rows);
        *next += rows * width;
        values
    }

    /// `head VALUES (...), (...) tail` over the connection, a chunk at a time.
    pub(crate) async fn insert(
        self,
        store: &Store,
        conn: &mut AnyConnection,
        head: &str,
        tail: &str,
    ) -> StoreResult<()> {
        for (statement, cells) in self.statements(store, (head, tail)) {
            Rows::bound(&statement, cells).execute(&mut *conn).await?;
        }
        Ok(())
    }

    /// The same, answering the rows every statement returns (`tail` holds the
    /// `RETURNING`).
    pub(crate) async fn fetch(
        self,
        store: &Store,
        conn: &mut AnyConnection,
        head: &str,
        tail: &str,
    ) -> StoreResult<Vec<sqlx::any::AnyRow>> {
        let mut rows = Vec::new();
        for (statement, cells) in self.statements(store, (head, tail)) {
            rows.extend(Rows::bound(&statement, cells).fetch_all(&mut *conn).await?);
        }
        Ok(rows)
    }
}

/// Several multi-row inserts written atomically, in order. On PostgreSQL they are one
/// statement, each insert a data-modifying `WITH` part (one round trip, committed as a
/// whole: no `BEGIN` and `COMMIT` of their own; foreign keys between the parts are
/// checked at its end); on SQLite, or past [`Inserts::MAX_CELLS`], one transaction.
#[derive(Debug, Default)]
pub(crate) struct Inserts {
    parts: Vec<(&'static str, &'static str, Rows)>,
}

impl Inserts {
    /// The most parameters one statement binds (PostgreSQL allows 65,535).
    const MAX_CELLS: usize = 30_000;

    /// Adds `head VALUES ... tail` over `rows` (nothing when there are none).
    pub(crate) fn push(&mut self, head: &'static str, tail: &'static str, rows: Rows) {
        if !rows.is_empty() {
            self.parts.push((head, tail, rows));
        }
    }

    /// The one statement of the parts, or none when they do not fit in one.
    fn statement(&self) -> Option<String> {
        let cells: usize = self.parts.iter().map(|(_, _, rows)| rows.cells.len()).sum();
        if cells > Inserts::MAX_CELLS {
            return None;
        }
        let mut next = 1;
        let parts: Vec<String> = self
            .parts
            .iter()
            .enumerate()
            .map(|(i, (head, tail, rows))| {
                format!(
                    "w{i} AS ({head} VALUES {} {tail})",
                    rows.values_from(&mut next)
                )
            })
            .collect();
        Some(format!("WITH {} SELECT 1", parts.join(", ")))
    }

    /// Writes every part, atomically.
    pub(crate) async fn write(self, store: &Store) -> StoreResult<()> {
        if self.parts.is_empty() {
            return Ok(());
        }
        if store.dialect == Dialect::Postgres {
            if let Some(statement) = self.statement() {
                // The cells are moved into the statement, not copied.
                self.parts
                    .into_iter()
                    .flat_map(|(_, _, rows)| rows.cells)
                    .fold(sqlx::query(&statement), |query, cell| cell.bind(query))
                    .execute(store.pool())
                    .await?;
                return Ok(());
            }
        }
        let mut tx = store.begin().await?;
        for (head, tail, rows) in self.parts {
            rows.insert(store, &mut tx, head, tail).await?;
        }
        tx.commit().await?;
        Ok(())
    }
}
