use super::*;

#[test]
fn summaries_split_lanes_and_count_breaches() {
    let mut r = Recorder::new(Some(Duration::from_secs(10))).unwrap();
    for i in 1..=100u64 {
        r.record(
            "interactive",
            200,
            true,
            Some(Duration::from_millis(i * 10)),
            Duration::from_millis(i * 100),
        );
    }
    r.record("batch", 429, false, None, Duration::from_millis(5));
    r.record("batch", 200, true, None, Duration::from_secs(12));
    // Sent over 10 s, answered by 12 s: the rate is over the sending window.
    let s = r.summary(Duration::from_secs(12), Duration::from_secs(10));
    assert_eq!(s.all.count, 102);
    assert_eq!(s.all.ok, 101);
    assert_eq!(s.all.errors_by_status[&429], 1);
    assert_eq!(s.all.over_slo, 1);
    assert_eq!(s.lanes["interactive"].count, 100);
    assert_eq!(s.lanes["batch"].over_slo, 1);
    let p99 = s.lanes["interactive"].total.p99.as_millis();
    assert!((9_890..=9_910).contains(&p99), "{p99}");
    assert!((s.achieved_rate - 10.1).abs() < 1e-9, "101 gaps in 10 s");
    let t = table(&[("baseline", &s.all), ("other", &s.lanes["batch"])]);
    assert!(t.contains("over SLO"));
    assert!(t.lines().next().unwrap().contains("baseline"));
}

#[test]
fn merged_rounds_sum_to_one_run() {
    let mut whole = Recorder::new(None).unwrap();
    let mut merged = Recorder::new(None).unwrap();
    for round in 0..3u64 {
        let mut one = Recorder::new(None).unwrap();
        for i in 1..=50u64 {
            let total = Duration::from_millis(round * 1000 + i);
            for r in [&mut whole, &mut one] {
                r.record("a", 200, true, Some(total / 2), total);
            }
        }
        for r in [&mut whole, &mut one] {
            r.record("b", 503, false, None, Duration::from_millis(1));
        }
        merged.merge(&one);
    }
    let d = Duration::from_secs(1);
    assert_eq!(merged.summary(d, d), whole.summary(d, d));
    assert_eq!(merged.summary(d, d).lanes["a"].count, 150);
    assert_eq!(merged.summary(d, d).lanes["b"].errors_by_status[&503], 3);
}

#[test]
fn cache_hits_and_streams_cut_after_their_200_are_told_apart() {
    let mut r = Recorder::new(None).unwrap();
    let answer = |total_ms: u64, cache_hit: bool| Answered {
        status: 200,
        ok: true,
        ttfb: Some(Duration::from_millis(total_ms / 2)),
        total: Duration::from_millis(total_ms),
        cache_hit,
        stream_failure: None,
        upstream: None,
    };
    for _ in 0..90 {
        r.record_answer("a", &answer(1, true));
    }
    for _ in 0..10 {
        r.record_answer("a", &answer(800, false));
    }
    let cut = Answered {
        status: 200,
        ok: false,
        total: Duration::from_millis(2_000),
        stream_failure: Some("deadline_exceeded".into()),
        ..Answered::default()
    };
    r.record_answer("a", &cut);
    let s = r.summary(Duration::from_secs(1), Duration::from_secs(1));
    assert_eq!((s.all.ok, s.all.cache_hits), (100, 90));
    // What clients saw is mostly hits; the answers upstreams gave are 800 ms.
    assert!(s.all.total.p50 < Duration::from_millis(5));
    assert_eq!(s.all.uncached_total.count, 10);
    assert!(s.all.uncached_total.p50 >= Duration::from_millis(799));
    assert_eq!(s.all.stream_failures["deadline_exceeded"], 1);
    assert_eq!(s.all.errors_by_status[&200], 1);
    let t = table(&[("run", &s.all)]);
    assert!(t.contains("cache hits"), "{t}");
    assert!(t.contains("uncached P50"), "{t}");
}

#[test]
fn percentiles_of_nothing_are_a_dash() {
    let mut r = Recorder::new(None).unwrap();
    r.record("a", 401, false, None, Duration::from_millis(1));
    let s = r.summary(Duration::from_secs(1), Duration::ZERO);
    let t = table(&[("run", &s.all)]);
    let p50 = t.lines().find(|l| l.starts_with("total P50")).unwrap();
    assert!(p50.trim_end().ends_with('-'), "{t}");
    assert!(
        !t.contains("cache hits"),
        "no row for what did not happen: {t}"
    );
}
