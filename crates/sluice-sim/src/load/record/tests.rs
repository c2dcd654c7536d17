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
    let s = r.summary(Duration::from_secs(10));
    assert_eq!(s.all.count, 102);
    assert_eq!(s.all.ok, 101);
    assert_eq!(s.all.errors_by_status[&429], 1);
    assert_eq!(s.all.over_slo, 1);
    assert_eq!(s.lanes["interactive"].count, 100);
    assert_eq!(s.lanes["batch"].over_slo, 1);
    let p99 = s.lanes["interactive"].total.p99.as_millis();
    assert!((9_890..=9_910).contains(&p99), "{p99}");
    assert!((s.achieved_rate - 10.2).abs() < 1e-9);
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
    assert_eq!(merged.summary(d), whole.summary(d));
    assert_eq!(merged.summary(d).lanes["a"].count, 150);
    assert_eq!(merged.summary(d).lanes["b"].errors_by_status[&503], 3);
}
