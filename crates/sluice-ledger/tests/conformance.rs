//! One conformance suite, run against every store: the embedded SQLite file and PostgreSQL
//! (a fresh database per test on the server `SLUICE_TEST_POSTGRES` names, which
//! `scripts/test` starts).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::sync::Arc;

use sluice_ledger::{
    CacheOutcome, Durability, Entry, GroupBy, Ledger, PgStore, RevokedKey, SqliteStore, Store,
    StoredBelief, StoredKey, StoredTenant, Tokens, UsageQuery,
};

const DAY: i64 = 86_400_000;
/// 2026-11-30T00:00:00Z.
const NOV30: i64 = 1_796_083_200_000 - DAY;

fn entry(i: u64, tenant: &str, model: &str, at_ms: i64) -> Entry {
    Entry {
        request_id: format!("req-{i}").into(),
        at_ms,
        tenant: Some(tenant.into()),
        api_key: Some(format!("{tenant}-key").into()),
        model_group: Some("chat".into()),
        upstream: Some(format!("{model}-east").into()),
        model: Some(model.into()),
        status: 200,
        error: None,
        stream: i.is_multiple_of(2),
        tokens: Tokens {
            prompt: 1000 + i,
            cached: 600,
            cache_write: 0,
            completion: 50,
            reasoning: 10,
        },
        cost_micros: Some(2_000 + i),
        saved_micros: 900,
        extra_micros: 0,
        cache: CacheOutcome::Provider,
        ttfb_ms: Some(300),
        total_ms: 1_200,
        attempts: 1,
        hedges: 0,
        retries: 0,
        batch_item: None,
        currency: None,
        native_micros: None,
        hold: i.is_multiple_of(3).then(|| format!("inst-{i}").into()),
        settled_in_ledger: false,
    }
}

async fn sqlite(dir: &tempfile::TempDir) -> SqliteStore {
    SqliteStore::open(&dir.path().join("ledger.db"), Durability::Disk)
        .await
        .unwrap()
}

/// A store on a database of its own, so tests running at once do not see each other.
async fn postgres() -> PgStore {
    PgStore::connect(&postgres_database().await).await.unwrap()
}

/// A database of its own on the test server: its URL.
async fn postgres_database() -> String {
    let Ok(server) = std::env::var("SLUICE_TEST_POSTGRES") else {
        panic!(
            "SLUICE_TEST_POSTGRES is not set: run ./scripts/test, which starts PostgreSQL, or \
             point it at a server (postgres://user@host:port)"
        );
    };
    let name = format!("sluice_test_{}", uuid::Uuid::new_v4().simple());
    let admin = sqlx::PgPool::connect(&format!("{server}/postgres"))
        .await
        .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&admin)
        .await
        .unwrap();
    format!("{server}/{name}")
}

/// Declares one test per store for each conformance check.
macro_rules! conformance {
    ($($check:ident),* $(,)?) => {
        mod on_sqlite {
            $(
                #[tokio::test]
                async fn $check() {
                    let dir = tempfile::tempdir().unwrap();
                    super::$check(super::sqlite(&dir).await).await;
                }
            )*
        }
        mod on_postgres {
            $(
                #[tokio::test]
                async fn $check() {
                    super::$check(super::postgres().await).await;
                }
            )*
        }
    };
}

conformance!(
    entries_come_back_as_written,
    usage_totals_by_tenant_and_model,
    filters_by_tenant_and_half_open_range,
    an_empty_ledger_totals_zero,
    a_cost_not_known_is_stored_as_unknown_and_counted_apart,
    big_batches_and_awkward_text,
    every_batch_size_writes_exactly_its_rows,
    the_writer_commits_everything_sent,
    keys_are_saved_replaced_and_removed,
    revocations_outlive_the_key_and_remove_it_at_once,
    tenants_are_saved_replaced_and_removed,
    router_beliefs_are_replaced_whole_per_router,
    a_batch_item_is_kept_once,
    answers_in_another_currency_are_totalled_in_it_too,
    every_change_of_keys_and_tenants_moves_the_directory_version,
);

async fn every_change_of_keys_and_tenants_moves_the_directory_version<S: Store>(s: S) {
    assert_eq!(
        s.directory_version().await.unwrap(),
        0,
        "nothing changed yet"
    );
    let key = StoredKey {
        name: "ci".into(),
        tenant: "acme".into(),
        sha256: "ab".repeat(32),
        lane: None,
        models: vec![],
    };
    let tenant = StoredTenant {
        name: "acme".into(),
        ..StoredTenant::default()
    };
    let mut seen = 0;
    let mut moved = |v: u64, what: &str| {
        assert!(v > seen, "{what} moved the version: {seen} then {v}");
        seen = v;
    };
    s.save_key(&key).await.unwrap();
    moved(s.directory_version().await.unwrap(), "a key saved");
    s.save_tenant(&tenant).await.unwrap();
    moved(s.directory_version().await.unwrap(), "a tenant saved");
    s.save_tenant(&StoredTenant {
        rpm: Some(5),
        ..tenant
    })
    .await
    .unwrap();
    moved(
        s.directory_version().await.unwrap(),
        "a tenant's limits changed",
    );
    s.revoke_keys(&[RevokedKey {
        sha256: key.sha256.clone(),
        name: "ci".into(),
        tenant: "acme".into(),
        revoked_ms: 1,
    }])
    .await
    .unwrap();
    moved(s.directory_version().await.unwrap(), "a key revoked");
    assert!(s.remove_tenant("acme").await.unwrap());
    moved(s.directory_version().await.unwrap(), "a tenant removed");
    let before = s.directory_version().await.unwrap();
    assert!(!s.remove_key("nobody").await.unwrap());
    assert_eq!(
        s.directory_version().await.unwrap(),
        before,
        "removing nothing changes nothing"
    );
}

/// A call priced in yuan is billed converted (its `cost_micros`) and keeps what the provider
/// bills in yuan; usage totals both, by currency, per row and in all.
async fn answers_in_another_currency_are_totalled_in_it_too<S: Store>(s: S) {
    let yuan = |i: u64, tenant: &str, native: u64| Entry {
        currency: Some("CNY".into()),
        native_micros: Some(native),
        ..entry(i, tenant, "glm-5.3", NOV30)
    };
    s.append(&[
        yuan(0, "acme", 8_000_000),
        yuan(1, "acme", 2_000_000),
        yuan(2, "beta", 1_000_000),
        entry(3, "acme", "gpt-4o", NOV30),
    ])
    .await
    .unwrap();
    let back = s.entries(&UsageQuery::default(), 10).await.unwrap();
    assert_eq!(back[0].currency.as_deref(), Some("CNY"));
    assert_eq!(back[0].native_micros, Some(8_000_000));
    assert_eq!(
        (back[3].currency.clone(), back[3].native_micros),
        (None, None)
    );
    let q = UsageQuery {
        group_by: vec![GroupBy::Tenant],
        ..UsageQuery::default()
    };
    let rows = s.usage(&q).await.unwrap();
    assert_eq!(rows[0].native, vec![("CNY".to_string(), 10_000_000)]);
    assert_eq!(rows[1].native, vec![("CNY".to_string(), 1_000_000)]);
    let all = s.usage(&UsageQuery::default()).await.unwrap();
    assert_eq!(all[0].native, vec![("CNY".to_string(), 11_000_000)]);
    assert_eq!(all[0].requests, 4);
    let total = sluice_ledger::report::json(&q, &rows);
    assert_eq!(total["total"]["native_cost_micros"]["CNY"], 11_000_000);
    assert!(sluice_ledger::report::table(&q, &rows).contains("CNY 10.000000"));
}

/// An item sent again (after a crash) is billed once: its second row is dropped, in the same
/// commit as other rows or a later one; calls of no item are never dropped.
async fn a_batch_item_is_kept_once<S: Store>(s: S) {
    let item = |i: u64, id: &str| Entry {
        batch_item: Some(id.into()),
        ..entry(i, "acme", "gpt-4o", 1_000 + i as i64)
    };
    s.append(&[
        item(0, "batch_a/1"),
        item(1, "batch_a/2"),
        entry(2, "acme", "gpt-4o", 5),
    ])
    .await
    .unwrap();
    s.append(&[
        item(3, "batch_a/1"),
        entry(2, "acme", "gpt-4o", 5),
        item(4, "batch_a/3"),
    ])
    .await
    .unwrap();
    s.append(&[item(5, "batch_a/3"), item(6, "batch_a/3")])
        .await
        .unwrap();
    let back = s.entries(&UsageQuery::default(), 100).await.unwrap();
    let ids: Vec<(String, Option<String>)> = back
        .iter()
        .map(|e| {
            (
                e.request_id.to_string(),
                e.batch_item.as_deref().map(str::to_string),
            )
        })
        .collect();
    let want = [
        ("req-0", Some("batch_a/1")),
        ("req-1", Some("batch_a/2")),
        ("req-2", None),
        ("req-2", None),
        ("req-4", Some("batch_a/3")),
    ]
    .map(|(r, b)| (r.to_string(), b.map(str::to_string)));
    assert_eq!(ids, want);
}

async fn entries_come_back_as_written<S: Store>(s: S) {
    let mut failed = entry(2, "beta", "gpt-4o", NOV30 + 5);
    failed.status = 502;
    failed.error = Some("upstream_error".into());
    failed.tenant = None;
    failed.api_key = None;
    failed.ttfb_ms = None;
    failed.saved_micros = -40;
    failed.extra_micros = 77;
    failed.hedges = 1;
    failed.retries = 2;
    failed.attempts = 4;
    failed.cache = CacheOutcome::Miss;
    let written = vec![entry(1, "acme", "gpt-4o", NOV30), failed];
    s.append(&written).await.unwrap();
    let read = s.entries(&UsageQuery::default(), 10).await.unwrap();
    assert_eq!(read, written);
}

async fn usage_totals_by_tenant_and_model<S: Store>(s: S) {
    let mut batch = Vec::new();
    for i in 0..10 {
        batch.push(entry(
            i,
            "acme",
            if i < 6 { "gpt-4o" } else { "deepseek-chat" },
            NOV30,
        ));
    }
    let mut hedged = entry(10, "beta", "gpt-4o", NOV30 + DAY);
    hedged.hedges = 1;
    hedged.extra_micros = 500;
    hedged.cache = CacheOutcome::Miss;
    batch.push(hedged);
    s.append(&batch).await.unwrap();

    let q = UsageQuery {
        group_by: vec![GroupBy::Tenant, GroupBy::Model],
        ..UsageQuery::default()
    };
    let rows = s.usage(&q).await.unwrap();
    let keys: Vec<Vec<Option<String>>> = rows.iter().map(|r| r.keys.clone()).collect();
    let k = |t: &str, m: &str| vec![Some(t.to_string()), Some(m.to_string())];
    assert_eq!(
        keys,
        vec![
            k("acme", "deepseek-chat"),
            k("acme", "gpt-4o"),
            k("beta", "gpt-4o")
        ]
    );
    let acme_gpt = &rows[1];
    assert_eq!(acme_gpt.requests, 6);
    assert_eq!(
        acme_gpt.prompt_tokens,
        (0..6).map(|i| 1000 + i).sum::<u64>()
    );
    assert_eq!(acme_gpt.cached_tokens, 3_600);
    assert_eq!(acme_gpt.reasoning_tokens, 60);
    assert_eq!(acme_gpt.cost_micros, (0..6).map(|i| 2000 + i).sum::<u64>());
    assert_eq!(acme_gpt.saved_micros, 5_400);
    assert_eq!(acme_gpt.cache_hits, 6);
    let beta = &rows[2];
    assert_eq!(
        (beta.hedges, beta.extra_micros, beta.cache_hits),
        (1, 500, 0)
    );

    let by_day = s
        .usage(&UsageQuery {
            group_by: vec![GroupBy::Day],
            ..UsageQuery::default()
        })
        .await
        .unwrap();
    let days: Vec<(Option<String>, u64)> = by_day
        .iter()
        .map(|r| (r.keys[0].clone(), r.requests))
        .collect();
    assert_eq!(
        days,
        vec![
            (Some("2026-11-30".into()), 10),
            (Some("2026-12-01".into()), 1)
        ]
    );
}

async fn filters_by_tenant_and_half_open_range<S: Store>(s: S) {
    let batch: Vec<Entry> = (0..20)
        .map(|i| {
            entry(
                i,
                if i % 2 == 0 { "acme" } else { "beta" },
                "gpt-4o",
                NOV30 + i as i64 * 1000,
            )
        })
        .collect();
    s.append(&batch).await.unwrap();
    let q = UsageQuery {
        tenant: Some("acme".into()),
        from_ms: Some(NOV30 + 4_000),
        to_ms: Some(NOV30 + 10_000),
        group_by: vec![],
    };
    let rows = s.usage(&q).await.unwrap();
    assert_eq!(rows.len(), 1);
    // acme's calls at 4, 6 and 8 s: the range includes its start and excludes its end.
    assert_eq!(rows[0].requests, 3);
    let listed = s.entries(&q, 100).await.unwrap();
    let ids: Vec<&str> = listed.iter().map(|e| &*e.request_id).collect();
    assert_eq!(ids, vec!["req-4", "req-6", "req-8"]);
    assert_eq!(s.entries(&q, 2).await.unwrap().len(), 2);
}

async fn a_cost_not_known_is_stored_as_unknown_and_counted_apart<S: Store>(s: S) {
    let priced = entry(0, "acme", "gpt-4o", 1_000);
    let unpriced = Entry {
        cost_micros: None,
        ..entry(1, "acme", "glm-4.5-air", 2_000)
    };
    s.append(&[priced.clone(), unpriced.clone()]).await.unwrap();
    let back = s.entries(&UsageQuery::default(), 10).await.unwrap();
    assert_eq!(back[1].cost_micros, None, "unknown, not 0");
    let total = &s.usage(&UsageQuery::default()).await.unwrap()[0];
    assert_eq!(total.requests, 2);
    assert_eq!(total.cost_micros, priced.cost_micros.unwrap());
    assert_eq!(total.unpriced_calls, 1);
}

/// Instances started together against an empty database (a Deployment's replicas) all come
/// up: the tables are made under one lock, and the others find them made.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn instances_started_together_against_an_empty_database_all_open_it() {
    for _ in 0..3 {
        let url = postgres_database().await;
        let opens = (0..4).map(|_| PgStore::connect(&url));
        let stores = futures::future::join_all(opens).await;
        for s in &stores {
            assert!(s.is_ok(), "an instance failed to open the ledger: {s:?}");
        }
        let s = stores.into_iter().next().unwrap().unwrap();
        s.append(&[entry(0, "acme", "gpt-4o", 1_000)])
            .await
            .unwrap();
    }
}

/// A ledger written when `cost_micros` was NOT NULL takes unknown costs once opened again.
#[tokio::test]
async fn an_older_postgres_ledger_takes_unknown_costs() {
    let url = postgres_database().await;
    let s = PgStore::connect(&url).await.unwrap();
    s.append(&[entry(0, "acme", "gpt-4o", 1_000)])
        .await
        .unwrap();
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    sqlx::query("ALTER TABLE sluice_ledger ALTER COLUMN cost_micros SET NOT NULL")
        .execute(&pool)
        .await
        .unwrap();
    let unknown = Entry {
        cost_micros: None,
        ..entry(1, "acme", "glm-4.5-air", 2_000)
    };
    assert!(
        s.append(std::slice::from_ref(&unknown)).await.is_err(),
        "the old table refuses"
    );
    let again = PgStore::connect(&url).await.unwrap();
    again.append(&[unknown]).await.unwrap();
    assert_eq!(
        again
            .entries(&UsageQuery::default(), 10)
            .await
            .unwrap()
            .len(),
        2
    );
}

async fn an_empty_ledger_totals_zero<S: Store>(s: S) {
    // Appending nothing writes nothing (and is not an error).
    s.append(&[]).await.unwrap();
    assert!(
        s.entries(&UsageQuery::default(), 10)
            .await
            .unwrap()
            .is_empty()
    );
    let rows = s.usage(&UsageQuery::default()).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].requests, rows[0].cost_micros), (0, 0));
    let grouped = UsageQuery {
        group_by: vec![GroupBy::Tenant],
        ..UsageQuery::default()
    };
    assert!(s.usage(&grouped).await.unwrap().is_empty());
}

async fn big_batches_and_awkward_text<S: Store>(s: S) {
    // More rows than one INSERT statement carries, and text that would break naive SQL.
    let awkward = "o'brien; DROP TABLE sluice_ledger; -- 租户 \u{1F600}";
    let batch: Vec<Entry> = (0..1_234)
        .map(|i| entry(i, if i == 7 { awkward } else { "acme" }, "gpt-4o", NOV30))
        .collect();
    s.append(&batch).await.unwrap();
    let q = UsageQuery {
        group_by: vec![GroupBy::Tenant],
        ..UsageQuery::default()
    };
    let rows = s.usage(&q).await.unwrap();
    let got: Vec<(Option<String>, u64)> = rows
        .iter()
        .map(|r| (r.keys[0].clone(), r.requests))
        .collect();
    assert_eq!(
        got,
        vec![(Some("acme".into()), 1_233), (Some(awkward.into()), 1)]
    );
}

async fn every_batch_size_writes_exactly_its_rows<S: Store>(s: S) {
    // Statements come in a few sizes, their unused rows padded with NULLs that the insert
    // drops: around each size and across two statements, every row lands once, as written.
    let mut written = Vec::new();
    let mut next = 0;
    for size in [1, 2, 3, 5, 31, 32, 33, 127, 255, 256, 257, 600] {
        let batch: Vec<Entry> = (next..next + size)
            .map(|i| entry(i, "acme", "gpt-4o", NOV30 + i64::try_from(i).unwrap()))
            .collect();
        next += size;
        s.append(&batch).await.unwrap();
        written.extend(batch);
    }
    let read = s.entries(&UsageQuery::default(), 10_000).await.unwrap();
    assert_eq!(read.len(), written.len());
    assert_eq!(read, written);
}

async fn the_writer_commits_everything_sent<S: Store>(s: S) {
    let store = Arc::new(s);
    let (ledger, task) = Ledger::start(store.clone());
    // Eight producers at once; some wait for their commit, most do not.
    let mut producers = Vec::new();
    for p in 0..8u64 {
        let ledger = ledger.clone();
        producers.push(tokio::spawn(async move {
            for i in 0..500u64 {
                let e = entry(p * 1_000 + i, "acme", "gpt-4o", NOV30);
                if i % 100 == 0 {
                    ledger.append(e).await.unwrap();
                } else {
                    ledger.record(e);
                }
            }
        }));
    }
    for p in producers {
        p.await.unwrap();
    }
    ledger.flush().await.unwrap();
    let stats = ledger.stats();
    assert_eq!(
        (stats.sent, stats.committed, stats.pending()),
        (4_000, 4_000, 0)
    );
    assert!(stats.batches < 4_000, "entries were grouped: {stats:?}");
    let all = store.entries(&UsageQuery::default(), 10_000).await.unwrap();
    let ids: HashSet<std::sync::Arc<str>> = all.into_iter().map(|e| e.request_id).collect();
    assert_eq!(ids.len(), 4_000);
    drop(ledger);
    task.await.unwrap();
}

async fn keys_are_saved_replaced_and_removed<S: Store>(s: S) {
    assert!(s.keys().await.unwrap().is_empty());
    let ci = StoredKey {
        name: "ci".into(),
        tenant: "acme".into(),
        sha256: "ab".repeat(32),
        lane: Some("batch".into()),
        models: vec!["chat".into(), "review".into()],
    };
    let ops = StoredKey {
        name: "ops".into(),
        tenant: "o'brien".into(),
        sha256: "cd".repeat(32),
        lane: None,
        models: vec![],
    };
    s.save_key(&ops).await.unwrap();
    s.save_key(&ci).await.unwrap();
    assert_eq!(s.keys().await.unwrap(), vec![ci.clone(), ops.clone()]);
    let rotated = StoredKey {
        sha256: "ef".repeat(32),
        ..ci.clone()
    };
    s.save_key(&rotated).await.unwrap();
    assert_eq!(s.keys().await.unwrap(), vec![rotated, ops.clone()]);
    assert!(s.remove_key("ci").await.unwrap());
    assert!(!s.remove_key("ci").await.unwrap());
    assert_eq!(s.keys().await.unwrap(), vec![ops]);
}

async fn revocations_outlive_the_key_and_remove_it_at_once<S: Store>(s: S) {
    assert!(s.revoked_keys().await.unwrap().is_empty());
    let made = StoredKey {
        name: "ci".into(),
        tenant: "acme".into(),
        sha256: "ab".repeat(32),
        lane: None,
        models: vec![],
    };
    s.save_key(&made).await.unwrap();
    let revoked = RevokedKey {
        sha256: made.sha256.clone(),
        name: "ci".into(),
        tenant: "acme".into(),
        revoked_ms: 1_700_000_000_000,
    };
    s.revoke_keys(std::slice::from_ref(&revoked)).await.unwrap();
    assert!(s.keys().await.unwrap().is_empty(), "the made key is gone");
    // A key defined elsewhere (the configuration) is revoked by its hash alone.
    let configured = RevokedKey {
        sha256: "cd".repeat(32),
        name: "o'brien-app".into(),
        tenant: "o'brien".into(),
        revoked_ms: 1_700_000_000_001,
    };
    // Revoking a hash twice keeps the first revocation; several go at once.
    let again = RevokedKey {
        revoked_ms: 1_800_000_000_000,
        ..revoked.clone()
    };
    s.revoke_keys(&[configured.clone(), again]).await.unwrap();
    assert_eq!(s.revoked_keys().await.unwrap(), vec![revoked, configured]);
}

async fn tenants_are_saved_replaced_and_removed<S: Store>(s: S) {
    assert!(s.tenants().await.unwrap().is_empty());
    let acme = StoredTenant {
        name: "acme".into(),
        lane: Some("batch".into()),
        credits_micros: Some(25_000_000),
        rpm: Some(60),
        tpm: None,
        tokens_per_day: Some(1_000_000),
        spend_per_month_micros: None,
    };
    let bare = StoredTenant {
        name: "bare".into(),
        ..StoredTenant::default()
    };
    s.save_tenant(&bare).await.unwrap();
    s.save_tenant(&acme).await.unwrap();
    assert_eq!(s.tenants().await.unwrap(), vec![acme.clone(), bare.clone()]);
    let topped_up = StoredTenant {
        credits_micros: Some(50_000_000),
        lane: None,
        ..acme
    };
    s.save_tenant(&topped_up).await.unwrap();
    assert_eq!(s.tenants().await.unwrap(), vec![topped_up, bare.clone()]);
    assert!(s.remove_tenant("acme").await.unwrap());
    assert!(!s.remove_tenant("acme").await.unwrap());
    assert_eq!(s.tenants().await.unwrap(), vec![bare]);
}

async fn router_beliefs_are_replaced_whole_per_router<S: Store>(s: S) {
    assert!(s.beliefs("auto").await.unwrap().is_empty());
    let b = |task: &str, group: &str, alpha: f64, output: Option<f64>| StoredBelief {
        task: task.into(),
        group: group.into(),
        alpha,
        beta: 1.25,
        output_tokens: output,
        cached_share: output.map(|_| 0.375),
    };
    let first = vec![
        b("qa", "cheap", 41.5, Some(120.5)),
        b("qa", "strong", 3.0, None),
        b("合同审查", "cheap", 1.0, None),
    ];
    s.save_beliefs("auto", &first).await.unwrap();
    s.save_beliefs("other", &[b("qa", "mid", 2.0, None)])
        .await
        .unwrap();
    assert_eq!(s.beliefs("auto").await.unwrap(), first);
    // A later save replaces the router's rows, and only its rows.
    let later = vec![b("qa", "cheap", 50.0, Some(110.0))];
    s.save_beliefs("auto", &later).await.unwrap();
    assert_eq!(s.beliefs("auto").await.unwrap(), later);
    assert_eq!(s.beliefs("other").await.unwrap().len(), 1);
    // Many at once (more than one insert's worth).
    let many: Vec<StoredBelief> = (0..1_200)
        .map(|i| b(&format!("task-{i:04}"), "cheap", f64::from(i), None))
        .collect();
    s.save_beliefs("auto", &many).await.unwrap();
    assert_eq!(s.beliefs("auto").await.unwrap(), many);
}
