//! The ledger's `INSERT`s: rows bound in batches of a few fixed sizes, each size's statement
//! prepared once per connection.

use std::sync::{Arc, LazyLock};

use sqlx::{
    Arguments, AssertSqlSafe, Database, Encode, Executor, IntoArguments, Pool, SqlSafeStr, Type,
};

use super::{COLUMNS, TABLE, column_list, int, is_text};
use crate::LedgerError;
use crate::entry::{CacheOutcome, Entry, utc_day};

/// The row counts the ledger's `INSERT`s are written for. A batch of up to 256 rows goes in
/// one statement, of the smallest of these sizes that holds it, its unused rows bound as
/// NULLs that the statement's `WHERE` drops. So a store prepares nine statements in all
/// (one per batch size would be parsed again for every new size: a 40-row `INSERT` costs
/// about as much to prepare as to run, and a burst after a stall would push the usual sizes
/// out of the statement cache), and a commit still takes one round trip to the database
/// for its rows, not one per piece. 256 rows of 26 columns stay under SQLite's 32,766
/// variables.
const STATEMENT_ROWS: [usize; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/// Rows in the largest `INSERT`.
pub(crate) const ROWS_PER_INSERT: usize = 256;

/// The `day` column's text, written once for a run of rows on the same UTC day.
#[derive(Default)]
struct Days {
    last: Option<(i64, Arc<str>)>,
}

impl Days {
    fn of(&mut self, at_ms: i64) -> Arc<str> {
        let day = at_ms.div_euclid(86_400_000);
        match &self.last {
            Some((d, text)) if *d == day => text.clone(),
            _ => {
                let text: Arc<str> = Arc::from(utc_day(at_ms));
                self.last = Some((day, text.clone()));
                text
            }
        }
    }
}

/// The `cache` column's text, shared rather than copied for each row.
fn cache_text(c: CacheOutcome) -> Arc<str> {
    static MISS: LazyLock<Arc<str>> = LazyLock::new(|| Arc::from(CacheOutcome::Miss.as_str()));
    static PROVIDER: LazyLock<Arc<str>> =
        LazyLock::new(|| Arc::from(CacheOutcome::Provider.as_str()));
    static EXACT: LazyLock<Arc<str>> = LazyLock::new(|| Arc::from(CacheOutcome::Exact.as_str()));
    static SEMANTIC: LazyLock<Arc<str>> =
        LazyLock::new(|| Arc::from(CacheOutcome::Semantic.as_str()));
    static VERIFY: LazyLock<Arc<str>> =
        LazyLock::new(|| Arc::from(CacheOutcome::SemanticVerify.as_str()));
    match c {
        CacheOutcome::Miss => MISS.clone(),
        CacheOutcome::Provider => PROVIDER.clone(),
        CacheOutcome::Exact => EXACT.clone(),
        CacheOutcome::Semantic => SEMANTIC.clone(),
        CacheOutcome::SemanticVerify => VERIFY.clone(),
    }
}

/// Adds `e`'s values to `args`, in [`COLUMNS`] order.
fn add_entry<A>(args: &mut A, e: &Entry, days: &mut Days) -> Result<(), sqlx::error::BoxDynError>
where
    A: Arguments,
    i64: for<'q> Encode<'q, A::Database> + Type<A::Database>,
    Option<i64>: for<'q> Encode<'q, A::Database> + Type<A::Database>,
    Option<Arc<str>>: for<'q> Encode<'q, A::Database> + Type<A::Database>,
{
    let t = &e.tokens;
    // Texts go in by value: an `Arc<str>` is bound as it is, where a `&str` or `String`
    // would be copied into a new allocation.
    args.add(Some(e.request_id.clone()))?;
    args.add(e.at_ms)?;
    args.add(Some(days.of(e.at_ms)))?;
    args.add(e.tenant.clone())?;
    args.add(e.api_key.clone())?;
    args.add(e.model_group.clone())?;
    args.add(e.upstream.clone())?;
    args.add(e.model.clone())?;
    args.add(i64::from(e.status))?;
    args.add(e.error.clone())?;
    args.add(i64::from(e.stream))?;
    args.add(int(t.prompt))?;
    args.add(int(t.cached))?;
    args.add(int(t.cache_write))?;
    args.add(int(t.completion))?;
    args.add(int(t.reasoning))?;
    args.add(e.cost_micros.map(int))?;
    args.add(e.saved_micros)?;
    args.add(int(e.extra_micros))?;
    args.add(Some(cache_text(e.cache)))?;
    args.add(e.ttfb_ms.map(int))?;
    args.add(int(e.total_ms))?;
    args.add(i64::from(e.attempts))?;
    args.add(i64::from(e.hedges))?;
    args.add(i64::from(e.retries))?;
    args.add(e.batch_item.clone())?;
    args.add(e.currency.clone())?;
    args.add(e.native_micros.map(int))?;
    args.add(e.hold.clone())?;
    Ok(())
}

/// Adds a row of NULLs, typed as [`add_entry`] types each column (PostgreSQL matches a
/// `VALUES` column's type across its rows); the `INSERT`'s `WHERE` drops it.
fn add_padding<A>(args: &mut A) -> Result<(), sqlx::error::BoxDynError>
where
    A: Arguments,
    Option<i64>: for<'q> Encode<'q, A::Database> + Type<A::Database>,
    Option<Arc<str>>: for<'q> Encode<'q, A::Database> + Type<A::Database>,
{
    for (_, ty) in COLUMNS {
        if is_text(ty) {
            args.add(None::<Arc<str>>)?;
        } else {
            args.add(None::<i64>)?;
        }
    }
    Ok(())
}

/// The texts of the ledger's `INSERT`s, one per [`STATEMENT_ROWS`] size, written once when
/// the store opens (writing the text for every commit cost two thirds as much as executing
/// it; the same text each time also lets the statement cache hit). Each reads its rows from
/// a `VALUES` list and keeps those whose first column (the request id, never NULL in an
/// entry) is not NULL: `INSERT INTO t (..) SELECT * FROM (VALUES (..), ..) AS v WHERE
/// column1 IS NOT NULL`, which SQLite and PostgreSQL both accept.
#[derive(Debug)]
pub(crate) struct InsertSql {
    texts: Vec<String>,
}

impl InsertSql {
    pub(crate) fn new<DB>() -> Result<Self, LedgerError>
    where
        DB: Database,
        DB::Arguments: Default,
        i64: for<'q> Encode<'q, DB> + Type<DB>,
    {
        // The database's own placeholder syntax (`?`, or `$n` counting the arguments
        // before it), so a stand-in argument goes with each.
        let mut args = DB::Arguments::default();
        let mut text = format!(
            "INSERT INTO {TABLE} ({}) SELECT * FROM (VALUES ",
            column_list()
        );
        let mut texts = Vec::with_capacity(STATEMENT_ROWS.len());
        for row in 1..=ROWS_PER_INSERT {
            text.push_str(if row == 1 { "(" } else { ", (" });
            for column in 0..COLUMNS.len() {
                if column > 0 {
                    text.push_str(", ");
                }
                args.add(0_i64).map_err(sqlx::Error::Encode)?;
                args.format_placeholder(&mut text)
                    .map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
            }
            text.push(')');
            if STATEMENT_ROWS.contains(&row) {
                // A batch item's second row (the item sent again after a crash) is dropped.
                texts.push(format!(
                    "{text}) AS v WHERE column1 IS NOT NULL ON CONFLICT DO NOTHING"
                ));
            }
        }
        Ok(Self { texts })
    }

    /// Every text, smallest first: a new connection prepares them all ([`prepare_inserts`]).
    pub(crate) fn texts(&self) -> &[String] {
        &self.texts
    }

    /// The statement for `rows` rows and the rows it binds: the smallest size that holds
    /// them (`rows` is held to 1 to [`ROWS_PER_INSERT`]).
    fn for_rows(&self, rows: usize) -> (&str, usize) {
        let rows = rows.clamp(1, ROWS_PER_INSERT);
        let i = STATEMENT_ROWS
            .iter()
            .position(|&size| size >= rows)
            .unwrap_or(STATEMENT_ROWS.len() - 1);
        let text = self.texts.get(i).map_or("", String::as_str);
        (
            text,
            STATEMENT_ROWS.get(i).copied().unwrap_or(ROWS_PER_INSERT),
        )
    }
}

/// Prepares every `INSERT` of `sql` on `conn`, into its statement cache, once it connects:
/// otherwise each connection parsed each size at its first commit of that size, on the
/// ledger's write path (millions of instructions for the larger ones on SQLite, and a
/// cost that showed in whichever requests happened to be measured then).
pub(crate) async fn prepare_inserts<DB>(
    sql: &InsertSql,
    conn: &mut DB::Connection,
) -> Result<(), sqlx::Error>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    for text in sql.texts() {
        // Audited: built by `InsertSql::new` from this module's constants only.
        (&mut *conn)
            .prepare(AssertSqlSafe(text.clone()).into_sql_str())
            .await?;
    }
    Ok(())
}

/// Inserts `entries`, [`ROWS_PER_INSERT`] to a statement, all in one transaction: every
/// entry is in the ledger when this returns `Ok`, none when it fails. A batch that fits one
/// statement is written by that statement alone, which the database commits atomically on
/// its own: one round trip, where `BEGIN` and `COMMIT` would add two (each a pair of thread
/// wake-ups on SQLite, a network exchange on PostgreSQL).
pub(crate) async fn insert<DB>(
    pool: &Pool<DB>,
    sql: &InsertSql,
    entries: &[Entry],
) -> Result<(), LedgerError>
where
    DB: Database,
    DB::Arguments: Default + IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    Option<i64>: for<'q> Encode<'q, DB> + Type<DB>,
    Option<Arc<str>>: for<'q> Encode<'q, DB> + Type<DB>,
{
    if entries.is_empty() {
        return Ok(());
    }
    if entries.len() <= ROWS_PER_INSERT {
        return insert_statement(sql, entries, pool).await;
    }
    let mut tx = pool.begin().await?;
    for chunk in entries.chunks(ROWS_PER_INSERT) {
        insert_statement(sql, chunk, &mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Inserts `entries`, [`ROWS_PER_INSERT`] to a statement, in the transaction `tx` (which
/// moves tenants' balances with them).
pub(crate) async fn insert_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    sql: &InsertSql,
    entries: &[Entry],
) -> Result<(), LedgerError> {
    for chunk in entries.chunks(ROWS_PER_INSERT) {
        insert_statement(sql, chunk, &mut **tx).await?;
    }
    Ok(())
}

/// Inserts `rows` (at most [`ROWS_PER_INSERT`]) with one statement on `on`.
async fn insert_statement<'c, DB, E>(
    sql: &InsertSql,
    rows: &[Entry],
    on: E,
) -> Result<(), LedgerError>
where
    DB: Database,
    DB::Arguments: Default + IntoArguments<DB>,
    E: Executor<'c, Database = DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    Option<i64>: for<'q> Encode<'q, DB> + Type<DB>,
    Option<Arc<str>>: for<'q> Encode<'q, DB> + Type<DB>,
{
    let (text, size) = sql.for_rows(rows.len());
    let mut args = DB::Arguments::default();
    let mut days = Days::default();
    for e in rows {
        add_entry(&mut args, e, &mut days).map_err(sqlx::Error::Encode)?;
    }
    for _ in rows.len()..size {
        add_padding(&mut args).map_err(sqlx::Error::Encode)?;
    }
    sqlx::query_with(AssertSqlSafe(text), args)
        .execute(on)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests;
