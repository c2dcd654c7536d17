//! The job store, on SQLite and on PostgreSQL (a fresh database per test on the server
//! `SLUICE_TEST_POSTGRES` names, which `scripts/test` starts): files per tenant, items
//! claimed in order under leases, a lost claim fenced by its epoch, each item ended once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;

use sluice_batch::store::ItemResult;
use sluice_batch::{Ending, Jobs, Kind, Limits, NewBatch, NewFile, Status, input};
use sluice_ledger::{AnyStore, Durability, PgStore, SqliteStore};

async fn sqlite(dir: &tempfile::TempDir) -> AnyStore {
    AnyStore::Sqlite(
        SqliteStore::open(&dir.path().join("ledger.db"), Durability::Process)
            .await
            .unwrap(),
    )
}

async fn postgres() -> AnyStore {
    AnyStore::Postgres(PgStore::connect(&postgres_url().await).await.unwrap())
}

/// A fresh database on the test server: its URL.
async fn postgres_url() -> String {
    let Ok(server) = std::env::var("SLUICE_TEST_POSTGRES") else {
        panic!("SLUICE_TEST_POSTGRES is not set: run ./scripts/test, which starts PostgreSQL");
    };
    let name = format!("sluice_test_{}", uuid_like());
    let admin = sqlx::PgPool::connect(&format!("{server}/postgres"))
        .await
        .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&admin)
        .await
        .unwrap();
    format!("{server}/{name}")
}

/// Instances started together against one database all open the jobs' tables: they are
/// made under the schema lock the ledger's tables are made under.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn instances_started_together_all_open_the_jobs_tables() {
    for _ in 0..3 {
        let url = postgres_url().await;
        let stores = futures::future::join_all((0..3).map(|_| PgStore::connect(&url))).await;
        let stores: Vec<AnyStore> = stores
            .into_iter()
            .map(|s| AnyStore::Postgres(s.unwrap()))
            .collect();
        let opens = futures::future::join_all(stores.iter().map(|s| Jobs::open(s.database())));
        for jobs in opens.await {
            assert!(
                jobs.is_ok(),
                "an instance failed to open the jobs: {jobs:?}"
            );
        }
    }
}

/// The items table as sluice made it before items recorded their claim.
const ITEMS_BEFORE_STARTS: &str = "CREATE TABLE sluice_batch_items (batch_id TEXT NOT NULL, \
     line BIGINT NOT NULL, custom_id TEXT NOT NULL, body TEXT NOT NULL, ord BIGINT NOT NULL, \
     expires_ms BIGINT NOT NULL, prefix BIGINT NOT NULL, state TEXT NOT NULL, owner TEXT, \
     lease_ms BIGINT, epoch BIGINT NOT NULL, tries BIGINT NOT NULL, status_code BIGINT, \
     response TEXT, error_code TEXT, error_message TEXT, request_id TEXT, ended_ms BIGINT, \
     prompt_tokens BIGINT NOT NULL, cached_tokens BIGINT NOT NULL, \
     completion_tokens BIGINT NOT NULL, PRIMARY KEY (batch_id, line))";

/// A store of an earlier sluice gains the claim's time when opened, on SQLite and on
/// PostgreSQL, and its items are then claimed and timed.
#[tokio::test]
async fn an_earlier_stores_items_gain_their_claim_time() {
    let dir = tempfile::tempdir().unwrap();
    for store in [sqlite(&dir).await, postgres().await] {
        match store.database() {
            sluice_ledger::Database::Sqlite(p) => {
                sqlx::query(ITEMS_BEFORE_STARTS).execute(p).await.unwrap();
            }
            sluice_ledger::Database::Postgres(p) => {
                sqlx::query(ITEMS_BEFORE_STARTS).execute(p).await.unwrap();
            }
        }
        let jobs = Jobs::open(store.database()).await.unwrap();
        // Opened twice: the column is added once.
        let jobs2 = Jobs::open(store.database()).await.unwrap();
        jobs.add_batch(&batch("batch_1", 1_000), &lines(2))
            .await
            .unwrap();
        let claimed = jobs2
            .claim(Kind::Calls, "a", 2, 10_000, 5_000)
            .await
            .unwrap();
        assert_eq!(claimed.len(), 2);
        let stored = jobs.batch(None, "batch_1").await.unwrap().unwrap();
        let lane = jobs.lane(&stored, 10_250).await.unwrap();
        assert_eq!((lane.running, lane.running_ms), (2, 500));
    }
}

fn uuid_like() -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let t = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    format!("{}_{}", t.as_nanos(), std::process::id())
}

macro_rules! on_both {
    ($($check:ident),* $(,)?) => {
        mod on_sqlite {
            $(
                #[tokio::test]
                async fn $check() {
                    let dir = tempfile::tempdir().unwrap();
                    let store = super::sqlite(&dir).await;
                    super::$check(sluice_batch::Jobs::open(store.database()).await.unwrap()).await;
                }
            )*
        }
        mod on_postgres {
            $(
                #[tokio::test]
                async fn $check() {
                    let store = super::postgres().await;
                    super::$check(sluice_batch::Jobs::open(store.database()).await.unwrap()).await;
                }
            )*
        }
    };
}

on_both!(
    files_belong_to_their_tenant_and_page_newest_first,
    items_are_claimed_by_job_then_prefix_and_ended_once,
    a_lost_claim_writes_nothing,
    cancelling_ends_queued_items_and_waits_for_running_ones,
    a_closed_window_expires_what_is_queued,
    old_files_and_ended_jobs_are_swept,
    calls_and_documents_are_claimed_apart,
);

fn file(id: &str, tenant: &str, at: i64) -> NewFile {
    NewFile {
        id: id.into(),
        tenant: tenant.into(),
        filename: format!("{id}.jsonl"),
        purpose: "batch".into(),
        content: format!("content of {id}"),
        created_ms: at,
        expires_ms: at + 1_000,
    }
}

fn lines(n: usize) -> Vec<sluice_batch::Line> {
    let text: Vec<String> = (0..n)
        .map(|i| {
            serde_json::json!({
                "custom_id": format!("doc-{i}"), "method": "POST", "url": "/v1/chat/completions",
                "body": {"model": "chat", "messages": [
                    {"role": "system", "content": if i % 2 == 0 { "even" } else { "odd" }},
                    {"role": "user", "content": format!("document {i}")}
                ]}
            })
            .to_string()
        })
        .collect();
    input::check(&text.join("\n"), Limits::default()).unwrap()
}

fn batch(id: &str, at: i64) -> NewBatch {
    NewBatch {
        id: id.into(),
        tenant: "acme".into(),
        api_key: Some("acme-app".into()),
        key_sha256: Some("ab".into()),
        endpoint: sluice_batch::Endpoint::Chat,
        input_file_id: "file-1".into(),
        created_ms: at,
        expires_ms: at + 86_400_000,
        metadata: Some(r#"{"run":"7"}"#.into()),
    }
}

fn answered(status: u16) -> Ending {
    Ending::Answered {
        status,
        body: format!(r#"{{"status":{status}}}"#),
        request_id: "req".into(),
        prompt_tokens: 100,
        cached_tokens: 60,
        completion_tokens: 10,
    }
}

async fn files_belong_to_their_tenant_and_page_newest_first(jobs: Jobs) {
    for (i, id) in ["file-a", "file-b", "file-c"].iter().enumerate() {
        jobs.add_file(&file(id, "acme", 100 + i as i64))
            .await
            .unwrap();
    }
    jobs.add_file(&file("file-z", "globex", 50)).await.unwrap();
    let got = jobs.file("acme", "file-b").await.unwrap().unwrap();
    assert_eq!((got.bytes, got.purpose.as_str()), (17, "batch"));
    assert_eq!(jobs.file("globex", "file-b").await.unwrap(), None);
    assert_eq!(
        jobs.file_content("acme", "file-a")
            .await
            .unwrap()
            .as_deref(),
        Some("content of file-a")
    );
    assert_eq!(jobs.file_content("globex", "file-a").await.unwrap(), None);
    let page = |after: Option<&'static str>| {
        let jobs = jobs.clone();
        async move {
            jobs.files("acme", after, 2)
                .await
                .unwrap()
                .into_iter()
                .map(|f| f.id)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(page(None).await, ["file-c", "file-b"]);
    assert_eq!(page(Some("file-b")).await, ["file-a"]);
    assert!(!jobs.delete_file("globex", "file-a").await.unwrap());
    assert!(jobs.delete_file("acme", "file-a").await.unwrap());
    assert!(!jobs.delete_file("acme", "file-a").await.unwrap());
}

async fn items_are_claimed_by_job_then_prefix_and_ended_once(jobs: Jobs) {
    jobs.add_batch(&batch("batch_2", 2_000), &lines(4))
        .await
        .unwrap();
    jobs.add_batch(&batch("batch_1", 1_000), &lines(6))
        .await
        .unwrap();
    assert_eq!(jobs.queued_items().await.unwrap(), 10);
    let stored = jobs.batch(Some("acme"), "batch_1").await.unwrap().unwrap();
    assert_eq!((stored.total, stored.ended), (6, None));
    assert_eq!(jobs.batch(Some("globex"), "batch_1").await.unwrap(), None);
    assert!(jobs.batch(None, "batch_1").await.unwrap().is_some());

    // The earlier job first; within it, one prefix's lines together.
    let first = jobs
        .claim(Kind::Calls, "a", 6, 10_000, 5_000)
        .await
        .unwrap();
    assert!(first.iter().all(|c| c.batch_id == "batch_1"));
    let mut by_prefix: Vec<u64> = first.iter().map(|c| c.line).collect();
    by_prefix.sort_unstable();
    assert_eq!(by_prefix, [1, 2, 3, 4, 5, 6]);
    let lane = jobs.lane(&stored, 10_000).await.unwrap();
    assert_eq!((lane.queued, lane.ahead), (4, 0));
    // The lane's in-flight figures: six items claimed at 10,000, half a second in flight.
    let lane = jobs.lane(&stored, 10_500).await.unwrap();
    assert_eq!(
        (lane.running, lane.running_ms, lane.youngest_ms),
        (6, 3_000, 500)
    );
    let later = jobs.batch(None, "batch_2").await.unwrap().unwrap();
    assert_eq!(jobs.lane(&later, 10_000).await.unwrap().ahead, 0);

    for c in &first {
        let status = if c.line == 6 { 500 } else { 200 };
        assert!(jobs.end_item(c, &answered(status), 11_000).await.unwrap());
        assert!(
            !jobs.end_item(c, &answered(status), 11_000).await.unwrap(),
            "once"
        );
    }
    let counts = jobs.counts("batch_1").await.unwrap();
    assert_eq!((counts.done, counts.failed, counts.queued), (5, 1, 0));
    assert_eq!((counts.prompt_tokens, counts.cached_tokens), (600, 360));
    let lane = jobs.lane(&stored, 11_500).await.unwrap();
    assert_eq!(lane.ended_last_window, 6);
    // Each was in flight a second, from its claim to its end.
    assert_eq!(
        (lane.timed_last_window, lane.timed_ms_last_window),
        (6, 6_000)
    );
    assert_eq!((lane.running, lane.running_ms), (0, 0));
    let out: Vec<ItemResult> = jobs.results("batch_1", false).await.unwrap();
    assert_eq!(out.len(), 5);
    assert_eq!(out[0].custom_id, "doc-0");
    let errors = jobs.results("batch_1", true).await.unwrap();
    assert_eq!((errors.len(), errors[0].status_code), (1, Some(500)));

    assert!(
        jobs.end_batch("batch_1", Status::Completed, 12_000)
            .await
            .unwrap()
    );
    assert!(
        !jobs
            .end_batch("batch_1", Status::Expired, 13_000)
            .await
            .unwrap()
    );
    let ended = jobs.batch(None, "batch_1").await.unwrap().unwrap();
    assert_eq!(ended.ended, Some((Status::Completed, 12_000)));
    let open: Vec<String> = jobs
        .open_batches()
        .await
        .unwrap()
        .into_iter()
        .map(|b| b.id)
        .collect();
    assert_eq!(open, ["batch_2"]);
}

async fn a_lost_claim_writes_nothing(jobs: Jobs) {
    jobs.add_batch(&batch("batch_1", 1_000), &lines(3))
        .await
        .unwrap();
    let mine = jobs
        .claim(Kind::Calls, "a", 3, 10_000, 1_000)
        .await
        .unwrap();
    assert_eq!(mine.len(), 3);
    // Nothing is free until the lease runs out; renewed, it holds longer.
    assert!(
        jobs.claim(Kind::Calls, "b", 3, 10_500, 1_000)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(jobs.renew("a", 10_900, 1_000).await.unwrap(), 3);
    assert!(
        jobs.claim(Kind::Calls, "b", 3, 11_500, 1_000)
            .await
            .unwrap()
            .is_empty()
    );
    // "a" stalls past its lease: "b" takes the items, and "a"'s late ending is fenced off.
    let theirs = jobs
        .claim(Kind::Calls, "b", 3, 12_000, 1_000)
        .await
        .unwrap();
    assert_eq!(theirs.len(), 3);
    assert!(theirs.iter().all(|c| c.tries == 2));
    assert!(
        !jobs
            .end_item(&mine[0], &answered(200), 12_100)
            .await
            .unwrap()
    );
    assert!(!jobs.release(&mine[1]).await.unwrap());
    assert!(
        jobs.end_item(&theirs[0], &answered(200), 12_200)
            .await
            .unwrap()
    );
    // Released unsent: queued again, the claim not counted.
    assert!(jobs.release(&theirs[1]).await.unwrap());
    let again = jobs
        .claim(Kind::Calls, "b", 3, 12_300, 1_000)
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!((again[0].line, again[0].tries), (theirs[1].line, 2));
    // At start, an embedded store puts back what a dead process held.
    assert_eq!(jobs.requeue_running().await.unwrap(), 2);
    assert_eq!(jobs.counts("batch_1").await.unwrap().queued, 2);
}

async fn cancelling_ends_queued_items_and_waits_for_running_ones(jobs: Jobs) {
    jobs.add_batch(&batch("batch_1", 1_000), &lines(5))
        .await
        .unwrap();
    let running = jobs
        .claim(Kind::Calls, "a", 2, 10_000, 5_000)
        .await
        .unwrap();
    assert_eq!(
        jobs.cancel("globex", "batch_1", 10_100).await.unwrap(),
        None
    );
    let b = jobs
        .cancel("acme", "batch_1", 10_100)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(b.cancel_ms, Some(10_100));
    let counts = jobs.counts("batch_1").await.unwrap();
    assert_eq!((counts.cancelled, counts.running), (3, 2));
    assert!(
        jobs.claim(Kind::Calls, "a", 5, 10_200, 5_000)
            .await
            .unwrap()
            .is_empty()
    );
    for c in &running {
        assert!(jobs.end_item(c, &answered(200), 10_300).await.unwrap());
    }
    let results = jobs.results("batch_1", true).await.unwrap();
    let states: HashSet<&str> = results.iter().map(|r| r.state.as_str()).collect();
    assert_eq!(states, HashSet::from(["cancelled"]));
}

async fn a_closed_window_expires_what_is_queued(jobs: Jobs) {
    jobs.add_batch(&batch("batch_1", 1_000), &lines(4))
        .await
        .unwrap();
    // One item runs under a live claim, one under a claim that lapsed (its gateway died).
    let one = jobs
        .claim(Kind::Calls, "a", 1, 10_000, 50_000)
        .await
        .unwrap();
    let lapsed = jobs
        .claim(Kind::Calls, "b", 1, 10_000, 1_000)
        .await
        .unwrap();
    assert_eq!(jobs.expire_queued("batch_1", 20_000).await.unwrap(), 3);
    assert!(
        jobs.end_item(&one[0], &answered(200), 20_100)
            .await
            .unwrap()
    );
    assert!(
        !jobs
            .end_item(&lapsed[0], &answered(200), 20_100)
            .await
            .unwrap()
    );
    let c = jobs.counts("batch_1").await.unwrap();
    assert_eq!((c.done, c.expired, c.queued), (1, 3, 0));
    // Nothing of a job whose window closed is claimed, even before the keeper expires it.
    let closed = NewBatch {
        expires_ms: 5_000,
        ..batch("batch_2", 2_000)
    };
    jobs.add_batch(&closed, &lines(2)).await.unwrap();
    assert!(
        jobs.claim(Kind::Calls, "a", 5, 6_000, 1_000)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn old_files_and_ended_jobs_are_swept(jobs: Jobs) {
    jobs.add_file(&file("file-old", "acme", 100)).await.unwrap();
    jobs.add_file(&file("file-new", "acme", 5_000))
        .await
        .unwrap();
    jobs.add_batch(&batch("batch_old", 100), &lines(2))
        .await
        .unwrap();
    jobs.add_batch(&batch("batch_open", 200), &lines(2))
        .await
        .unwrap();
    jobs.end_batch("batch_old", Status::Cancelled, 300)
        .await
        .unwrap();
    assert_eq!(jobs.sweep(1_000).await.unwrap(), (1, 1));
    assert!(jobs.file("acme", "file-new").await.unwrap().is_some());
    assert!(jobs.batch(None, "batch_old").await.unwrap().is_none());
    assert_eq!(jobs.counts("batch_old").await.unwrap().total(), 0);
    assert_eq!(
        jobs.counts("batch_open").await.unwrap().queued,
        2,
        "open jobs stay"
    );
}

async fn calls_and_documents_are_claimed_apart(jobs: Jobs) {
    jobs.add_batch(&batch("batch_calls", 1_000), &lines(3))
        .await
        .unwrap();
    let docs: Vec<String> = (0..2)
        .map(|i| {
            serde_json::json!({"custom_id": format!("doc-{i}"), "method": "POST",
                "url": "/v1/analyses",
                "body": serde_json::from_str::<serde_json::Value>(
                    &input::document::write(&format!("d{i}.txt"), b"1. Term.")).unwrap()})
            .to_string()
        })
        .collect();
    let docs = input::check(&docs.join("\n"), Limits::default()).unwrap();
    let mut b = batch("batch_docs", 500);
    b.endpoint = sluice_batch::Endpoint::Analyses;
    jobs.add_batch(&b, &docs).await.unwrap();
    // The documents' job is the earlier, but a claim for calls never takes its items.
    let calls = jobs
        .claim(Kind::Calls, "a", 10, 10_000, 5_000)
        .await
        .unwrap();
    assert_eq!(calls.len(), 3);
    assert!(calls.iter().all(|c| c.batch_id == "batch_calls"));
    let documents = jobs
        .claim(Kind::Documents, "a", 10, 10_000, 5_000)
        .await
        .unwrap();
    assert_eq!(documents.len(), 2);
    assert!(documents.iter().all(|c| c.batch_id == "batch_docs"));
    let up = input::document::read(&documents[0].body).unwrap();
    assert_eq!(
        (up.filename.as_str(), up.bytes.as_slice()),
        ("d0.txt", &b"1. Term."[..])
    );
    let stored = jobs.batch(None, "batch_docs").await.unwrap().unwrap();
    assert_eq!(stored.endpoint, sluice_batch::Endpoint::Analyses);
}
