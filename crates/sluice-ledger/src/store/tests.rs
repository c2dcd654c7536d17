//! The embedded store's migration of a ledger an earlier sluice wrote.

#![allow(clippy::unwrap_used)]

use super::*;
use crate::entry::{CacheOutcome, Tokens};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};

fn entry(i: u64, cost: Option<u64>) -> Entry {
    Entry {
        request_id: format!("r-{i}").into(),
        at_ms: 1_700_000_000_000 + i64::try_from(i).unwrap(),
        tenant: Some("acme".into()),
        status: 200,
        tokens: Tokens {
            prompt: 10,
            ..Tokens::default()
        },
        cost_micros: cost,
        cache: CacheOutcome::Miss,
        total_ms: 5,
        attempts: 1,
        ..Entry::default()
    }
}

#[tokio::test]
async fn an_older_sqlite_ledger_is_rebuilt_to_take_unknown_costs_with_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    // The table as an earlier sluice made it: `cost_micros` NOT NULL, no `batch_item`, one
    // row in it.
    {
        let options = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .unwrap();
        crate::sql::create(&pool, "INTEGER PRIMARY KEY", &[])
            .await
            .unwrap();
        sqlx::query("DROP TABLE sluice_ledger")
            .execute(&pool)
            .await
            .unwrap();
        let old = crate::sql::unknown_cost_migration(true)[1]
            .replace("cost_micros BIGINT", "cost_micros BIGINT NOT NULL")
            .replace(", batch_item TEXT", "");
        assert!(!old.contains("batch_item"));
        sqlx::query(sqlx::AssertSqlSafe(old))
            .execute(&pool)
            .await
            .unwrap();
        sqlx::query(
            "INSERT INTO sluice_ledger (request_id, at_ms, day, status, stream, prompt_tokens, \
             cached_tokens, cache_write_tokens, completion_tokens, reasoning_tokens, cost_micros, \
             saved_micros, extra_micros, cache, total_ms, attempts, hedges, retries) \
             VALUES ('old', 1, '1970-01-01', 200, 0, 1, 0, 0, 1, 0, 42, 0, 0, 'miss', 3, 1, 0, 0)",
        )
        .execute(&pool)
        .await
        .unwrap();
        pool.close().await;
    }
    let s = SqliteStore::open(&path, Durability::Disk).await.unwrap();
    s.append(&[entry(1, None), entry(2, Some(7))])
        .await
        .unwrap();
    let rows = s.entries(&crate::UsageQuery::default(), 10).await.unwrap();
    let costs: Vec<(String, Option<u64>)> = rows
        .iter()
        .map(|e| (e.request_id.to_string(), e.cost_micros))
        .collect();
    assert_eq!(
        costs,
        [
            ("old".into(), Some(42)),
            ("r-1".into(), None),
            ("r-2".into(), Some(7))
        ]
    );
    // Opened again, nothing more to do.
    drop(s);
    SqliteStore::open(&path, Durability::Disk).await.unwrap();
}

#[tokio::test]
async fn the_hold_and_batch_indexes_hold_only_rows_that_carry_one_and_replace_full_ones() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    {
        // An earlier sluice's full indexes.
        let s = SqliteStore::open(&path, Durability::Disk).await.unwrap();
        for sql in [
            "DROP INDEX sluice_ledger_hold_set",
            "DROP INDEX sluice_ledger_batch_item_set",
            "CREATE INDEX sluice_ledger_hold ON sluice_ledger (hold)",
            "CREATE UNIQUE INDEX sluice_ledger_batch_item ON sluice_ledger (batch_item)",
        ] {
            sqlx::query(sql).execute(&s.pool).await.unwrap();
        }
    }
    let s = SqliteStore::open(&path, Durability::Disk).await.unwrap();
    let indexes: Vec<(String, String)> = sqlx::query_as(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL \
         AND (name LIKE '%hold%' OR name LIKE '%batch_item%') ORDER BY name",
    )
    .fetch_all(&s.pool)
    .await
    .unwrap();
    let names: Vec<&str> = indexes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["sluice_ledger_batch_item_set", "sluice_ledger_hold_set"]
    );
    assert!(indexes.iter().all(|(_, sql)| sql.contains("IS NOT NULL")));
    // The settling query still finds holds by the index.
    let plan: Vec<(i64, i64, i64, String)> = sqlx::query_as(
        "EXPLAIN QUERY PLAN SELECT COUNT(*) FROM sluice_ledger WHERE hold IN ('a', 'b')",
    )
    .fetch_all(&s.pool)
    .await
    .unwrap();
    assert!(
        plan.iter()
            .any(|(.., d)| d.contains("sluice_ledger_hold_set")),
        "{plan:?}"
    );
    // A batch item is still billed once: its second row is not written.
    let mut item = entry(1, Some(5));
    item.batch_item = Some("job-1/0".into());
    let mut again = entry(2, Some(5));
    again.batch_item = Some("job-1/0".into());
    s.append(&[item, again, entry(3, None), entry(4, None)])
        .await
        .unwrap();
    let (rows, items): (i64, i64) =
        sqlx::query_as("SELECT COUNT(*), COUNT(batch_item) FROM sluice_ledger")
            .fetch_one(&s.pool)
            .await
            .unwrap();
    assert_eq!((rows, items), (3, 1));
}
