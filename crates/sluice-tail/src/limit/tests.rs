use std::time::Duration;

use tokio::time::Instant;

use super::*;

fn ok(rtt_ms: u64, inflight: usize) -> Sample {
    Sample {
        rtt: Duration::from_millis(rtt_ms),
        inflight,
        dropped: false,
        class: 0,
    }
}

fn drop_(inflight: usize) -> Sample {
    Sample {
        rtt: Duration::from_millis(100),
        inflight,
        dropped: true,
        class: 0,
    }
}

#[test]
fn aimd_grows_by_one_when_used_and_backs_off_on_drops() {
    let now = Instant::now();
    let mut a = Aimd::new(20, 1, 200);
    assert_eq!(a.update(now, ok(100, 10)), 21, "half used: grow");
    assert_eq!(a.update(now, ok(100, 5)), 21, "barely used: hold");
    assert_eq!(a.update(now, drop_(21)), 18, "floor(21 * 0.9)");
    for _ in 0..100 {
        a.update(now, drop_(1));
    }
    assert_eq!(a.limit(), 1, "never below the minimum");
    for _ in 0..1000 {
        let l = a.limit();
        a.update(now, ok(100, l));
    }
    assert_eq!(a.limit(), 200, "never above the maximum");
}

#[test]
fn aimd_finds_the_capacity_of_an_upstream_that_drops_beyond_it() {
    // An upstream that refuses whatever exceeds 37 concurrent requests.
    let now = Instant::now();
    let mut a = Aimd::new(5, 1, 500);
    let mut limits = Vec::new();
    for _ in 0..2000 {
        let inflight = a.limit();
        let sample = if inflight > 37 {
            drop_(inflight)
        } else {
            ok(500, inflight)
        };
        limits.push(a.update(now, sample));
    }
    let tail = &limits[1000..];
    let (lo, hi) = (*tail.iter().min().unwrap(), *tail.iter().max().unwrap());
    assert!(
        lo >= 33 && hi <= 38,
        "oscillates just under the capacity: {lo}..{hi}"
    );
}

#[test]
fn gradient2_grows_while_latency_holds_and_shrinks_when_it_climbs() {
    let now = Instant::now();
    let mut g = Gradient2::new(20, 1, 200);
    for _ in 0..200 {
        let l = g.limit();
        g.update(now, ok(500, l));
    }
    let grown = g.limit();
    assert!(grown > 40, "steady latency lets it grow: {grown}");
    for _ in 0..30 {
        let l = g.limit();
        g.update(now, ok(2_000, l));
    }
    assert!(
        g.limit() < grown / 2,
        "4x latency cuts it: {} from {grown}",
        g.limit()
    );
    let before = g.limit();
    g.update(now, drop_(before));
    assert_eq!(g.limit(), ((before as f64) * 0.9).floor().max(1.0) as usize);
}

#[test]
fn vegas_holds_its_queue_between_alpha_and_beta() {
    let now = Instant::now();
    let mut v = Vegas::new(10, 1000, 3);
    // An upstream whose latency is 100 ms plus 10 ms per request beyond 50 in flight.
    for _ in 0..5_000 {
        let l = v.limit();
        let extra = l.saturating_sub(50) as u64 * 10;
        v.update(now, ok(100 + extra, l));
    }
    let l = v.limit();
    assert!((50..=70).contains(&l), "settles near the knee: {l}");
}

#[test]
fn vegas_is_deterministic_for_a_seed() {
    let now = Instant::now();
    let run = |seed| {
        let mut v = Vegas::new(10, 1000, seed);
        (0..3_000u64)
            .map(|i| v.update(now, ok(100 + (i % 7) * 20, v.limit())))
            .collect::<Vec<_>>()
    };
    assert_eq!(run(1), run(1));
}

#[test]
fn windowed_updates_once_per_window_with_the_average() {
    let start = Instant::now();
    let mut w = Windowed::new(Aimd::new(20, 1, 200));
    for i in 0..9 {
        w.update(start + Duration::from_millis(i * 200), ok(100, 20));
    }
    assert_eq!(w.limit(), 20, "nine samples are not enough");
    w.update(start + Duration::from_millis(1_800), ok(100, 20));
    assert_eq!(w.limit(), 21, "one update per full window");
    w.update(start + Duration::from_millis(1_900), drop_(20));
    assert_eq!(w.limit(), 21, "the drop waits for its window");
}

#[test]
fn specs_build_their_algorithms() {
    let now = Instant::now();
    for spec in [
        LimitSpec::Fixed(8),
        LimitSpec::Aimd {
            initial: 8,
            min: 1,
            max: 64,
        },
        LimitSpec::Gradient2 {
            initial: 8,
            min: 1,
            max: 64,
        },
        LimitSpec::Vegas {
            initial: 8,
            max: 64,
        },
    ] {
        let mut a = spec.build(1);
        assert_eq!(a.limit(), 8, "{spec:?}");
        a.update(now, ok(100, 8));
    }
}
