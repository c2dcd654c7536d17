//! The embedded store: one SQLite file in write-ahead-log mode, its tables (and those other
//! parts keep in the same file) made before any statement is prepared on it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use super::{Store, missing};
use crate::query::{UsageQuery, UsageRow};
use crate::records::{RevokedKey, StoredBelief, StoredKey, StoredTenant};
use crate::{Entry, LedgerError, sql};

/// When an embedded-store commit counts as done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// Survives a crash of sluice (kill -9), not necessarily of the machine: the write-ahead
    /// log is flushed to the disk at checkpoints (SQLite's `synchronous = NORMAL`).
    Process,
    /// Survives power loss: every commit is flushed to the disk (`synchronous = FULL`).
    #[default]
    Disk,
}

/// The embedded store: one SQLite file in write-ahead-log mode.
#[derive(Clone, Debug)]
pub struct SqliteStore {
    pub(super) pool: SqlitePool,
    insert: Arc<sql::InsertSql>,
}

impl SqliteStore {
    /// Opens (creating if absent) the ledger at `path`.
    pub async fn open(path: &Path, durability: Durability) -> Result<Self, LedgerError> {
        Self::open_with(path, durability, &[]).await
    }

    /// Opens the ledger at `path` with `tables` (statements that make, if absent, the tables
    /// other parts keep in the same file, such as the batch jobs') run first: a table made
    /// after the pool's connections prepared their inserts would change the schema under
    /// them, and SQLite would prepare each again at its next use (several million
    /// instructions for the larger ones, on the ledger's write path).
    pub async fn open_with(
        path: &Path,
        durability: Durability,
        tables: &[&str],
    ) -> Result<Self, LedgerError> {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(match durability {
                Durability::Process => SqliteSynchronous::Normal,
                Durability::Disk => SqliteSynchronous::Full,
            })
            .busy_timeout(Duration::from_secs(10));
        // The tables first, through a connection of their own: the pool's connections
        // prepare their inserts as they open, which needs the table to be there.
        let setup = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone())
            .await?;
        let existing: Vec<String> =
            sqlx::query_scalar("SELECT name FROM pragma_table_info('sluice_ledger')")
                .fetch_all(&setup)
                .await?;
        sql::create(&setup, "INTEGER PRIMARY KEY", &missing(&existing)).await?;
        // A ledger written by an earlier sluice holds `cost_micros` as NOT NULL.
        let strict: Option<i64> = sqlx::query_scalar(
            "SELECT \"notnull\" FROM pragma_table_info('sluice_ledger') WHERE name = 'cost_micros'",
        )
        .fetch_optional(&setup)
        .await?;
        if strict == Some(1) {
            let mut tx = setup.begin().await?;
            for statement in sql::unknown_cost_migration(true) {
                // Audited: built from the SQL module's constants only.
                sqlx::query(sqlx::AssertSqlSafe(statement))
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
        }
        for statement in tables {
            // Audited: the callers' own constant statements.
            sqlx::query(sqlx::AssertSqlSafe(*statement))
                .execute(&setup)
                .await?;
        }
        setup.close().await;
        let insert = Arc::new(sql::InsertSql::new::<sqlx::Sqlite>()?);
        let prepared = insert.clone();
        // One writer at a time is all SQLite allows; readers run beside it in WAL mode. A
        // connection to a file in this process cannot go away as a server's can, so the pool
        // does not ping one before handing it out: that was a round trip to the connection's
        // thread (two thread wake-ups) on every commit.
        // All four open from the start (in the background), so none opens, and prepares, in
        // the middle of traffic.
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .min_connections(4)
            .test_before_acquire(false)
            .after_connect(move |conn, _| {
                let prepared = prepared.clone();
                Box::pin(async move { sql::prepare_inserts::<sqlx::Sqlite>(&prepared, conn).await })
            })
            .connect_with(options)
            .await?;
        Ok(Self { pool, insert })
    }

    async fn append_rows(&self, entries: &[Entry]) -> Result<(), LedgerError> {
        sql::insert(&self.pool, &self.insert, entries).await
    }
}

sql_store!(SqliteStore);
