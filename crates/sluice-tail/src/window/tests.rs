use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn window() -> (LatencyWindow, Instant) {
    let now = Instant::now();
    let w = LatencyWindow::new(WindowConfig::default(), now).unwrap();
    (w, now)
}

#[test]
fn percentiles_of_a_known_distribution() {
    let (mut w, now) = window();
    for i in 1..=1000 {
        w.record(now, ms(i));
    }
    let p = w.percentiles(now);
    assert_eq!(p.count, 1000);
    let close = |d: Duration, want: u64| {
        let got = d.as_secs_f64() * 1000.0;
        (got - want as f64).abs() <= want as f64 * 0.01
    };
    assert!(close(p.p50, 500), "{p:?}");
    assert!(close(p.p99, 990), "{p:?}");
    assert!(close(p.p999, 999), "{p:?}");
    assert!(close(p.max, 1000), "{p:?}");
}

#[test]
fn old_samples_leave_the_window() {
    let (mut w, now) = window();
    w.record(now, ms(5_000));
    assert_eq!(w.percentiles(now + Duration::from_secs(59)).count, 1);
    // One full window later the slice holding the sample has been reused.
    assert_eq!(w.percentiles(now + Duration::from_secs(60)).count, 0);
}

#[test]
fn a_long_idle_gap_clears_everything() {
    let (mut w, now) = window();
    for _ in 0..10 {
        w.record(now, ms(100));
    }
    let later = now + Duration::from_secs(3600);
    assert_eq!(w.percentiles(later).count, 0);
    w.record(later, ms(7));
    let p = w.percentiles(later);
    assert_eq!(p.count, 1);
    assert_eq!(p.max, Duration::from_micros(7_000).max(p.max));
}

#[test]
fn quantile_needs_enough_samples() {
    let (mut w, now) = window();
    for _ in 0..9 {
        w.record(now, ms(10));
    }
    assert_eq!(w.quantile(now, 0.95, 10), None);
    w.record(now, ms(10));
    let q = w.quantile(now, 0.95, 10).unwrap();
    assert!(q >= ms(10) && q <= ms(11));
}

#[test]
fn extreme_values_are_clamped_not_lost() {
    let (mut w, now) = window();
    w.record(now, Duration::ZERO);
    w.record(now, Duration::from_secs(10 * 3600));
    let p = w.percentiles(now);
    assert_eq!(p.count, 2);
    assert!(p.max >= Duration::from_secs(3599));
}

#[test]
fn the_running_total_equals_the_merge_of_the_slices() {
    let (mut w, now) = window();
    for s in 0..200u64 {
        let t = now + Duration::from_millis(s * 700);
        w.record(t, ms(10 + s * 37 % 900));
        let mut merged = new_histogram().unwrap();
        for slice in &w.slices {
            merged.add(slice).unwrap();
        }
        assert_eq!(
            Percentiles::of(&merged),
            w.percentiles(t),
            "after {s} samples"
        );
    }
}

#[test]
fn rejects_degenerate_shapes() {
    let now = Instant::now();
    let zero = WindowConfig {
        length: Duration::from_secs(60),
        slices: 0,
    };
    assert!(LatencyWindow::new(zero, now).is_err());
    let tiny = WindowConfig {
        length: Duration::from_micros(10),
        slices: 6,
    };
    assert!(LatencyWindow::new(tiny, now).is_err());
}

#[test]
fn percentiles_serialise_as_milliseconds_rounded_to_the_microsecond() {
    let p = Percentiles {
        count: 1,
        p50: Duration::from_micros(6_455_295),
        p90: Duration::from_nanos(1_234_567),
        p95: Duration::from_micros(1),
        p99: Duration::ZERO,
        p999: Duration::from_secs(38),
        max: Duration::from_millis(38_700),
    };
    let text = serde_json::to_string(&p).unwrap();
    assert!(text.contains("\"p50\":6455.295"), "{text}");
    assert!(text.contains("\"p90\":1.234,"), "{text}");
    assert!(text.contains("\"p95\":0.001,"), "{text}");
    assert!(text.contains("\"max\":38700.0"), "{text}");
}

#[test]
fn a_window_with_a_cluster_of_stalls_gives_the_quantile_of_its_body() {
    let (mut w, now) = window();
    for i in 0..180u64 {
        w.record(now, ms(400 + i * 10));
    }
    for _ in 0..20 {
        w.record(now, ms(8_500));
    }
    // The whole window's P95 is a stall; its body's is not.
    assert!(w.quantile(now, 0.95, 20).unwrap() >= ms(8_000));
    let body = w.body_quantile(now, 0.95, 20).unwrap();
    assert_eq!(body.stalls, 20);
    assert!(
        body.value < ms(2_200) && body.value > ms(2_000),
        "{:?}",
        body.value
    );
    assert_eq!(w.body_quantile(now, 0.95, 1_000), None, "too few samples");
}

#[test]
fn a_body_quantile_is_read_again_once_the_count_moves_by_a_64th_or_a_slice_rotates() {
    let near = |d: Duration, to: Duration| d.abs_diff(to) * 100 <= to;
    let (mut w, now) = window();
    for _ in 0..640 {
        w.record(now, ms(100));
    }
    let first = w.body_quantile(now, 0.5, 20).unwrap();
    assert!(near(first.value, ms(100)), "{first:?}");
    // Ten more samples (a 64th of 640) at 5 s: what was read is kept.
    for _ in 0..10 {
        w.record(now, ms(5_000));
    }
    assert_eq!(w.body_quantile(now, 0.5, 20), Some(first));
    // Another `q` is read on its own, and sees the ten.
    let p99 = w.body_quantile(now, 0.99, 20).unwrap();
    assert_eq!(p99.stalls, 10);
    // Past a 64th the histogram is read again: the slow samples are now the majority.
    for _ in 0..700 {
        w.record(now, ms(5_000));
    }
    let median = w.body_quantile(now, 0.5, 20).unwrap();
    assert!(near(median.value, ms(5_000)), "{median:?}");
    // A rotation drops what was read: a whole window later only the new sample is left.
    let later = now + Duration::from_secs(61);
    w.record(later, ms(7));
    let fresh = w.body_quantile(later, 0.5, 1).unwrap();
    assert!(near(fresh.value, ms(7)), "{fresh:?}");
}
