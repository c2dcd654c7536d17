//! The usage ledger: one row per finished call (who, which model and upstream, tokens by
//! kind, cost, what caching saved, what hedges and retries cost, latency), written in batches
//! off the request path to an embedded SQLite file or to PostgreSQL, and read back as usage
//! totals grouped by tenant, model, key, upstream or day.
//!
//! Both databases sit behind one [`Store`] trait, and one conformance suite
//! (`tests/conformance.rs`) runs against each.

pub mod balances;
pub mod entry;
mod journal;
pub mod query;
pub mod records;
pub mod report;
mod sql;

pub use sql::SCHEMA_LOCK;
pub mod store;
pub mod writer;

pub use balances::LedgerBook;
pub use entry::{CacheOutcome, Entry, Tokens};
pub use journal::JournalError;
pub use query::{GroupBy, QueryError, UsageQuery, UsageRow};
pub use records::{RevokedKey, StoredBelief, StoredKey, StoredTenant};
pub use store::{AnyStore, Database, Durability, PgStore, SqliteStore, Store};
pub use writer::{Ledger, LedgerStats};

/// What can go wrong with the ledger.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The database refused or failed.
    #[error("ledger database: {0}")]
    Db(#[from] sqlx::Error),
    /// The writer has stopped (the gateway is shutting down).
    #[error("the ledger writer has stopped")]
    Closed,
}
