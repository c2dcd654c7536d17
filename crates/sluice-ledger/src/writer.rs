//! The ledger's writer: calls hand their entries over without waiting, and one task writes
//! whatever has gathered as one transaction (group commit), at most every
//! [`COMMIT_EVERY`], so the database sees a few large writes rather than one per call and
//! never stands in a request's way. A failed write is
//! retried, with backoff, until it lands: entries are never dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::{Entry, LedgerError, Store};

/// Entries written per transaction at most.
const MAX_BATCH: usize = 2_000;
/// Transactions start at most this often: rows that arrive in between wait and share the
/// next one. A commit flushed to the disk costs the same for one row as for hundreds, so
/// under steady traffic this is what keeps the ledger's cost per call small (at 500 calls a
/// second, one commit per call would spend more CPU than the rest of the gateway).
pub const COMMIT_EVERY: Duration = Duration::from_millis(20);
/// The first wait after a failed write; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

enum Job {
    /// An entry, with someone to tell once it is committed.
    Append(Box<Entry>, Option<oneshot::Sender<()>>),
    /// Tell once everything sent before is committed.
    Flush(oneshot::Sender<()>),
}

#[derive(Debug, Default)]
struct Counters {
    sent: AtomicU64,
    committed: AtomicU64,
    batches: AtomicU64,
    failures: AtomicU64,
}

/// How far the writer has got.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LedgerStats {
    /// Entries handed to the writer.
    pub sent: u64,
    /// Entries committed.
    pub committed: u64,
    /// Transactions committed.
    pub batches: u64,
    /// Writes that failed and were retried.
    pub failures: u64,
}

impl LedgerStats {
    /// Entries waiting to be written.
    pub fn pending(&self) -> u64 {
        self.sent.saturating_sub(self.committed)
    }
}

/// A handle on the ledger's writer; clones share it. The writer ends once every handle is
/// dropped and what they sent is written.
#[derive(Clone, Debug)]
pub struct Ledger {
    tx: mpsc::UnboundedSender<Job>,
    counters: Arc<Counters>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Append(..) => "Append",
            Self::Flush(_) => "Flush",
        })
    }
}

impl Ledger {
    /// Starts a writer into `store`.
    pub fn start<S: Store>(store: Arc<S>) -> (Self, JoinHandle<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let counters = Arc::new(Counters::default());
        let task = tokio::spawn(write_loop(store, rx, counters.clone()));
        (Self { tx, counters }, task)
    }

    /// Hands `entry` to the writer without waiting.
    pub fn record(&self, entry: Entry) {
        self.send(Job::Append(Box::new(entry), None));
    }

    /// Hands `entry` to the writer and waits until it is committed.
    pub async fn append(&self, entry: Entry) -> Result<(), LedgerError> {
        let (done, committed) = oneshot::channel();
        if !self.send(Job::Append(Box::new(entry), Some(done))) {
            return Err(LedgerError::Closed);
        }
        committed.await.map_err(|_| LedgerError::Closed)
    }

    /// Waits until every entry sent before this call is committed.
    pub async fn flush(&self) -> Result<(), LedgerError> {
        let (done, flushed) = oneshot::channel();
        if self.tx.send(Job::Flush(done)).is_err() {
            return Err(LedgerError::Closed);
        }
        flushed.await.map_err(|_| LedgerError::Closed)
    }

    /// How far the writer has got.
    pub fn stats(&self) -> LedgerStats {
        let c = &self.counters;
        LedgerStats {
            sent: c.sent.load(Ordering::Relaxed),
            committed: c.committed.load(Ordering::Relaxed),
            batches: c.batches.load(Ordering::Relaxed),
            failures: c.failures.load(Ordering::Relaxed),
        }
    }

    fn send(&self, job: Job) -> bool {
        let ok = self.tx.send(job).is_ok();
        if ok {
            self.counters.sent.fetch_add(1, Ordering::Relaxed);
        } else {
            tracing::error!("ledger writer has stopped; an entry was not recorded");
        }
        ok
    }
}

async fn write_loop<S: Store>(
    store: Arc<S>,
    mut rx: mpsc::UnboundedReceiver<Job>,
    counters: Arc<Counters>,
) {
    let mut batch: Vec<Entry> = Vec::new();
    let mut acks: Vec<oneshot::Sender<()>> = Vec::new();
    let mut last_commit: Option<Instant> = None;
    while let Some(first) = rx.recv().await {
        if let Some(at) = last_commit {
            tokio::time::sleep_until(at + COMMIT_EVERY).await;
        }
        last_commit = Some(Instant::now());
        let mut next = Some(first);
        while let Some(job) = next.take() {
            match job {
                Job::Append(e, ack) => {
                    batch.push(*e);
                    acks.extend(ack);
                }
                Job::Flush(ack) => acks.push(ack),
            }
            if batch.len() < MAX_BATCH {
                next = rx.try_recv().ok();
            }
        }
        if !batch.is_empty() {
            write_until_done(&*store, &batch, &counters).await;
            counters
                .committed
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
            counters.batches.fetch_add(1, Ordering::Relaxed);
            batch.clear();
        }
        for ack in acks.drain(..) {
            // The waiter may have gone; the entry is committed all the same.
            let _ = ack.send(());
        }
    }
}

async fn write_until_done<S: Store>(store: &S, batch: &[Entry], counters: &Counters) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        match store.append(batch).await {
            Ok(()) => return,
            Err(e) => {
                counters.failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, entries = batch.len(), retry_in = ?backoff, "ledger write failed");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::{UsageQuery, UsageRow};
    use crate::records::{StoredBelief, StoredKey, StoredTenant};
    use parking_lot::Mutex;

    /// A store that fails its first `failing` writes, then keeps what it is given.
    #[derive(Default)]
    struct Flaky {
        failing: Mutex<u32>,
        rows: Mutex<Vec<Entry>>,
    }

    impl Store for Flaky {
        async fn append(&self, entries: &[Entry]) -> Result<(), LedgerError> {
            let mut f = self.failing.lock();
            if *f > 0 {
                *f -= 1;
                return Err(LedgerError::Db(sqlx::Error::PoolTimedOut));
            }
            self.rows.lock().extend_from_slice(entries);
            Ok(())
        }
        async fn usage(&self, _: &UsageQuery) -> Result<Vec<UsageRow>, LedgerError> {
            Ok(vec![])
        }
        async fn entries(&self, _: &UsageQuery, _: u32) -> Result<Vec<Entry>, LedgerError> {
            Ok(self.rows.lock().clone())
        }
        async fn save_key(&self, _: &StoredKey) -> Result<(), LedgerError> {
            Ok(())
        }
        async fn remove_key(&self, _: &str) -> Result<bool, LedgerError> {
            Ok(false)
        }
        async fn keys(&self) -> Result<Vec<StoredKey>, LedgerError> {
            Ok(vec![])
        }
        async fn revoke_keys(&self, _: &[crate::records::RevokedKey]) -> Result<(), LedgerError> {
            Ok(())
        }
        async fn revoked_keys(&self) -> Result<Vec<crate::records::RevokedKey>, LedgerError> {
            Ok(vec![])
        }
        async fn save_tenant(&self, _: &StoredTenant) -> Result<(), LedgerError> {
            Ok(())
        }
        async fn remove_tenant(&self, _: &str) -> Result<bool, LedgerError> {
            Ok(false)
        }
        async fn directory_version(&self) -> Result<u64, LedgerError> {
            Ok(0)
        }
        async fn tenants(&self) -> Result<Vec<StoredTenant>, LedgerError> {
            Ok(vec![])
        }
        async fn save_beliefs(&self, _: &str, _: &[StoredBelief]) -> Result<(), LedgerError> {
            Ok(())
        }
        async fn beliefs(&self, _: &str) -> Result<Vec<StoredBelief>, LedgerError> {
            Ok(vec![])
        }
    }

    fn entry(i: u32) -> Entry {
        Entry {
            request_id: format!("r-{i}").into(),
            ..Entry::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_store_delays_rows_but_loses_none() {
        let store = Arc::new(Flaky {
            failing: Mutex::new(4),
            ..Flaky::default()
        });
        let (ledger, _task) = Ledger::start(store.clone());
        for i in 0..100 {
            ledger.record(entry(i));
        }
        let waited = tokio::time::Instant::now();
        ledger.append(entry(100)).await.unwrap();
        ledger.flush().await.unwrap();
        // Four failures back off 50 + 100 + 200 + 400 ms before the write lands.
        assert!(waited.elapsed() >= Duration::from_millis(750));
        let s = ledger.stats();
        assert_eq!(
            (s.sent, s.committed, s.failures, s.pending()),
            (101, 101, 4, 0)
        );
        let ids: Vec<String> = store
            .rows
            .lock()
            .iter()
            .map(|e| e.request_id.to_string())
            .collect();
        let want: Vec<String> = (0..=100).map(|i| format!("r-{i}")).collect();
        assert_eq!(ids, want, "every row, in the order sent");
    }

    #[tokio::test]
    async fn a_stopped_writer_says_so() {
        let store = Arc::new(Flaky::default());
        let (ledger, task) = Ledger::start(store);
        task.abort();
        let _ = task.await;
        assert!(matches!(
            ledger.append(entry(1)).await,
            Err(LedgerError::Closed)
        ));
        assert!(matches!(ledger.flush().await, Err(LedgerError::Closed)));
    }
}
