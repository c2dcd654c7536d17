use std::time::Duration;

use tokio::time::Instant;

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn v(ok: bool) -> Verdict {
    Verdict { ok, took: ms(100) }
}

/// Spreads the window's calls so no streak of five failures opens it first.
fn policy() -> BreakerPolicy {
    BreakerPolicy {
        consecutive_failures: 0,
        ..BreakerPolicy::default()
    }
}

fn fail_n(b: &mut Breaker, t: Instant, n: u32) {
    for _ in 0..n {
        b.record(t, v(false));
    }
}

#[test]
fn it_opens_at_the_failure_rate_once_the_window_has_enough_calls() {
    let t = Instant::now();
    let mut b = Breaker::new(policy(), t);
    fail_n(&mut b, t, 19);
    assert_eq!(
        b.state(t),
        BreakerState::Closed,
        "19 calls are below min_calls"
    );
    b.record(t, v(false));
    assert!(matches!(b.state(t), BreakerState::Open { .. }));
    assert!(!b.would_allow(t + ms(14_999)));
    assert_eq!(b.reopens_at(t), Some(t + Duration::from_secs(15)));
}

#[test]
fn a_healthy_mix_stays_closed() {
    let t = Instant::now();
    let mut b = Breaker::new(policy(), t);
    for i in 0..1000 {
        b.record(t + ms(i * 10), v(i % 3 != 0));
    }
    assert_eq!(
        b.state(t + ms(10_000)),
        BreakerState::Closed,
        "33% failures is under 50%"
    );
}

#[test]
fn old_failures_leave_the_window() {
    let t = Instant::now();
    let mut b = Breaker::new(policy(), t);
    fail_n(&mut b, t, 15);
    let later = t + Duration::from_secs(31);
    for _ in 0..5 {
        b.record(later, v(false));
    }
    assert_eq!(
        b.state(later),
        BreakerState::Closed,
        "the 15 early failures aged out"
    );
}

#[test]
fn half_open_probes_once_per_interval_and_closes_after_enough_successes() {
    let t = Instant::now();
    let mut b = Breaker::new(policy(), t);
    fail_n(&mut b, t, 20);
    let t1 = t + Duration::from_secs(15);
    assert!(matches!(b.state(t1), BreakerState::HalfOpen { .. }));
    assert!(b.allow(t1), "first probe");
    assert!(!b.allow(t1 + ms(500)), "one probe a second");
    b.record(t1 + ms(600), v(true));
    assert!(b.allow(t1 + ms(1_000)));
    b.record(t1 + ms(1_100), v(true));
    assert!(b.allow(t1 + ms(2_000)));
    b.record(t1 + ms(2_100), v(true));
    assert_eq!(b.state(t1 + ms(2_100)), BreakerState::Closed);
    assert!(b.allow(t1 + ms(2_101)));
}

#[test]
fn a_failed_probe_reopens_for_twice_as_long() {
    let t = Instant::now();
    let mut b = Breaker::new(policy(), t);
    fail_n(&mut b, t, 20);
    let t1 = t + Duration::from_secs(15);
    assert!(b.allow(t1));
    b.record(t1, v(false));
    assert_eq!(b.reopens_at(t1), Some(t1 + Duration::from_secs(30)));
    let t2 = t1 + Duration::from_secs(30);
    assert!(b.allow(t2));
    b.record(t2, v(false));
    assert_eq!(b.reopens_at(t2), Some(t2 + Duration::from_secs(60)));
}

#[test]
fn openings_never_exceed_the_maximum() {
    let t = Instant::now();
    let mut b = Breaker::new(policy(), t);
    fail_n(&mut b, t, 20);
    let mut now = t;
    for _ in 0..20 {
        now = b.reopens_at(now).unwrap();
        b.allow(now);
        b.record(now, v(false));
    }
    assert_eq!(b.reopens_at(now), Some(now + Duration::from_secs(300)));
}

#[test]
fn a_streak_of_failures_opens_it_before_the_window_fills() {
    let t = Instant::now();
    let mut b = Breaker::new(BreakerPolicy::default(), t);
    fail_n(&mut b, t, 4);
    b.record(t, v(true));
    fail_n(&mut b, t, 4);
    assert_eq!(
        b.state(t),
        BreakerState::Closed,
        "a success broke the streak"
    );
    b.record(t, v(false));
    assert!(matches!(b.state(t), BreakerState::Open { .. }));
    let s = b.snapshot(t);
    assert_eq!((s.calls, s.failures, s.streak, s.opened), (10, 9, 5, 1));
}

#[test]
fn slow_calls_open_it_at_the_slow_call_rate() {
    let t = Instant::now();
    let p = BreakerPolicy {
        slow_call: Duration::from_secs(10),
        slow_call_rate: 0.8,
        ..BreakerPolicy::default()
    };
    let mut b = Breaker::new(p, t);
    let slow = Verdict {
        ok: true,
        took: Duration::from_secs(12),
    };
    for i in 0..19 {
        b.record(t, if i % 5 == 0 { v(true) } else { slow });
    }
    assert_eq!(
        b.state(t),
        BreakerState::Closed,
        "19 calls are below min_calls"
    );
    b.record(t, slow);
    assert_eq!(b.snapshot(t).slow, 16);
    assert!(
        matches!(b.state(t), BreakerState::Open { .. }),
        "16 of 20 slow"
    );
    // A slow probe counts as a failed one.
    let t1 = t + Duration::from_secs(15);
    assert!(b.allow(t1));
    b.record(t1, slow);
    assert!(matches!(b.state(t1), BreakerState::Open { .. }));
}

#[test]
fn closing_is_counted() {
    let t = Instant::now();
    let mut b = Breaker::new(policy(), t);
    fail_n(&mut b, t, 20);
    let mut now = t + Duration::from_secs(15);
    for _ in 0..3 {
        assert!(b.allow(now));
        b.record(now, v(true));
        now += Duration::from_secs(1);
    }
    let s = b.snapshot(now);
    assert_eq!(
        (s.state, s.opened, s.closed, s.calls),
        (BreakerState::Closed, 1, 1, 0)
    );
}
