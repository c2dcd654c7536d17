//! The ledger's SQL, written once for both databases: each database's placeholders come from
//! sqlx (its query builder, or its argument list for the `INSERT` whose text is kept), and
//! the few differences (the row id column) are arguments.

use std::sync::{Arc, LazyLock};

use sqlx::query_builder::QueryBuilder;
use sqlx::{
    Arguments, AssertSqlSafe, ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool,
    Row, SqlSafeStr, Type,
};

use crate::LedgerError;
use crate::entry::{CacheOutcome, Entry, Tokens, utc_day};
use crate::query::{UsageQuery, UsageRow};

/// The ledger table.
pub(crate) const TABLE: &str = "sluice_ledger";

/// API keys made at run time (their hashes).
pub(crate) const KEYS: &str = "sluice_keys";

/// Tenants set through the admin API.
pub(crate) const TENANTS: &str = "sluice_tenants";

/// Keys revoked through the admin API, by hash: a revoked hash stays refused, wherever the
/// key was defined.
pub(crate) const REVOKED: &str = "sluice_revoked_keys";

/// What automatic routers learnt, per router, task and candidate group.
pub(crate) const BELIEFS: &str = "sluice_router_beliefs";

/// The columns an entry fills, in binding order, with their SQL types (the same words in
/// SQLite and PostgreSQL).
const COLUMNS: [(&str, &str); 25] = [
    ("request_id", "TEXT NOT NULL"),
    ("at_ms", "BIGINT NOT NULL"),
    ("day", "TEXT NOT NULL"),
    ("tenant", "TEXT"),
    ("api_key", "TEXT"),
    ("model_group", "TEXT"),
    ("upstream", "TEXT"),
    ("model", "TEXT"),
    ("status", "BIGINT NOT NULL"),
    ("error", "TEXT"),
    ("stream", "BIGINT NOT NULL"),
    ("prompt_tokens", "BIGINT NOT NULL"),
    ("cached_tokens", "BIGINT NOT NULL"),
    ("cache_write_tokens", "BIGINT NOT NULL"),
    ("completion_tokens", "BIGINT NOT NULL"),
    ("reasoning_tokens", "BIGINT NOT NULL"),
    ("cost_micros", "BIGINT NOT NULL"),
    ("saved_micros", "BIGINT NOT NULL"),
    ("extra_micros", "BIGINT NOT NULL"),
    ("cache", "TEXT NOT NULL"),
    ("ttfb_ms", "BIGINT"),
    ("total_ms", "BIGINT NOT NULL"),
    ("attempts", "BIGINT NOT NULL"),
    ("hedges", "BIGINT NOT NULL"),
    ("retries", "BIGINT NOT NULL"),
];

/// The column names, comma-separated, in binding order.
fn column_list() -> String {
    COLUMNS.map(|(name, _)| name).join(", ")
}

/// Whether a column of SQL type `ty` holds text (the others hold integers).
fn is_text(ty: &str) -> bool {
    ty.starts_with("TEXT")
}

/// The row counts the ledger's `INSERT`s are written for. A batch of up to 256 rows goes in
/// one statement, of the smallest of these sizes that holds it, its unused rows bound as
/// NULLs that the statement's `WHERE` drops. So a store prepares nine statements in all
/// (one per batch size would be parsed again for every new size: a 40-row `INSERT` costs
/// about as much to prepare as to run, and a burst after a stall would push the usual sizes
/// out of the statement cache), and a commit still takes one round trip to the database
/// for its rows, not one per piece. 256 rows of 25 columns stay under SQLite's 32,766
/// variables.
const STATEMENT_ROWS: [usize; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/// Rows in the largest `INSERT`.
pub(crate) const ROWS_PER_INSERT: usize = 256;

/// Creates the table and its indexes if absent; `row_id` declares the database's
/// auto-numbered key column.
pub(crate) async fn create<DB>(pool: &Pool<DB>, row_id: &str) -> Result<(), LedgerError>
where
    DB: Database,
    DB::Arguments: Default + IntoArguments<DB>,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
{
    for statement in schema(row_id) {
        // Audited: built from this module's constants only.
        sqlx::query::<DB>(AssertSqlSafe(statement))
            .execute(pool)
            .await?;
    }
    Ok(())
}

fn schema(row_id: &str) -> Vec<String> {
    let mut cols = vec![format!("seq {row_id}")];
    for (name, ty) in COLUMNS {
        cols.push(format!("{name} {ty}"));
    }
    vec![
        format!("CREATE TABLE IF NOT EXISTS {TABLE} ({})", cols.join(", ")),
        format!(
            "CREATE TABLE IF NOT EXISTS {KEYS} (name TEXT PRIMARY KEY, tenant TEXT NOT NULL, \
             sha256 TEXT NOT NULL, lane TEXT, models TEXT NOT NULL)"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {REVOKED} (sha256 TEXT PRIMARY KEY, name TEXT NOT NULL, \
             tenant TEXT NOT NULL, revoked_ms BIGINT NOT NULL)"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {TENANTS} (name TEXT PRIMARY KEY, lane TEXT, \
             credits_micros BIGINT, rpm BIGINT, tpm BIGINT, tokens_per_day BIGINT, \
             spend_per_month_micros BIGINT)"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {BELIEFS} (router TEXT NOT NULL, task TEXT NOT NULL, \
             grp TEXT NOT NULL, alpha DOUBLE PRECISION NOT NULL, beta DOUBLE PRECISION NOT NULL, \
             output_tokens DOUBLE PRECISION, cached_share DOUBLE PRECISION, \
             PRIMARY KEY (router, task, grp))"
        ),
        format!("CREATE INDEX IF NOT EXISTS {TABLE}_at ON {TABLE} (at_ms)"),
        format!("CREATE INDEX IF NOT EXISTS {TABLE}_tenant_at ON {TABLE} (tenant, at_ms)"),
    ]
}

/// A count as the database's signed integer (counts past 2^63 do not occur; they saturate).
/// A stored integer read back into the narrower type it was written from; a value that
/// does not fit (a row written by something else) is a decode error, never a silent 0.
pub(crate) fn narrow<T: TryFrom<i64>>(v: i64, column: usize) -> Result<T, sqlx::Error> {
    T::try_from(v).map_err(|_| sqlx::Error::ColumnDecode {
        index: column.to_string(),
        source: format!("{v} is out of range for this column").into(),
    })
}

fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

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
    args.add(int(e.cost_micros))?;
    args.add(e.saved_micros)?;
    args.add(int(e.extra_micros))?;
    args.add(Some(cache_text(e.cache)))?;
    args.add(e.ttfb_ms.map(int))?;
    args.add(int(e.total_ms))?;
    args.add(i64::from(e.attempts))?;
    args.add(i64::from(e.hedges))?;
    args.add(i64::from(e.retries))?;
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
                texts.push(format!("{text}) AS v WHERE column1 IS NOT NULL"));
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

/// `WHERE` clauses for `q`'s tenant and time range.
fn push_filter<DB>(b: &mut QueryBuilder<DB>, q: &UsageQuery)
where
    DB: Database,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
{
    b.push(" WHERE 1 = 1");
    if let Some(t) = &q.tenant {
        b.push(" AND tenant = ").push_bind(t.clone());
    }
    if let Some(f) = q.from_ms {
        b.push(" AND at_ms >= ").push_bind(f);
    }
    if let Some(t) = q.to_ms {
        b.push(" AND at_ms < ").push_bind(t);
    }
}

/// The totals `q` asks for, ordered by its grouped columns.
pub(crate) async fn usage<DB>(pool: &Pool<DB>, q: &UsageQuery) -> Result<Vec<UsageRow>, LedgerError>
where
    DB: Database,
    DB::Arguments: Default + IntoArguments<DB>,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB> + for<'r> Decode<'r, DB>,
    String: for<'q> Encode<'q, DB> + Type<DB>,
    Option<String>: for<'r> Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    let keys: Vec<&str> = q.group_by.iter().map(|g| g.column()).collect();
    let sum = |expr: &str| format!("CAST(COALESCE(SUM({expr}), 0) AS BIGINT)");
    let mut select: Vec<String> = keys.iter().map(|k| (*k).to_string()).collect();
    select.push("CAST(COUNT(*) AS BIGINT)".into());
    select.push(sum(
        "CASE WHEN error IS NULL AND status < 400 THEN 0 ELSE 1 END",
    ));
    for c in [
        "prompt_tokens",
        "cached_tokens",
        "cache_write_tokens",
        "completion_tokens",
        "reasoning_tokens",
        "cost_micros",
        "saved_micros",
        "extra_micros",
        "hedges",
        "retries",
    ] {
        select.push(sum(c));
    }
    select.push(sum(
        "CASE WHEN cache IN ('miss', 'semantic_verify') THEN 0 ELSE 1 END",
    ));
    select.push(sum("CASE WHEN cache = 'semantic_verify' THEN 1 ELSE 0 END"));
    select.push(sum(
        "CASE WHEN cache = 'semantic_verify' THEN cost_micros ELSE 0 END",
    ));
    select.push(sum(
        "CASE WHEN cache IN ('exact', 'semantic') THEN 0 ELSE saved_micros END",
    ));
    let mut b = QueryBuilder::<DB>::new(format!("SELECT {} FROM {TABLE}", select.join(", ")));
    push_filter(&mut b, q);
    if !keys.is_empty() {
        let list = keys.join(", ");
        b.push(format!(" GROUP BY {list} ORDER BY {list}"));
    }
    let rows = b.build().fetch_all(pool).await?;
    let n = keys.len();
    rows.iter()
        .map(|row| {
            let u = |i: usize| -> Result<u64, sqlx::Error> {
                narrow(row.try_get::<i64, usize>(n + i)?, n + i)
            };
            Ok(UsageRow {
                keys: (0..n)
                    .map(|i| row.try_get::<Option<String>, usize>(i))
                    .collect::<Result<_, _>>()?,
                requests: u(0)?,
                errors: u(1)?,
                prompt_tokens: u(2)?,
                cached_tokens: u(3)?,
                cache_write_tokens: u(4)?,
                completion_tokens: u(5)?,
                reasoning_tokens: u(6)?,
                cost_micros: u(7)?,
                saved_micros: row.try_get::<i64, usize>(n + 8)?,
                extra_micros: u(9)?,
                hedges: u(10)?,
                retries: u(11)?,
                cache_hits: u(12)?,
                verifications: u(13)?,
                verification_micros: u(14)?,
                prompt_cache_saved_micros: row.try_get::<i64, usize>(n + 15)?,
            })
        })
        .collect::<Result<_, sqlx::Error>>()
        .map_err(LedgerError::from)
}

/// Up to `limit` entries matching `q`'s tenant and range, oldest first.
pub(crate) async fn entries<DB>(
    pool: &Pool<DB>,
    q: &UsageQuery,
    limit: u32,
) -> Result<Vec<Entry>, LedgerError>
where
    DB: Database,
    DB::Arguments: Default + IntoArguments<DB>,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB> + for<'r> Decode<'r, DB>,
    String: for<'q> Encode<'q, DB> + Type<DB> + for<'r> Decode<'r, DB>,
    Option<String>: for<'r> Decode<'r, DB> + Type<DB>,
    Option<i64>: for<'r> Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    let mut b = QueryBuilder::<DB>::new(format!("SELECT {} FROM {TABLE}", column_list()));
    push_filter(&mut b, q);
    b.push(" ORDER BY seq LIMIT ").push_bind(i64::from(limit));
    let rows = b.build().fetch_all(pool).await?;
    rows.iter()
        .map(|r| {
            let s = |i: usize| {
                r.try_get::<Option<String>, usize>(i)
                    .map(|v| v.map(Arc::from))
            };
            let i = |i: usize| r.try_get::<i64, usize>(i);
            let u = |k: usize| -> Result<u64, sqlx::Error> { narrow(i(k)?, k) };
            Ok(Entry {
                request_id: r.try_get::<String, usize>(0)?.into(),
                at_ms: i(1)?,
                tenant: s(3)?,
                api_key: s(4)?,
                model_group: s(5)?,
                upstream: s(6)?,
                model: s(7)?,
                status: narrow(i(8)?, 8)?,
                error: s(9)?,
                stream: i(10)? != 0,
                tokens: Tokens {
                    prompt: u(11)?,
                    cached: u(12)?,
                    cache_write: u(13)?,
                    completion: u(14)?,
                    reasoning: u(15)?,
                },
                cost_micros: u(16)?,
                saved_micros: i(17)?,
                extra_micros: u(18)?,
                cache: CacheOutcome::parse(&r.try_get::<String, usize>(19)?),
                ttfb_ms: r
                    .try_get::<Option<i64>, usize>(20)?
                    .map(|v| narrow(v, 20))
                    .transpose()?,
                total_ms: u(21)?,
                attempts: narrow(i(22)?, 22)?,
                hedges: narrow(i(23)?, 23)?,
                retries: narrow(i(24)?, 24)?,
            })
        })
        .collect::<Result<_, sqlx::Error>>()
        .map_err(LedgerError::from)
}

mod beliefs;
mod stored;

pub(crate) use beliefs::{beliefs, save_beliefs};
pub(crate) use stored::{
    keys, remove_named, revoke_keys, revoked_keys, save_key, save_tenant, tenants,
};

#[cfg(test)]
mod tests;
