//! Files, jobs and their items, kept in the ledger's database beside its rows (SQLite by
//! default, PostgreSQL for several gateways): one SQL text for both (sqlx numbers `$N`
//! placeholders for each), run on whichever pool the ledger opened.
//!
//! An item is claimed under a lease: its state becomes `running`, its owner and lease end
//! are set, and its epoch goes up by one. Every later write of that claim names the epoch it
//! was claimed at, so a claim that lost its lease (its owner stalled or died, and another
//! took the item) writes nothing. On PostgreSQL claims skip rows another gateway is
//! claiming (`FOR UPDATE SKIP LOCKED`); SQLite has one writer at a time.

use sluice_ledger::Database;
use sqlx::{PgPool, Row, SqlitePool};

use crate::counts::Counts;
use crate::input::{Endpoint, Line};
use crate::state::Status;
use crate::{BatchError, progress};

mod records;
mod rows;
mod sql;

pub use records::{Claimed, Ending, ItemResult, NewBatch, NewFile, StoredBatch, StoredFile};
use rows::{stored_batch, stored_file};

/// The pool, whichever database it is.
#[derive(Clone, Debug)]
enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// Runs `$body` with `$p` bound to the pool, whichever database it is.
macro_rules! on {
    ($self:expr, $p:ident => $body:expr) => {
        match &$self.pool {
            Pool::Sqlite($p) => $body,
            Pool::Postgres($p) => $body,
        }
    };
}

// After the macro, which it uses.
mod claims;

/// Which items a claim takes: calls (sent through the walk, one each) or documents
/// (analysed, many calls each), so that each kind runs in slots of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Items of jobs on every endpoint but `/v1/analyses`.
    Calls,
    /// Items of `/v1/analyses` jobs.
    Documents,
}

impl From<Endpoint> for Kind {
    fn from(e: Endpoint) -> Self {
        if e.dialect().is_some() {
            Self::Calls
        } else {
            Self::Documents
        }
    }
}

/// The statements that make the jobs' tables if absent, for a ledger's SQLite store to run
/// before it prepares its own (see `sluice_ledger::SqliteStore::open_with`).
pub const TABLES: &[&str] = sql::SCHEMA;

/// The jobs' tables in a ledger's database.
#[derive(Clone, Debug)]
pub struct Jobs {
    pool: Pool,
}

impl Jobs {
    /// Opens the jobs' tables in `db`, making them if absent.
    pub async fn open(db: Database<'_>) -> Result<Self, BatchError> {
        let pool = match db {
            Database::Sqlite(p) => Pool::Sqlite(p.clone()),
            Database::Postgres(p) => Pool::Postgres(p.clone()),
        };
        match db {
            Database::Sqlite(p) => {
                for statement in sql::SCHEMA {
                    sqlx::query(*statement).execute(p).await?;
                }
                let has: i64 = sqlx::query_scalar(sql::HAS_STARTED_SQLITE)
                    .fetch_one(p)
                    .await?;
                if has == 0 {
                    sqlx::query(sql::ADD_STARTED_SQLITE).execute(p).await?;
                }
            }
            // Under the schema lock, as the ledger's tables: instances started together
            // against an empty database take turns.
            Database::Postgres(p) => {
                let mut tx = p.begin().await?;
                sqlx::query("SELECT pg_advisory_xact_lock($1)")
                    .bind(sluice_ledger::SCHEMA_LOCK)
                    .execute(&mut *tx)
                    .await?;
                for statement in sql::SCHEMA {
                    sqlx::query(*statement).execute(&mut *tx).await?;
                }
                sqlx::query(sql::ADD_STARTED_PG).execute(&mut *tx).await?;
                tx.commit().await?;
            }
        }
        Ok(Self { pool })
    }

    /// Whether the jobs live in a database several gateways share.
    pub fn shared(&self) -> bool {
        matches!(self.pool, Pool::Postgres(_))
    }

    /// Keeps `f`.
    pub async fn add_file(&self, f: &NewFile) -> Result<(), BatchError> {
        on!(self, p => sqlx::query(sql::ADD_FILE)
            .bind(&f.id)
            .bind(&f.tenant)
            .bind(&f.filename)
            .bind(&f.purpose)
            .bind(int(f.content.len() as u64))
            .bind(f.created_ms)
            .bind(f.expires_ms)
            .bind(&f.content)
            .execute(p)
            .await
            .map(|_| ()))?;
        Ok(())
    }

    /// The file `id` of `tenant`.
    pub async fn file(&self, tenant: &str, id: &str) -> Result<Option<StoredFile>, BatchError> {
        let row = on!(self, p => sqlx::query(sql::FILE)
            .bind(id)
            .bind(tenant)
            .fetch_optional(p)
            .await?
            .map(|r| stored_file(&r))
            .transpose())?;
        Ok(row)
    }

    /// The text of the file `id` of `tenant`.
    pub async fn file_content(&self, tenant: &str, id: &str) -> Result<Option<String>, BatchError> {
        Ok(on!(self, p => sqlx::query_scalar(sql::FILE_CONTENT)
            .bind(id)
            .bind(tenant)
            .fetch_optional(p)
            .await)?)
    }

    /// `tenant`'s files, newest first, after the file `after` (a cursor), at most `limit`.
    pub async fn files(
        &self,
        tenant: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<StoredFile>, BatchError> {
        let rows = on!(self, p => sqlx::query(sql::FILES)
            .bind(tenant)
            .bind(after)
            .bind(i64::from(limit))
            .fetch_all(p)
            .await?
            .iter()
            .map(stored_file)
            .collect::<Result<Vec<_>, _>>())?;
        Ok(rows)
    }

    /// Deletes the file `id` of `tenant`; whether there was one.
    pub async fn delete_file(&self, tenant: &str, id: &str) -> Result<bool, BatchError> {
        let n = on!(self, p => sqlx::query(sql::DELETE_FILE)
            .bind(id)
            .bind(tenant)
            .execute(p)
            .await?
            .rows_affected());
        Ok(n > 0)
    }

    /// Items queued in every job: what the lane holds.
    pub async fn queued_items(&self) -> Result<u64, BatchError> {
        let n: i64 = on!(self, p => sqlx::query_scalar(sql::QUEUED_ITEMS).fetch_one(p).await)?;
        Ok(n.max(0) as u64)
    }

    /// Keeps `b` and its `lines` as queued items, at once: all of it or nothing.
    pub async fn add_batch(&self, b: &NewBatch, lines: &[Line]) -> Result<(), BatchError> {
        on!(self, p => {
            let mut tx = p.begin().await?;
            sqlx::query(sql::ADD_BATCH)
                .bind(&b.id)
                .bind(&b.tenant)
                .bind(&b.api_key)
                .bind(&b.key_sha256)
                .bind(b.endpoint.path())
                .bind(&b.input_file_id)
                .bind(b.created_ms)
                .bind(b.expires_ms)
                .bind(&b.metadata)
                .bind(int(lines.len() as u64))
                .execute(&mut *tx)
                .await?;
            for chunk in lines.chunks(sql::ITEMS_PER_INSERT) {
                let mut q = sqlx::QueryBuilder::new(sql::ADD_ITEMS);
                q.push_values(chunk, |mut row, line| {
                    row.push_bind(b.id.clone())
                        .push_bind(int(line.number))
                        .push_bind(line.custom_id.clone())
                        .push_bind(line.body.clone())
                        .push_bind(b.created_ms)
                        .push_bind(i64::from(line.prefix))
                        .push_bind(b.expires_ms);
                });
                q.push(") AS v");
                q.build().execute(&mut *tx).await?;
            }
            tx.commit().await?;
        });
        Ok(())
    }

    /// The job `id`: `tenant`'s, or anyone's with `None`.
    pub async fn batch(
        &self,
        tenant: Option<&str>,
        id: &str,
    ) -> Result<Option<StoredBatch>, BatchError> {
        let row = on!(self, p => sqlx::query(sql::BATCH)
            .bind(id)
            .bind(tenant)
            .fetch_optional(p)
            .await?
            .map(|r| stored_batch(&r))
            .transpose())?;
        Ok(row)
    }

    /// `tenant`'s jobs, newest first, after the job `after` (a cursor), at most `limit`.
    pub async fn batches(
        &self,
        tenant: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<StoredBatch>, BatchError> {
        let rows = on!(self, p => sqlx::query(sql::BATCHES)
            .bind(tenant)
            .bind(after)
            .bind(i64::from(limit))
            .fetch_all(p)
            .await?
            .iter()
            .map(stored_batch)
            .collect::<Result<Vec<_>, _>>())?;
        Ok(rows)
    }

    /// Jobs that have not ended, every tenant's.
    pub async fn open_batches(&self) -> Result<Vec<StoredBatch>, BatchError> {
        let rows = on!(self, p => sqlx::query(sql::OPEN_BATCHES)
            .fetch_all(p)
            .await?
            .iter()
            .map(stored_batch)
            .collect::<Result<Vec<_>, _>>())?;
        Ok(rows)
    }

    /// The items of job `id` by state.
    pub async fn counts(&self, id: &str) -> Result<Counts, BatchError> {
        let rows = on!(self, p => sqlx::query(sql::COUNTS)
            .bind(id)
            .fetch_all(p)
            .await?
            .iter()
            .map(|r| -> Result<(String, [i64; 4]), sqlx::Error> {
                Ok((r.try_get(0)?, [r.try_get(1)?, r.try_get(2)?, r.try_get(3)?, r.try_get(4)?]))
            })
            .collect::<Result<Vec<_>, _>>())?;
        let mut c = Counts::default();
        for (state, [n, prompt, cached, completion]) in rows {
            let n = n.max(0) as u64;
            match state.as_str() {
                "queued" => c.queued = n,
                "running" => c.running = n,
                "done" => c.done = n,
                "failed" => c.failed = n,
                "cancelled" => c.cancelled = n,
                "expired" => c.expired = n,
                other => return Err(BatchError::Corrupt(format!("item state `{other}`"))),
            }
            c.prompt_tokens += prompt.max(0) as u64;
            c.cached_tokens += cached.max(0) as u64;
            c.completion_tokens += completion.max(0) as u64;
        }
        Ok(c)
    }

    /// What the batch lane holds, seen from job `b`, at `now_ms`.
    pub async fn lane(&self, b: &StoredBatch, now_ms: i64) -> Result<progress::Lane, BatchError> {
        type Read = (i64, i64, (i64, i64, i64), (i64, i64, i64));
        let (queued, ahead, running, ended): Read = on!(self, p => {
            let queued = sqlx::query_scalar(sql::QUEUED_ITEMS).fetch_one(p).await?;
            let ahead = sqlx::query_scalar(sql::AHEAD)
                .bind(b.created_ms)
                .bind(&b.id)
                .fetch_one(p)
                .await?;
            let running = sqlx::query_as(sql::RUNNING_ITEMS)
                .bind(now_ms)
                .fetch_one(p)
                .await?;
            let ended = sqlx::query_as(sql::ENDED_SINCE)
                .bind(now_ms - progress::RATE_WINDOW_MS)
                .fetch_one(p)
                .await?;
            (queued, ahead, running, ended)
        });
        let (ended, timed, in_flight_ms) = ended;
        let (running, running_ms, youngest_ms) = running;
        Ok(progress::Lane {
            queued: queued.max(0) as u64,
            ahead: ahead.max(0) as u64,
            running: running.max(0) as u64,
            running_ms: running_ms.max(0) as u64,
            youngest_ms: youngest_ms.max(0) as u64,
            ended_last_window: ended.max(0) as u64,
            timed_last_window: timed.max(0) as u64,
            timed_ms_last_window: in_flight_ms.max(0) as u64,
        })
    }

    /// Asks to cancel `tenant`'s job `id` at `now_ms`: its queued items end cancelled at
    /// once, its running ones finish. The job as it is then (`None`: no such job).
    pub async fn cancel(
        &self,
        tenant: &str,
        id: &str,
        now_ms: i64,
    ) -> Result<Option<StoredBatch>, BatchError> {
        on!(self, p => {
            let mut tx = p.begin().await?;
            let asked = sqlx::query(sql::ASK_CANCEL)
                .bind(id)
                .bind(tenant)
                .bind(now_ms)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if asked > 0 {
                sqlx::query(sql::CANCEL_QUEUED)
                    .bind(id)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
        });
        self.batch(Some(tenant), id).await
    }

    /// Ends the queued items of job `id` as expired, at `now_ms`, and those running under a
    /// claim that lapsed; how many.
    pub async fn expire_queued(&self, id: &str, now_ms: i64) -> Result<u64, BatchError> {
        Ok(on!(self, p => sqlx::query(sql::EXPIRE_QUEUED)
            .bind(id)
            .bind(now_ms)
            .execute(p)
            .await?
            .rows_affected()))
    }

    /// Ends job `id` with `status` at `now_ms`, once: whether this call ended it.
    pub async fn end_batch(
        &self,
        id: &str,
        status: Status,
        now_ms: i64,
    ) -> Result<bool, BatchError> {
        let n = on!(self, p => sqlx::query(sql::END_BATCH)
            .bind(id)
            .bind(status.as_str())
            .bind(now_ms)
            .execute(p)
            .await?
            .rows_affected());
        Ok(n > 0)
    }

    /// The ended items of job `id`: those answered 2xx (`errors` false), or the others.
    pub async fn results(&self, id: &str, errors: bool) -> Result<Vec<ItemResult>, BatchError> {
        let text = if errors {
            sql::ERROR_RESULTS
        } else {
            sql::OUTPUT_RESULTS
        };
        let rows = on!(self, p => sqlx::query(text)
            .bind(id)
            .fetch_all(p)
            .await?
            .iter()
            .map(|r| -> Result<ItemResult, sqlx::Error> {
                Ok(ItemResult {
                    line: r.try_get::<i64, _>(0)?.max(0) as u64,
                    custom_id: r.try_get(1)?,
                    state: r.try_get(2)?,
                    status_code: r
                        .try_get::<Option<i64>, _>(3)?
                        .and_then(|s| u16::try_from(s).ok()),
                    response: r.try_get(4)?,
                    error_code: r.try_get(5)?,
                    error_message: r.try_get(6)?,
                    request_id: r.try_get(7)?,
                })
            })
            .collect::<Result<Vec<_>, _>>())?;
        Ok(rows)
    }

    /// Deletes files uploaded before `before_ms`, and jobs (with their items) that ended
    /// before it: what is kept is bounded by the retention. How many of each.
    pub async fn sweep(&self, before_ms: i64) -> Result<(u64, u64), BatchError> {
        on!(self, p => {
            let mut tx = p.begin().await?;
            let files = sqlx::query(sql::SWEEP_FILES)
                .bind(before_ms)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            sqlx::query(sql::SWEEP_ITEMS)
                .bind(before_ms)
                .execute(&mut *tx)
                .await?;
            let batches = sqlx::query(sql::SWEEP_BATCHES)
                .bind(before_ms)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            tx.commit().await?;
            Ok((files, batches))
        })
    }
}

/// A count as the database's signed integer.
fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
