//! Batch jobs: a client uploads a file of requests and submits it as a job, leaves, and
//! follows it to the end. What this crate decides, apart from the gateway that runs the
//! items:
//!
//! - [`input`]: a file's lines, checked one by one (every bad line named, a file with any
//!   refused whole), and which lines share a prefix;
//! - [`store`]: files, jobs and their items in the ledger's database (SQLite or
//!   PostgreSQL), items claimed under a lease with an epoch that fences a claim that was
//!   lost, each item ended once;
//! - [`state`]: a job's status, a pure function of its counts, its window and the clock;
//! - [`progress`]: where a job stands in the batch lane and when it will end;
//! - [`objects`]: OpenAI's `file` and `batch` objects and the output lines, as written out.

pub mod counts;
pub mod input;
pub mod objects;
pub mod progress;
pub mod state;
pub mod store;

pub use counts::Counts;
pub use input::{Endpoint, Limits, Line, LineError};
pub use state::Status;
pub use store::{Claimed, Ending, Jobs, Kind, NewBatch, NewFile, StoredBatch, StoredFile, TABLES};

/// What can go wrong with the job store.
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    /// The database refused or failed.
    #[error("batch store: {0}")]
    Db(#[from] sqlx::Error),
    /// A stored value is not one this version writes.
    #[error("batch store: {0}")]
    Corrupt(String),
}
