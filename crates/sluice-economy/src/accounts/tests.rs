//! Tests of `accounts`.

use super::*;

/// 2026-11-30T12:00:00Z.
fn wall() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(20_787 * 86_400 + 43_200)
}

fn tenant(name: &str) -> Arc<str> {
    Arc::from(name)
}

#[test]
fn a_call_that_cannot_fit_in_the_credits_is_refused_and_refunds_come_back() {
    let now = Instant::now();
    let acc = Accounts::default();
    let t = tenant("acme");
    acc.set_limits(
        &t,
        Limits {
            credits: Some(Micros(1_000)),
            ..Limits::default()
        },
        now,
    );
    let r1 = acc
        .reserve(&t, now, wall(), 100, Micros(600))
        .unwrap()
        .unwrap();
    let refused = acc.reserve(&t, now, wall(), 100, Micros(600)).unwrap_err();
    assert_eq!(
        refused,
        Refusal::OutOfCredits {
            tenant: t.clone(),
            credits: Micros(1_000),
            spent: Micros::ZERO,
            reserved: Micros(600),
            left: Micros(400),
            needed: Micros(600)
        }
    );
    assert_eq!(
        refused.to_string(),
        "tenant `acme` has spent 0.000000 of its 0.001000 credits (0.000600 more held by \
         calls in flight): 0.000400 left, and this request may cost up to 0.000600"
    );
    // The first used a third of what it reserved: the rest comes back.
    acc.settle(r1, now, wall(), 40, Micros(200));
    let r2 = acc
        .reserve(&t, now, wall(), 100, Micros(600))
        .unwrap()
        .unwrap();
    acc.settle(r2, now, wall(), 100, Micros(600));
    let b = acc.balance(&t).unwrap();
    assert_eq!((b.spent, b.reserved), (Micros(800), Micros::ZERO));
    // A tenant without limits holds nothing.
    assert_eq!(
        acc.reserve(&tenant("free"), now, wall(), 100, Micros(5)),
        Ok(None)
    );
}

#[test]
fn per_minute_quotas_refuse_with_the_time_until_enough_refills() {
    let now = Instant::now();
    let acc = Accounts::default();
    let t = tenant("acme");
    acc.set_limits(
        &t,
        Limits {
            rpm: Some(2),
            tpm: Some(6_000),
            ..Limits::default()
        },
        now,
    );
    acc.reserve(&t, now, wall(), 1_000, Micros::ZERO).unwrap();
    acc.reserve(&t, now, wall(), 1_000, Micros::ZERO).unwrap();
    match acc.reserve(&t, now, wall(), 1_000, Micros::ZERO) {
        Err(Refusal::OverQuota {
            policy: "rpm",
            limit: 2,
            retry_after,
            ..
        }) => assert_eq!(retry_after, Duration::from_secs(30)),
        other => panic!("{other:?}"),
    }
    // Tokens: 4,000 left of 6,000; a 5,000-token call waits 10 s for 1,000 more, and the
    // request unit it took is given back.
    let later = now + Duration::from_secs(60);
    let r = acc.reserve(&t, later, wall(), 5_000, Micros::ZERO);
    assert!(r.is_ok(), "a minute later both quotas have refilled: {r:?}");
    let r = acc.reserve(&t, later, wall(), 5_000, Micros::ZERO);
    match r {
        Err(Refusal::OverQuota {
            policy: "tpm",
            retry_after,
            ..
        }) => assert_eq!(retry_after, Duration::from_secs(40)),
        other => panic!("{other:?}"),
    }
    assert!(
        acc.reserve(&t, later, wall(), 0, Micros::ZERO).is_ok(),
        "rpm was refunded"
    );
}

#[test]
fn a_thousand_concurrent_calls_never_overspend_a_tight_budget() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let now = rt.block_on(async { Instant::now() });
    let acc = Arc::new(Accounts::default());
    let t = tenant("acme");
    // Room for 100 calls at their worst case of 1,000; each really costs 500 to 1,500.
    acc.set_limits(
        &t,
        Limits {
            credits: Some(Micros(100_000)),
            ..Limits::default()
        },
        now,
    );
    let admitted = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let threads: Vec<_> = (0..8)
        .map(|k| {
            let (acc, t, admitted) = (acc.clone(), t.clone(), admitted.clone());
            std::thread::spawn(move || {
                for i in 0..125u64 {
                    if let Ok(Some(r)) = acc.reserve(&t, now, wall(), 10, Micros(1_000)) {
                        admitted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let used = 500 + (k * 125 + i) * 7919 % 1_001;
                        acc.settle(r, now, wall(), 10, Micros(used));
                    }
                }
            })
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
    let b = acc.balance(&t).unwrap();
    assert_eq!(b.reserved, Micros::ZERO);
    // Overspend is bounded by one call's excess over its reservation (500).
    assert!(b.spent.0 <= 100_000 + 500, "spent {}", b.spent);
    assert!(admitted.load(std::sync::atomic::Ordering::Relaxed) >= 90);
}

fn at(day: i64, secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(day as u64 * 86_400 + secs)
}

#[test]
fn tokens_per_day_and_spend_per_month_reset_with_the_utc_calendar() {
    let now = Instant::now();
    let acc = Accounts::default();
    let t: Arc<str> = Arc::from("acme");
    acc.set_limits(
        &t,
        Limits {
            tokens_per_day: Some(10_000),
            spend_per_month: Some(Micros(5_000)),
            ..Limits::default()
        },
        now,
    );
    // 2026-11-30, 23:00 UTC: 6,000 tokens used; the next 6,000 would pass the day's quota.
    let late = at(20_787, 23 * 3_600);
    let r = acc
        .reserve(&t, now, late, 6_000, Micros(1_000))
        .unwrap()
        .unwrap();
    acc.settle(r, now, late, 6_000, Micros(1_000));
    match acc.reserve(&t, now, late, 6_000, Micros(1_000)) {
        Err(Refusal::OverQuota {
            policy: "tokens_per_day",
            retry_after,
            window_secs: 86_400,
            ..
        }) => assert_eq!(retry_after, Duration::from_secs(3_600)),
        other => panic!("{other:?}"),
    }
    // An hour later it is December: a new day and a new month.
    let next = at(20_788, 0);
    let r = acc
        .reserve(&t, now, next, 6_000, Micros(4_000))
        .unwrap()
        .unwrap();
    acc.settle(r, now, next, 6_000, Micros(4_000));
    match acc.reserve(&t, now, next, 10, Micros(2_000)) {
        Err(Refusal::OverQuota {
            policy: "spend_per_month",
            limit: 5_000,
            window_secs,
            retry_after,
            ..
        }) => {
            assert_eq!(window_secs, 31 * 86_400);
            assert_eq!(retry_after, Duration::from_secs(31 * 86_400));
        }
        other => panic!("{other:?}"),
    }
    assert!(acc.reserve(&t, now, next, 10, Micros(900)).is_ok());
}
