use std::time::Duration;

use tokio::time::Instant;

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn fail_n(b: &mut Breaker, t: Instant, n: u32) {
    for _ in 0..n {
        b.record(t, false);
    }
}

#[tokio::test(start_paused = true)]
async fn it_opens_at_the_failure_rate_once_the_window_has_enough_calls() {
    let t = Instant::now();
    let mut b = Breaker::new(BreakerPolicy::default(), t);
    fail_n(&mut b, t, 19);
    assert_eq!(
        b.state(t),
        BreakerState::Closed,
        "19 calls are below min_calls"
    );
    b.record(t, false);
    assert!(matches!(b.state(t), BreakerState::Open { .. }));
    assert!(!b.would_allow(t + ms(14_999)));
    assert_eq!(b.reopens_at(t), Some(t + Duration::from_secs(15)));
}

#[tokio::test(start_paused = true)]
async fn a_healthy_mix_stays_closed() {
    let t = Instant::now();
    let mut b = Breaker::new(BreakerPolicy::default(), t);
    for i in 0..1000 {
        b.record(t + ms(i * 10), i % 3 != 0);
    }
    assert_eq!(
        b.state(t + ms(10_000)),
        BreakerState::Closed,
        "33% failures is under 50%"
    );
}

#[tokio::test(start_paused = true)]
async fn old_failures_leave_the_window() {
    let t = Instant::now();
    let mut b = Breaker::new(BreakerPolicy::default(), t);
    fail_n(&mut b, t, 15);
    let later = t + Duration::from_secs(31);
    for _ in 0..5 {
        b.record(later, false);
    }
    assert_eq!(
        b.state(later),
        BreakerState::Closed,
        "the 15 early failures aged out"
    );
}

#[tokio::test(start_paused = true)]
async fn half_open_probes_once_per_interval_and_closes_after_enough_successes() {
    let t = Instant::now();
    let mut b = Breaker::new(BreakerPolicy::default(), t);
    fail_n(&mut b, t, 20);
    let t1 = t + Duration::from_secs(15);
    assert!(matches!(b.state(t1), BreakerState::HalfOpen { .. }));
    assert!(b.allow(t1), "first probe");
    assert!(!b.allow(t1 + ms(500)), "one probe a second");
    b.record(t1 + ms(600), true);
    assert!(b.allow(t1 + ms(1_000)));
    b.record(t1 + ms(1_100), true);
    assert!(b.allow(t1 + ms(2_000)));
    b.record(t1 + ms(2_100), true);
    assert_eq!(b.state(t1 + ms(2_100)), BreakerState::Closed);
    assert!(b.allow(t1 + ms(2_101)));
}

#[tokio::test(start_paused = true)]
async fn a_failed_probe_reopens_for_twice_as_long() {
    let t = Instant::now();
    let mut b = Breaker::new(BreakerPolicy::default(), t);
    fail_n(&mut b, t, 20);
    let t1 = t + Duration::from_secs(15);
    assert!(b.allow(t1));
    b.record(t1, false);
    assert_eq!(b.reopens_at(t1), Some(t1 + Duration::from_secs(30)));
    let t2 = t1 + Duration::from_secs(30);
    assert!(b.allow(t2));
    b.record(t2, false);
    assert_eq!(b.reopens_at(t2), Some(t2 + Duration::from_secs(60)));
}

#[tokio::test(start_paused = true)]
async fn openings_never_exceed_the_maximum() {
    let t = Instant::now();
    let mut b = Breaker::new(BreakerPolicy::default(), t);
    fail_n(&mut b, t, 20);
    let mut now = t;
    for _ in 0..20 {
        now = b.reopens_at(now).unwrap();
        b.allow(now);
        b.record(now, false);
    }
    assert_eq!(b.reopens_at(now), Some(now + Duration::from_secs(300)));
}
