//! The ledger's writer: calls hand their entries over without waiting, and one task writes
//! whatever has gathered as one transaction (group commit), at most every
//! [`COMMIT_EVERY`], so the database sees a few large writes rather than one per call and
//! never stands in a request's way. A failed write is retried, with backoff, until it lands:
//! entries are never dropped. With a journal, rows wait there (on the disk, in order) while
//! the store cannot answer, not in memory.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::journal::{Journal, JournalError};
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
    spilled: AtomicU64,
    spill_failures: AtomicU64,
    unreadable: AtomicU64,
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
    /// Rows waiting in the journal for the store.
    pub spilled: u64,
    /// Journal writes that failed (a full disk): those rows were held in memory.
    pub spill_failures: u64,
    /// Journal lines that did not parse and were passed over.
    pub unreadable: u64,
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
    /// Starts a writer into `store`; while it cannot answer, rows wait in memory.
    pub fn start<S: Store>(store: Arc<S>) -> (Self, JoinHandle<()>) {
        Self::started(store, None)
    }

    /// Starts a writer into `store` that, while it cannot answer, appends rows to the
    /// journal at `journal` (flushed to the disk) rather than holding them in memory, and
    /// replays them in order once it answers; rows a journal kept from an earlier run are
    /// replayed first.
    pub fn start_with_journal<S: Store>(
        store: Arc<S>,
        journal: &std::path::Path,
    ) -> Result<(Self, JoinHandle<()>), JournalError> {
        Ok(Self::started(store, Some(Journal::open(journal)?)))
    }

    fn started<S: Store>(store: Arc<S>, journal: Option<Journal>) -> (Self, JoinHandle<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let counters = Arc::new(Counters::default());
        let task = tokio::spawn(write_loop(store, rx, counters.clone(), journal));
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
            spilled: c.spilled.load(Ordering::Relaxed),
            spill_failures: c.spill_failures.load(Ordering::Relaxed),
            unreadable: c.unreadable.load(Ordering::Relaxed),
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

/// Where the write loop stands: tickets of those waiting for their rows, how many rows of
/// this run are written (in the order they came), the journal and its retry.
struct Loop {
    counters: Arc<Counters>,
    journal: Option<Journal>,
    acks: Vec<(u64, oneshot::Sender<()>)>,
    received: u64,
    done: u64,
    /// Rows a journal held from an earlier run, replayed before this run's.
    carried: u64,
    backoff: Duration,
    retry_at: Instant,
}

impl Loop {
    /// Takes `job` into `batch`.
    fn take(&mut self, job: Job, batch: &mut Vec<Entry>) {
        match job {
            Job::Append(e, ack) => {
                batch.push(*e);
                self.received += 1;
                if let Some(ack) = ack {
                    self.acks.push((self.received, ack));
                }
            }
            Job::Flush(ack) => self.acks.push((self.received, ack)),
        }
    }

    /// `n` more rows of this run are written (or passed over): tells those waiting for them.
    fn written(&mut self, n: u64) {
        self.done += n;
        let done = self.done;
        let (ready, waiting): (Vec<_>, Vec<_>) =
            self.acks.drain(..).partition(|(ticket, _)| *ticket <= done);
        self.acks = waiting;
        for (_, ack) in ready {
            // The waiter may have gone; the entry is committed all the same.
            let _ = ack.send(());
        }
    }

    fn spilling(&self) -> bool {
        self.journal.as_ref().is_some_and(|j| j.pending() > 0)
    }

    /// Puts `batch` in the journal; on success it is emptied. A journal that cannot be
    /// written (a full disk) is logged and counted every time, and the batch stays in memory.
    fn spill(&mut self, batch: &mut Vec<Entry>) -> bool {
        let Some(journal) = self.journal.as_mut() else {
            return false;
        };
        match journal.append(batch) {
            Ok(()) => {
                self.counters
                    .spilled
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
                batch.clear();
                true
            }
            Err(e) => {
                self.counters.spill_failures.fetch_add(1, Ordering::Relaxed);
                tracing::error!(error = %e, entries = batch.len(), "the ledger's store cannot answer and its journal cannot be written: rows are held in memory until one of them can");
                false
            }
        }
    }

    /// Writes the journal's next chunk into `store`; on failure, waits longer before the next.
    async fn replay<S: Store>(&mut self, store: &S) {
        let Some(journal) = self.journal.as_mut() else {
            return;
        };
        let mut unreadable = 0;
        let read = journal.read(MAX_BATCH, &mut unreadable);
        self.counters
            .unreadable
            .fetch_add(unreadable, Ordering::Relaxed);
        let (entries, to, lines) = match read {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "the ledger's journal cannot be read");
                self.retry_later();
                return;
            }
        };
        if let Err(e) = store.append(&entries).await {
            self.counters.failures.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(error = %e, spilled = journal.pending(), retry_in = ?self.backoff, "ledger write failed; rows wait in the journal");
            self.retry_later();
            return;
        }
        if let Err(e) = journal.advance(to, lines) {
            tracing::error!(error = %e, "the ledger's journal's replay was not marked; its rows may be written again at a restart");
        }
        self.counters.spilled.fetch_sub(
            lines.min(self.counters.spilled.load(Ordering::Relaxed)),
            Ordering::Relaxed,
        );
        let of_earlier = lines.min(self.carried);
        self.carried -= of_earlier;
        let this_run = lines - of_earlier;
        self.counters
            .committed
            .fetch_add(this_run, Ordering::Relaxed);
        self.counters.batches.fetch_add(1, Ordering::Relaxed);
        self.backoff = FIRST_BACKOFF;
        self.retry_at = Instant::now();
        self.written(this_run);
    }

    fn retry_later(&mut self) {
        self.retry_at = Instant::now() + self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }

    /// Writes `batch` into `store`, or (failing, with a journal) spills it there.
    async fn write<S: Store>(&mut self, store: &S, batch: &mut Vec<Entry>) {
        if batch.is_empty() {
            return;
        }
        if self.journal.is_none() {
            write_until_done(store, batch, &self.counters).await;
        } else if let Err(e) = store.append(batch).await {
            self.counters.failures.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(error = %e, entries = batch.len(), "ledger write failed; rows go to the journal until the store answers");
            self.retry_later();
            if !self.spill(batch) {
                tokio::time::sleep(self.backoff).await;
            }
            return;
        }
        let n = batch.len() as u64;
        self.counters.committed.fetch_add(n, Ordering::Relaxed);
        self.counters.batches.fetch_add(1, Ordering::Relaxed);
        self.backoff = FIRST_BACKOFF;
        batch.clear();
        self.written(n);
    }
}

async fn write_loop<S: Store>(
    store: Arc<S>,
    mut rx: mpsc::UnboundedReceiver<Job>,
    counters: Arc<Counters>,
    journal: Option<Journal>,
) {
    let carried = journal.as_ref().map_or(0, Journal::pending);
    counters.spilled.store(carried, Ordering::Relaxed);
    let mut l = Loop {
        counters,
        journal,
        acks: Vec::new(),
        received: 0,
        done: 0,
        carried,
        backoff: FIRST_BACKOFF,
        retry_at: Instant::now(),
    };
    let mut batch: Vec<Entry> = Vec::new();
    let mut last_commit: Option<Instant> = None;
    loop {
        if l.spilling() {
            // Older rows wait in the journal: new ones join them there, in order.
            tokio::select! {
                biased;
                () = tokio::time::sleep_until(l.retry_at) => l.replay(&*store).await,
                job = rx.recv() => {
                    let Some(job) = job else { break };
                    l.take(job, &mut batch);
                    while batch.len() < MAX_BATCH && let Ok(job) = rx.try_recv() {
                        l.take(job, &mut batch);
                    }
                    if !l.spill(&mut batch) {
                        tokio::time::sleep(l.backoff).await;
                    }
                    if l.received == l.done {
                        l.written(0);
                    }
                }
            }
            continue;
        }
        if batch.is_empty() {
            let Some(first) = rx.recv().await else {
                break;
            };
            if let Some(at) = last_commit {
                tokio::time::sleep_until(at + COMMIT_EVERY).await;
            }
            l.take(first, &mut batch);
        }
        last_commit = Some(Instant::now());
        while batch.len() < MAX_BATCH
            && let Ok(job) = rx.try_recv()
        {
            l.take(job, &mut batch);
        }
        l.write(&*store, &mut batch).await;
        if batch.is_empty() {
            // Flushes with nothing before them to wait for.
            l.written(0);
        }
    }
    if !batch.is_empty() && !l.spill(&mut batch) {
        write_until_done(&*store, &batch, &l.counters).await;
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
mod tests;
