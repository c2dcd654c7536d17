//! Tests of `verified`.

use super::*;

#[test]
fn an_entry_verifies_everything_until_it_has_a_fit() {
    let mut t = Threshold::default();
    assert_eq!(t.decide(0.99, 0.02), Decision::Verify);
    for s in [0.9, 0.92, 0.95] {
        t.observe(s, true);
    }
    assert_eq!(t.observations(), 5);
    assert_eq!(t.decide(0.99, 0.02), Decision::Verify);
    t.observe(0.7, false);
    assert!(t.fit().is_some());
}

#[test]
fn separable_labels_put_the_threshold_between_them_and_a_few_never_serve() {
    let mut t = Threshold::default();
    for (s, r) in [(0.95, true), (0.93, true), (0.8, false), (0.75, false)] {
        t.observe(s, r);
    }
    let f = t.fit().unwrap_or_else(|| panic!("a fit"));
    assert!((f.t - 0.865).abs() < 1e-9, "{f:?}");
    assert!((f.var_t - 0.035_445).abs() < 1e-9);
    // Four observations cannot show that an answer is right 95% of the time.
    assert_eq!(t.decide(0.99, 0.05), Decision::Verify);
    assert_eq!(t.decide(0.7, 0.05), Decision::Verify, "too few to give up");
}

/// A curve taught `n` rounds of questions whose answer is right with probability
/// `sigmoid(40 (s - 0.85))`, spread over [0.6, 1).
fn taught(n: usize, seed: u64) -> Threshold {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut t = Threshold::pooled();
    for _ in 0..n {
        let s: f64 = 0.6 + 0.4 * rng.random::<f64>();
        t.observe(s, rng.random::<f64>() < sigmoid(40.0 * (s - 0.85)));
    }
    t
}

#[test]
fn with_evidence_it_serves_high_gives_up_low_and_verifies_between() {
    let t = taught(2000, 5);
    // Right 98% of the time from about s = 0.95: served above, with a margin.
    assert_eq!(t.decide(0.999, 0.02), Decision::Serve, "{:?}", t.fit());
    assert_eq!(t.decide(0.65, 0.02), Decision::Hopeless);
    assert_eq!(
        t.decide(0.88, 0.02),
        Decision::Hopeless,
        "right 77% of the time there, 95% on average above: the curve and the region know it"
    );
    let unsure = taught(60, 5);
    assert!(
        (900..1000).any(|k| unsure.decide(f64::from(k) / 1000.0, 0.02) == Decision::Verify),
        "with less evidence, a band it must still verify: {:?}",
        unsure.fit()
    );
    // A looser bound serves lower.
    let lowest = |delta: f64| {
        (600..1000)
            .map(|k| f64::from(k) / 1000.0)
            .find(|s| t.decide(*s, delta) == Decision::Serve)
            .unwrap_or(1.0)
    };
    assert!(
        lowest(0.1) < lowest(0.02),
        "{} {}",
        lowest(0.1),
        lowest(0.02)
    );
    // Right 96.6% of the time at 0.934 itself, about 98.7% on average from there up: the
    // region it serves is right 98% of the time, not each point of it.
    assert!(
        lowest(0.02) > 0.92,
        "never below where what it serves is right 98%: {}",
        lowest(0.02)
    );
}

#[test]
fn served_answers_are_right_at_least_one_minus_the_bound_of_the_time() {
    use rand::{RngExt, SeedableRng};
    for delta in [0.02, 0.05] {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut t = Threshold::pooled();
        let (mut served, mut wrong) = (0usize, 0usize);
        for _ in 0..20_000 {
            let s: f64 = 0.6 + 0.4 * rng.random::<f64>();
            let right = rng.random::<f64>() < sigmoid(40.0 * (s - 0.85));
            match t.decide(s, delta) {
                Decision::Serve if rng.random::<f64>() >= AUDIT => {
                    served += 1;
                    wrong += usize::from(!right);
                }
                Decision::Hopeless => {}
                _ => t.observe(s, right),
            }
        }
        let precision = 1.0 - wrong as f64 / served.max(1) as f64;
        assert!(served > 100, "delta {delta}: served {served}");
        assert!(
            precision >= 1.0 - delta,
            "delta {delta}: precision {precision}"
        );
    }
}

#[test]
fn an_entry_is_trusted_only_where_its_own_evidence_reaches() {
    // The route's curve: right 98% of the time only from about 0.95.
    let route = taught(2000, 9);
    // An entry whose duplicates came at 0.70-0.72, and never a wrong one: its own fit
    // would serve far below what the route has seen to be safe.
    let mut e = Threshold::default();
    for k in 0..12 {
        e.observe(0.70 + 0.002 * f64::from(k), true);
    }
    assert_eq!(e.supported_from(), Some(0.704));
    assert_eq!(
        e.decide_within(&route, 0.669, 0.02),
        Decision::Hopeless,
        "below its own evidence the route's curve decides"
    );
    let one = {
        let mut e = Threshold::default();
        e.observe(0.7, true);
        e
    };
    assert_eq!(one.supported_from(), None, "one duplicate supports nothing");
    assert_eq!(
        one.decide_within(&route, 0.75, 0.02),
        route.decide(0.75, 0.02)
    );
}

#[test]
fn near_copies_that_are_always_right_serve_where_a_shallow_curve_would_not() {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(4);
    let mut t = Threshold::pooled();
    // Paraphrases and look-alikes overlap over [0.6, 0.95) (right 60% of the time); near
    // copies at 0.97 or above are always right.
    for _ in 0..600 {
        let s: f64 = 0.6 + 0.35 * rng.random::<f64>();
        t.observe(s, rng.random::<f64>() < 0.6);
    }
    for k in 0..100 {
        t.observe(0.97 + 0.0003 * f64::from(k), true);
    }
    assert_eq!(t.decide(0.99, 0.02), Decision::Verify, "100 right: not yet");
    assert!(
        t.region_from(0.05).is_some_and(|from| from >= 0.94),
        "enough for 5%: {:?}",
        t.region_from(0.05)
    );
    for k in 0..60 {
        t.observe(0.97 + 0.0005 * f64::from(k), true);
    }
    let from = t.region_from(0.02).unwrap();
    assert!((0.97..0.98).contains(&from), "{from}");
    assert_eq!(t.decide(0.99, 0.02), Decision::Serve);
    assert_ne!(
        t.decide(0.9, 0.02),
        Decision::Serve,
        "not where it is right 60%"
    );
    // One wrong answer among them asks for more evidence.
    t.observe(0.995, false);
    assert_eq!(t.region_from(0.02), None);
    assert_eq!(wilson_lower(0.0, 0.0), 0.0);
    assert!((wilson_lower(133.0, 133.0) - 0.98).abs() < 0.001);
}

#[test]
fn a_route_whose_most_similar_answers_are_too_often_wrong_cannot_certify() {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    // Right 85% of the time however similar: no region can show 98%.
    let mut noisy = Threshold::pooled();
    for k in 0..(STOP_AFTER * 3) {
        assert!(
            !noisy.cannot_certify(0.02) || k >= STOP_AFTER,
            "{k} observations"
        );
        noisy.observe(0.9 + 0.1 * rng.random::<f64>(), rng.random::<f64>() < 0.85);
    }
    assert!(noisy.cannot_certify(0.02));
    // At a 10% bound the same evidence could still certify.
    assert!(!noisy.cannot_certify(0.10));
    // Near-copies that are always right keep a route certifiable, whatever lies below them.
    let mut clean_top = Threshold::pooled();
    for _ in 0..STOP_AFTER {
        clean_top.observe(0.99, true);
    }
    for _ in 0..200 {
        clean_top.observe(0.8, rng.random::<f64>() < 0.5);
    }
    assert!(!clean_top.cannot_certify(0.02));
    // And a curve that learnt a clean region above its threshold is never stopped.
    assert!(!taught(2000, 5).cannot_certify(0.02));
}

#[test]
fn a_route_keeps_verifying_while_its_most_similar_answers_are_all_right() {
    // The ten most similar right, thirty below them right two times in three: every region
    // of forty or more is too often wrong, but the ten may start one that certifies.
    let mut route = Threshold::pooled();
    for _ in 0..CLEAN_TOP {
        route.observe(0.99, true);
    }
    for k in 0..(STOP_AFTER * 2) {
        route.observe(0.95, k % 3 != 0);
    }
    assert!(!route.cannot_certify(0.02));
    // One wrong answer among the most similar, and it stops.
    route.observe(0.995, false);
    assert!(route.cannot_certify(0.02));
}
