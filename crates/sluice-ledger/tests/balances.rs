//! Tenants' credits and quotas in PostgreSQL (a fresh database per test on the server
//! `SLUICE_TEST_POSTGRES` names, which `scripts/test` starts): the book keeps what every
//! account book keeps (the one conformance suite), stays exact when two instances reserve at
//! once, and its balances are the ledger's truth: moved by the writer's rows (once), filled
//! from the rows of a ledger older than the balances.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sluice_economy::{AccountBook, Limits, Micros, Refusal};
use sluice_ledger::{Entry, PgStore, Store, Tokens};
use tokio::time::Instant;

const HOLD_TTL: Duration = Duration::from_secs(900);
/// The heartbeat of a cluster with the defaults (a probe each 500 ms, a beat each tenth).
const BEAT: Duration = Duration::from_secs(5);

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

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn row(i: u64, tenant: &str, cost: u64) -> Entry {
    Entry {
        request_id: format!("req-{i}").into(),
        at_ms: now_ms(),
        tenant: Some(tenant.into()),
        status: 200,
        tokens: Tokens {
            prompt: 100,
            completion: 10,
            ..Tokens::default()
        },
        cost_micros: Some(cost),
        total_ms: 100,
        attempts: 1,
        ..Entry::default()
    }
}

fn credits(n: u64) -> Limits {
    Limits {
        credits: Some(Micros(n)),
        ..Limits::default()
    }
}

async fn spent_is(book: &dyn AccountBook, tenant: &str, spent: u64) {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let b = book.balance(tenant).await;
        if b.as_ref().is_some_and(|b| b.spent == Micros(spent)) {
            return;
        }
        assert!(
            Instant::now() < until,
            "{tenant}: spend never became {spent}: {b:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn the_book_in_postgresql_conforms() {
    let store = PgStore::connect(&postgres_database().await).await.unwrap();
    let book = store.book(1.0, HOLD_TTL, BEAT);
    sluice_economy::conformance::run(&*book, "pg").await;
}

/// A hold whose instance never settles it is released unspent after its time, by the sweep
/// that runs at each beat (5 s).
#[tokio::test]
async fn the_books_unsettled_holds_in_postgresql_end_after_their_time() {
    use sluice_economy::conformance::{AtExpiry, an_unsettled_hold_ends_after_its_ttl};
    let store = PgStore::connect(&postgres_database().await).await.unwrap();
    let ttl = Duration::from_secs(1);
    let book = store.book(1.0, ttl, BEAT);
    an_unsettled_hold_ends_after_its_ttl(
        &*book,
        "pg",
        ttl,
        Duration::from_secs(7),
        AtExpiry::ReleasedUnspent,
    )
    .await;
}

/// An instance that dies holding part of a tenant's credits in PostgreSQL: another releases
/// its hold, unspent, once it has been silent for three beats, long before `hold_ttl`; the
/// live instance's own hold stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_instances_holds_are_released_once_it_is_silent_for_three_beats() {
    let url = postgres_database().await;
    let beat = Duration::from_millis(200);
    let a = PgStore::connect(&url)
        .await
        .unwrap()
        .book(1.0, HOLD_TTL, beat);
    let b = PgStore::connect(&url)
        .await
        .unwrap()
        .book(1.0, HOLD_TTL, beat);
    let t: Arc<str> = Arc::from("dying");
    for book in [&a, &b] {
        book.set_limits(&t, credits(1_000), Instant::now());
    }
    let theirs = a
        .reserve(&t, Instant::now(), SystemTime::now(), 10, Micros(800))
        .await;
    assert!(matches!(theirs, Ok(Some(_))), "{theirs:?}");
    let Ok(Some(mine)) = b
        .reserve(&t, Instant::now(), SystemTime::now(), 1, Micros(100))
        .await
    else {
        panic!("the live instance's call was refused");
    };
    // `a` dies with its call in flight: its book and its beats go, nothing settles its hold.
    drop(theirs);
    drop(a);
    let died = Instant::now();
    loop {
        let balance = b.balance(&t).await.unwrap();
        if balance.reserved == Micros(100) {
            break;
        }
        assert!(
            died.elapsed() < Duration::from_secs(10),
            "the dead instance's hold was never released: {balance:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = died.elapsed();
    eprintln!("a dead instance's hold released {took:?} after it died (beats of {beat:?})");
    assert!(
        took >= beat * 2,
        "released before its instance was silent for three beats: {took:?}"
    );
    spent_is(&*b, &t, 0).await;
    b.settle(mine, Instant::now(), SystemTime::now(), 1, Micros(60));
    spent_is(&*b, &t, 60).await;
    assert_eq!(b.balance(&t).await.unwrap().reserved, Micros::ZERO);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_reserving_at_once_never_exceed_the_credits() {
    let url = postgres_database().await;
    let a = PgStore::connect(&url)
        .await
        .unwrap()
        .book(1.0, HOLD_TTL, BEAT);
    let b = PgStore::connect(&url)
        .await
        .unwrap()
        .book(1.0, HOLD_TTL, BEAT);
    let tenant: Arc<str> = Arc::from("shared");
    for book in [&a, &b] {
        book.set_limits(&tenant, credits(2_000), Instant::now());
    }
    let calls = (0..40).map(|i| {
        let book = if i % 2 == 0 { a.clone() } else { b.clone() };
        let tenant = tenant.clone();
        async move {
            book.reserve(&tenant, Instant::now(), SystemTime::now(), 1, Micros(100))
                .await
        }
    });
    let got = futures::future::join_all(calls).await;
    let held = got.iter().filter(|r| matches!(r, Ok(Some(_)))).count();
    let refused = got
        .iter()
        .filter(|r| matches!(r, Err(Refusal::OutOfCredits { .. })))
        .count();
    assert_eq!(
        (held, refused),
        (20, 20),
        "40 calls of 100 against 2,000: {got:?}"
    );
}

#[tokio::test]
async fn the_writer_moves_balances_once_and_an_older_ledger_fills_them() {
    let url = postgres_database().await;
    let store = PgStore::connect(&url).await.unwrap();
    let book = store.book(1.0, HOLD_TTL, BEAT);
    book.set_limits("t", credits(10_000), Instant::now());
    let mut settled_here = row(3, "t", 400);
    settled_here.settled_in_ledger = true;
    store
        .append(&[row(1, "t", 100), row(2, "t", 200), settled_here])
        .await
        .unwrap();
    // The third row's spend was added by its settlement, not by the writer.
    spent_is(&*book, "t", 300).await;
    let b = book.balance("t").await.unwrap();
    assert_eq!(b.tokens_today, 220);
    assert_eq!(b.spent_this_month, Micros(300));
    let r = book
        .reserve(
            &Arc::from("t"),
            Instant::now(),
            SystemTime::now(),
            1,
            Micros(9_800),
        )
        .await;
    assert!(matches!(r, Err(Refusal::OutOfCredits { .. })), "{r:?}");

    // A ledger whose rows were written before balances were kept: they start at its totals.
    sqlx::query("DROP TABLE sluice_balances")
        .execute(&sqlx::PgPool::connect(&url).await.unwrap())
        .await
        .unwrap();
    let again = PgStore::connect(&url)
        .await
        .unwrap()
        .book(1.0, HOLD_TTL, BEAT);
    again.set_limits("t", credits(10_000), Instant::now());
    spent_is(&*again, "t", 700).await;
}
