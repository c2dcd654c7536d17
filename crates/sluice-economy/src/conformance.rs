//! The behaviour every [`AccountBook`] keeps, whatever holds the accounts: one suite, run
//! against the in-process book here, against the Redis book in `sluice-cluster`'s tests and
//! the PostgreSQL book in `sluice-ledger`'s (with the `conformance` feature); books whose
//! holds outlive their process also run [`an_unsettled_hold_ends_after_its_ttl`].
//! Each check uses tenants of its own under `tag`, so one store can serve several runs.
//! Settling and restoring may land in the background (a shared store writes after the call):
//! the checks wait for their effect, up to [`LANDS_WITHIN`].

// Test support: a check that fails panics, as a test's assertion does.
#![allow(clippy::panic, clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::accounts::{Limits, Refusal};
use crate::book::AccountBook;
use crate::money::Micros;

/// How long a settlement or a restore may take to be seen.
pub const LANDS_WITHIN: Duration = Duration::from_secs(5);

/// Runs every check on `book`.
pub async fn run(book: &dyn AccountBook, tag: &str) {
    a_tenant_without_limits_is_not_held(book, tag).await;
    credits_count_holds_and_settle_at_what_was_used(book, tag).await;
    concurrent_reservations_never_exceed_the_credits(book, tag).await;
    a_request_quota_refuses_past_its_limit(book, tag).await;
    a_daily_token_quota_counts_settled_tokens(book, tag).await;
    restored_spend_counts_against_the_credits(book, tag).await;
    every_tenant_with_limits_is_listed(book, tag).await;
}

/// What a book does with a hold whose time ran out unsettled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtExpiry {
    /// Charged at its worst case: what may have been spent is never given back (Redis's last
    /// resort, where no ledger's rows settle a dead instance's holds first).
    ChargedInFull,
    /// Released unspent (the ledger's own book, whose late settlements still add the spend).
    ReleasedUnspent,
}

/// For a book whose holds outlive the process that made them (a shared store, where an
/// instance can die holding): a hold never settled still counts until `ttl` has passed,
/// then ends (within `ends_within` more) as the book's policy says. The in-process book has
/// no such holds: its holds end with the process that settles them.
pub async fn an_unsettled_hold_ends_after_its_ttl(
    book: &dyn AccountBook,
    tag: &str,
    ttl: Duration,
    ends_within: Duration,
    at_expiry: AtExpiry,
) {
    let t = tenant(tag, "expiry");
    book.set_limits(&t, credits(1_000), Instant::now());
    let started = Instant::now();
    let held = reserve(book, &t, 10, 800).await;
    let Ok(Some(held)) = held else {
        panic!("a call within the credits was refused: {held:?}");
    };
    // Its holder is gone: nothing will settle it.
    drop(held);
    let second = reserve(book, &t, 10, 800).await;
    assert!(
        matches!(&second, Err(Refusal::OutOfCredits { .. })),
        "a hold counts until its time is out: {second:?}"
    );
    let until = started + ttl + ends_within;
    loop {
        // A small call now and then, settled at nothing: a book may end expired holds as
        // it reserves.
        if let Ok(Some(probe)) = reserve(book, &t, 1, 1).await {
            book.settle(probe, Instant::now(), SystemTime::now(), 0, Micros::ZERO);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let b = book.balance(&t).await;
        if b.as_ref().is_some_and(|b| b.reserved == Micros::ZERO) {
            break;
        }
        assert!(Instant::now() < until, "the hold never ended: {b:?}");
    }
    assert!(
        started.elapsed() >= ttl,
        "ended after {:?}, before its time of {ttl:?}",
        started.elapsed()
    );
    let spent = match at_expiry {
        AtExpiry::ChargedInFull => 800,
        AtExpiry::ReleasedUnspent => 0,
    };
    spent_is(book, &t, spent).await;
}

fn tenant(tag: &str, name: &str) -> Arc<str> {
    Arc::from(format!("{tag}-{name}").as_str())
}

fn credits(n: u64) -> Limits {
    Limits {
        credits: Some(Micros(n)),
        ..Limits::default()
    }
}

async fn reserve(
    book: &dyn AccountBook,
    t: &Arc<str>,
    tokens: u64,
    cost: u64,
) -> Result<Option<crate::Reservation>, Refusal> {
    book.reserve(t, Instant::now(), SystemTime::now(), tokens, Micros(cost))
        .await
}

/// Waits until `t`'s settled spend is `spent`.
async fn spent_is(book: &dyn AccountBook, t: &str, spent: u64) {
    let until = tokio::time::Instant::now() + LANDS_WITHIN;
    loop {
        let b = book.balance(t).await;
        if b.as_ref().is_some_and(|b| b.spent == Micros(spent)) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "{t}: spend never became {spent}: {b:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn a_tenant_without_limits_is_not_held(book: &dyn AccountBook, tag: &str) {
    let t = tenant(tag, "free");
    assert_eq!(book.limits(&t), None);
    assert!(matches!(reserve(book, &t, 10, 10).await, Ok(None)));
}

async fn credits_count_holds_and_settle_at_what_was_used(book: &dyn AccountBook, tag: &str) {
    let t = tenant(tag, "credits");
    book.set_limits(&t, credits(1_000), Instant::now());
    assert_eq!(book.limits(&t), Some(credits(1_000)));
    let first = reserve(book, &t, 10, 600).await;
    let Ok(Some(first)) = first else {
        panic!("a call within the credits was refused: {first:?}");
    };
    let second = reserve(book, &t, 10, 600).await;
    assert!(
        matches!(&second, Err(Refusal::OutOfCredits { reserved, .. }) if *reserved == Micros(600)),
        "a hold counts against the credits: {second:?}"
    );
    book.settle(first, Instant::now(), SystemTime::now(), 10, Micros(250));
    spent_is(book, &t, 250).await;
    let b = book
        .balance(&t)
        .await
        .expect("a tenant with limits has a balance");
    assert_eq!(b.reserved, Micros::ZERO, "a settled hold is released");
    let third = reserve(book, &t, 10, 700).await;
    assert!(
        matches!(third, Ok(Some(_))),
        "what was not used is free again: {third:?}"
    );
    let fourth = reserve(book, &t, 10, 100).await;
    assert!(
        matches!(fourth, Err(Refusal::OutOfCredits { .. })),
        "{fourth:?}"
    );
}

async fn concurrent_reservations_never_exceed_the_credits(book: &dyn AccountBook, tag: &str) {
    let t = tenant(tag, "concurrent");
    book.set_limits(&t, credits(2_000), Instant::now());
    let calls = (0..40).map(|_| reserve(book, &t, 1, 100));
    let got = futures::future::join_all(calls).await;
    let held = got.iter().filter(|r| matches!(r, Ok(Some(_)))).count();
    let refused = got
        .iter()
        .filter(|r| matches!(r, Err(Refusal::OutOfCredits { .. })))
        .count();
    assert_eq!((held, refused), (20, 20), "40 calls of 100 against 2,000");
}

async fn a_request_quota_refuses_past_its_limit(book: &dyn AccountBook, tag: &str) {
    let t = tenant(tag, "rpm");
    let limits = Limits {
        rpm: Some(3),
        ..Limits::default()
    };
    book.set_limits(&t, limits, Instant::now());
    for _ in 0..3 {
        let r = reserve(book, &t, 1, 1).await;
        let Ok(Some(r)) = r else {
            panic!("a request within the quota was refused: {r:?}");
        };
        book.settle(r, Instant::now(), SystemTime::now(), 1, Micros(1));
    }
    let fourth = reserve(book, &t, 1, 1).await;
    assert!(
        matches!(
            &fourth,
            Err(Refusal::OverQuota {
                policy: "rpm",
                limit: 3,
                ..
            })
        ),
        "{fourth:?}"
    );
}

async fn a_daily_token_quota_counts_settled_tokens(book: &dyn AccountBook, tag: &str) {
    let t = tenant(tag, "daily");
    let limits = Limits {
        tokens_per_day: Some(1_000),
        ..Limits::default()
    };
    book.set_limits(&t, limits, Instant::now());
    let r = reserve(book, &t, 900, 1).await;
    let Ok(Some(r)) = r else {
        panic!("a call within the day's tokens was refused: {r:?}");
    };
    book.settle(r, Instant::now(), SystemTime::now(), 600, Micros(1));
    spent_is(book, &t, 1).await;
    let b = book.balance(&t).await.expect("a balance");
    assert_eq!(
        b.tokens_today, 600,
        "settled at the tokens used, not the estimate"
    );
    let over = reserve(book, &t, 500, 1).await;
    assert!(
        matches!(
            &over,
            Err(Refusal::OverQuota {
                policy: "tokens_per_day",
                ..
            })
        ),
        "{over:?}"
    );
    let within = reserve(book, &t, 300, 1).await;
    assert!(matches!(within, Ok(Some(_))), "{within:?}");
}

async fn restored_spend_counts_against_the_credits(book: &dyn AccountBook, tag: &str) {
    let t = tenant(tag, "restored");
    book.set_limits(&t, credits(1_000), Instant::now());
    book.restore(&t, SystemTime::now(), Micros(900), Micros(900), 0);
    spent_is(book, &t, 900).await;
    let over = reserve(book, &t, 1, 200).await;
    assert!(
        matches!(over, Err(Refusal::OutOfCredits { .. })),
        "{over:?}"
    );
    let within = reserve(book, &t, 1, 100).await;
    assert!(matches!(within, Ok(Some(_))), "{within:?}");
}

async fn every_tenant_with_limits_is_listed(book: &dyn AccountBook, tag: &str) {
    let listed = book.tenants();
    for name in ["credits", "concurrent", "rpm", "daily", "restored"] {
        let t = tenant(tag, name);
        assert!(listed.contains(&t), "{t} is not listed in {listed:?}");
    }
    assert!(!listed.contains(&tenant(tag, "free")));
}

#[cfg(test)]
mod tests {
    /// The in-process book keeps the behaviour every book keeps.
    #[tokio::test]
    async fn the_local_book_conforms() {
        super::run(&crate::Accounts::default(), "local").await;
    }
}
