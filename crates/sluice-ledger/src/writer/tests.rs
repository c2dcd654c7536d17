//! The writer's tests: a failing store delays rows but loses none, with or without a journal.

use super::*;
use crate::journal::Journal;
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

#[tokio::test(start_paused = true)]
async fn with_a_journal_rows_wait_on_the_disk_and_land_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.journal");
    let store = Arc::new(Flaky {
        failing: Mutex::new(6),
        ..Flaky::default()
    });
    let (ledger, _task) = Ledger::start_with_journal(store.clone(), &path).unwrap();
    for i in 0..100 {
        ledger.record(entry(i));
    }
    // Let the first write fail and the rows go to the journal.
    while ledger.stats().spilled == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        std::fs::metadata(&path).unwrap().len() > 0,
        "rows are on the disk"
    );
    for i in 100..200 {
        ledger.record(entry(i));
    }
    ledger.append(entry(200)).await.unwrap();
    ledger.flush().await.unwrap();
    let s = ledger.stats();
    assert_eq!(
        (s.sent, s.committed, s.spilled, s.pending()),
        (201, 201, 0, 0)
    );
    assert!(s.failures >= 6);
    let ids: Vec<String> = store
        .rows
        .lock()
        .iter()
        .map(|e| e.request_id.to_string())
        .collect();
    let want: Vec<String> = (0..=200).map(|i| format!("r-{i}")).collect();
    assert_eq!(ids, want, "every row, once, in the order sent");
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        0,
        "the journal starts empty again"
    );
}

#[tokio::test(start_paused = true)]
async fn rows_a_journal_kept_from_an_earlier_run_are_written_first() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.journal");
    let down = Arc::new(Flaky {
        failing: Mutex::new(u32::MAX),
        ..Flaky::default()
    });
    let (ledger, task) = Ledger::start_with_journal(down, &path).unwrap();
    let mut settled = entry(0);
    settled.settled_in_ledger = true;
    ledger.record(settled);
    for i in 1..50 {
        ledger.record(entry(i));
    }
    while ledger.stats().spilled < 50 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The process dies with the store still down.
    task.abort();
    let _ = task.await;
    let store = Arc::new(Flaky::default());
    let (ledger, _task) = Ledger::start_with_journal(store.clone(), &path).unwrap();
    ledger.append(entry(50)).await.unwrap();
    let rows = store.rows.lock().clone();
    let ids: Vec<String> = rows.iter().map(|e| e.request_id.to_string()).collect();
    let want: Vec<String> = (0..=50).map(|i| format!("r-{i}")).collect();
    assert_eq!(ids, want);
    assert!(
        rows[0].settled_in_ledger,
        "a row's settlement is kept through the journal"
    );
}

#[test]
fn a_journal_that_cannot_be_written_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing").join("ledger.journal");
    let err = Journal::open(&path).unwrap_err();
    assert!(err.to_string().contains("ledger.journal"), "{err}");
}
