//! The ledger's SQL, written once for both databases: each database's placeholders come from
//! sqlx (its query builder, or its argument list for the `INSERT` whose text is kept), and
//! the few differences (the row id column) are arguments.

use sqlx::{AssertSqlSafe, Database, Executor, IntoArguments, Pool};

use crate::LedgerError;

/// The ledger table.
pub(crate) const TABLE: &str = "sluice_ledger";

/// API keys made at run time (their hashes).
pub(crate) const KEYS: &str = "sluice_keys";

/// Tenants set through the admin API.
pub(crate) const TENANTS: &str = "sluice_tenants";

/// Keys revoked through the admin API, by hash: a revoked hash stays refused, wherever the
/// key was defined.
pub(crate) const REVOKED: &str = "sluice_revoked_keys";

/// One row: the directory's version, moved by every change of keys, tenants and revocations,
/// which every instance reads to know when to read them again.
pub(crate) const DIRECTORY: &str = "sluice_directory";

/// What automatic routers learnt, per router, task and candidate group.
pub(crate) const BELIEFS: &str = "sluice_router_beliefs";

/// The columns an entry fills, in binding order, with their SQL types (the same words in
/// SQLite and PostgreSQL).
const COLUMNS: [(&str, &str); 29] = [
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
    ("cost_micros", "BIGINT"),
    ("saved_micros", "BIGINT NOT NULL"),
    ("extra_micros", "BIGINT NOT NULL"),
    ("cache", "TEXT NOT NULL"),
    ("ttfb_ms", "BIGINT"),
    ("total_ms", "BIGINT NOT NULL"),
    ("attempts", "BIGINT NOT NULL"),
    ("hedges", "BIGINT NOT NULL"),
    ("retries", "BIGINT NOT NULL"),
    // Last, so that a ledger of an earlier sluice gains it by `ADD COLUMN` in this order.
    ("batch_item", "TEXT"),
    ("currency", "TEXT"),
    ("native_micros", "BIGINT"),
    ("hold", "TEXT"),
];

/// The column names, comma-separated, in binding order.
fn column_list() -> String {
    COLUMNS.map(|(name, _)| name).join(", ")
}

/// Whether a column of SQL type `ty` holds text (the others hold integers).
fn is_text(ty: &str) -> bool {
    ty.starts_with("TEXT")
}

/// Creates the tables and their indexes if absent; `row_id` declares the database's
/// auto-numbered key column. A ledger table of an earlier sluice gains the columns it lacks
/// (`missing` lists them) before the indexes that read them are made.
pub(crate) async fn create<DB>(
    pool: &Pool<DB>,
    row_id: &str,
    missing: &[&str],
) -> Result<(), LedgerError>
where
    DB: Database,
    DB::Arguments: Default + IntoArguments<DB>,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
{
    for statement in creation(row_id, missing) {
        // Audited: built from this module's constants only.
        sqlx::query::<DB>(AssertSqlSafe(statement))
            .execute(pool)
            .await?;
    }
    Ok(())
}

/// The statements that make the tables and their indexes if absent, the columns `missing`
/// added between them.
pub(crate) fn creation(row_id: &str, missing: &[&str]) -> Vec<String> {
    let (tables, indexes): (Vec<String>, Vec<String>) = schema(row_id)
        .into_iter()
        .partition(|s| s.starts_with("CREATE TABLE"));
    let added = missing.iter().filter_map(|name| {
        COLUMNS
            .iter()
            .find(|(n, _)| n == name)
            .map(|(n, ty)| format!("ALTER TABLE {TABLE} ADD COLUMN {n} {ty}"))
    });
    tables.into_iter().chain(added).chain(indexes).collect()
}

/// The PostgreSQL advisory lock every sluice takes while it makes or changes its tables
/// (the ledger's and the batch jobs'), so that instances started together do not create the
/// same table at once: one makes them, the others find them made.
pub const SCHEMA_LOCK: i64 = 0x736c_7569_6365_5f31;

/// The ledger columns added since the first sluice, newest last: a table that lacks one
/// gains it at start.
pub(crate) const ADDED_COLUMNS: [&str; 4] = ["batch_item", "currency", "native_micros", "hold"];

/// What makes a ledger table of an earlier sluice, whose `cost_micros` was `NOT NULL`, take
/// a call of unknown cost. PostgreSQL drops the constraint in place; SQLite cannot, so its
/// table is rebuilt with the same columns in the same order and its rows copied over, in one
/// transaction with the indexes made again.
pub(crate) fn unknown_cost_migration(sqlite: bool) -> Vec<String> {
    if !sqlite {
        return vec![format!(
            "ALTER TABLE {TABLE} ALTER COLUMN cost_micros DROP NOT NULL"
        )];
    }
    let schema = schema("INTEGER PRIMARY KEY");
    let old = format!("{TABLE}_before_unknown_costs");
    let mut out = vec![
        format!("ALTER TABLE {TABLE} RENAME TO {old}"),
        schema[0].clone(),
        format!("INSERT INTO {TABLE} SELECT * FROM {old}"),
        format!("DROP TABLE {old}"),
    ];
    out.extend(
        schema
            .into_iter()
            .filter(|s| s.starts_with("CREATE INDEX") || s.starts_with("CREATE UNIQUE INDEX")),
    );
    out
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
            "CREATE TABLE IF NOT EXISTS {DIRECTORY} (id BIGINT PRIMARY KEY, version BIGINT NOT NULL)"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {BELIEFS} (router TEXT NOT NULL, task TEXT NOT NULL, \
             grp TEXT NOT NULL, alpha DOUBLE PRECISION NOT NULL, beta DOUBLE PRECISION NOT NULL, \
             output_tokens DOUBLE PRECISION, cached_share DOUBLE PRECISION, \
             PRIMARY KEY (router, task, grp))"
        ),
        format!("CREATE INDEX IF NOT EXISTS {TABLE}_at ON {TABLE} (at_ms)"),
        format!("CREATE INDEX IF NOT EXISTS {TABLE}_tenant_at ON {TABLE} (tenant, at_ms)"),
        // A dead instance's holds are settled from the rows that name them. Partial: only
        // the few rows that carry a hold are indexed (a full index costs every call's row a
        // B-tree insert of its NULL).
        format!(
            "CREATE INDEX IF NOT EXISTS {TABLE}_hold_set ON {TABLE} (hold) \
             WHERE hold IS NOT NULL"
        ),
        // One row per batch item at most; only batch items' rows are indexed.
        format!(
            "CREATE UNIQUE INDEX IF NOT EXISTS {TABLE}_batch_item_set ON {TABLE} (batch_item) \
             WHERE batch_item IS NOT NULL"
        ),
        // The full indexes of earlier sluices, replaced by the partial ones above.
        format!("DROP INDEX IF EXISTS {TABLE}_hold"),
        format!("DROP INDEX IF EXISTS {TABLE}_batch_item"),
    ]
}

/// A stored integer read back into the narrower type it was written from; a value that
/// does not fit (a row written by something else) is a decode error, never a silent 0.
pub(crate) fn narrow<T: TryFrom<i64>>(v: i64, column: usize) -> Result<T, sqlx::Error> {
    T::try_from(v).map_err(|_| sqlx::Error::ColumnDecode {
        index: column.to_string(),
        source: format!("{v} is out of range for this column").into(),
    })
}

/// A count as the database's signed integer (counts past 2^63 do not occur; they saturate).
pub(crate) fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

mod beliefs;
mod insert;
mod read;
mod stored;

pub(crate) use insert::{InsertSql, insert, insert_in, prepare_inserts};
pub(crate) use read::{entries, spent_under, usage};

pub(crate) use beliefs::{beliefs, save_beliefs};
pub(crate) use stored::{
    directory_version, keys, remove_named, revoke_keys, revoked_keys, save_key, save_tenant,
    tenants,
};
