use super::*;

const S: Duration = Duration::from_secs(1);

/// Sends calls as soon as the pacer allows from `t0`, for `secs`; returns how many went.
fn drain(p: &mut Pacer, t0: Instant, secs: u64, tokens: u64) -> u64 {
    let end = t0 + Duration::from_secs(secs);
    let mut now = t0;
    let mut sent = 0;
    loop {
        now = p.ready_at(now, tokens);
        if now >= end {
            return sent;
        }
        p.take(now, tokens);
        sent += 1;
    }
}

#[test]
fn a_configured_rpm_goes_out_evenly_one_seconds_worth_at_a_time() {
    let t0 = Instant::now();
    let mut p = Pacer::new(
        PaceSpec {
            rpm: Some(120),
            tpm: None,
        },
        t0,
    );
    // A burst of two (one second's worth) at once, then one every half second.
    assert_eq!(p.ready_at(t0, 0), t0);
    p.take(t0, 0);
    assert_eq!(p.ready_at(t0, 0), t0);
    p.take(t0, 0);
    assert_eq!(p.ready_at(t0, 0), t0 + S / 2);
    let mut p = Pacer::new(
        PaceSpec {
            rpm: Some(120),
            tpm: None,
        },
        t0,
    );
    let sent = drain(&mut p, t0, 60, 0);
    assert!((120..=122).contains(&sent), "{sent} in a minute");
}

#[test]
fn tokens_pace_by_cost_and_a_call_above_the_burst_waits_for_a_full_bucket() {
    let t0 = Instant::now();
    let spec = PaceSpec {
        rpm: None,
        tpm: Some(60_000),
    };
    // 1,000 tokens a second: 4,000-token calls go one every four seconds.
    let mut p = Pacer::new(spec, t0);
    let sent = drain(&mut p, t0, 60, 4_000);
    assert!((15..=16).contains(&sent), "{sent}");
    // 500-token calls, two a second.
    let mut p = Pacer::new(spec, t0);
    let sent = drain(&mut p, t0, 60, 500);
    assert!((120..=122).contains(&sent), "{sent}");
}

#[test]
fn with_nothing_configured_it_paces_nothing_until_an_answer_reports_a_limit() {
    let t0 = Instant::now();
    let mut p = Pacer::new(PaceSpec::default(), t0);
    for _ in 0..1_000 {
        assert_eq!(p.ready_at(t0, 10_000), t0);
        p.take(t0, 10_000);
    }
    assert_eq!(p.state(t0), (None, None));
    // 60 a minute, none left, whole again in 1 s: the provider's burst is one.
    p.observe(t0, Dimension::Requests, 60, 0, S);
    assert_eq!(
        p.state(t0).0,
        Some(DimensionState {
            per_minute: 60,
            burst: 1,
            available: 0
        })
    );
    assert_eq!(p.ready_at(t0, 0), t0 + S);
    let sent = drain(&mut p, t0, 60, 0);
    assert!((59..=60).contains(&sent), "{sent}");
}

#[test]
fn reports_lower_the_rate_below_the_configured_one_but_never_raise_it() {
    let t0 = Instant::now();
    let spec = PaceSpec {
        rpm: Some(600),
        tpm: None,
    };
    let mut p = Pacer::new(spec, t0);
    // The key is shared: the provider grants 300 a minute, 20 left, full in 4 s.
    p.observe(t0, Dimension::Requests, 300, 20, 4 * S);
    // Its burst is 20 + 4 s × 5/s = 40; what is left stays the smaller of the two views (10:
    // sluice had one second's worth of its own 600 a minute).
    let s = p.state(t0).0.unwrap();
    assert_eq!((s.per_minute, s.burst, s.available), (300, 40, 10));
    // A report of a higher limit does not lift the operator's ceiling.
    let mut p = Pacer::new(spec, t0);
    p.observe(t0, Dimension::Requests, 10_000, 9_000, S);
    assert_eq!(p.state(t0).0.unwrap().per_minute, 600);
}

#[test]
fn what_the_provider_says_is_left_caps_what_sluice_thinks_is_left() {
    let t0 = Instant::now();
    let mut p = Pacer::new(
        PaceSpec {
            rpm: Some(60),
            tpm: Some(60_000),
        },
        t0,
    );
    // Another client of the same key spent the tokens: 0 left, whole in 30 s.
    p.observe(t0, Dimension::Tokens, 60_000, 0, 30 * S);
    assert_eq!(p.ready_at(t0, 500), t0 + S / 2);
    // A 429 empties both buckets, whatever they held.
    let later = t0 + 10 * S;
    p.exhausted(later);
    assert!(p.ready_at(later, 0) > later);
}

#[test]
fn an_upstream_that_announces_no_limit_is_paced_at_what_its_429_says_it_took() {
    let t0 = Instant::now();
    let mut p = Pacer::new(PaceSpec::default(), t0);
    // Thirty at once: nothing is known, all go; the upstream takes ten and refuses twenty.
    for _ in 0..30 {
        assert_eq!(p.ready_at(t0, 0), t0);
        p.take(t0, 0);
    }
    for _ in 0..20 {
        p.exhausted(t0 + Duration::from_millis(10));
    }
    let (requests, _) = p.state(t0 + Duration::from_millis(10));
    // Ten taken over 10 ms and the second a full bucket allows for, less the headroom:
    // 10 / 1.01 × 0.95 a second.
    assert_eq!(requests.map(|r| r.per_minute), Some(564), "9.4 a second");
    // Over the next ten seconds it sends about nine and a half a second, not thirty.
    let sent = drain(&mut p, t0 + Duration::from_millis(10), 10, 0);
    assert!((88..=104).contains(&sent), "{sent}");
    // A reported limit ends the learning: the header's rate is the pace.
    p.observe(t0 + 11 * S, Dimension::Requests, 1_200, 20, S);
    let (requests, _) = p.state(t0 + 11 * S);
    assert_eq!(requests.map(|r| r.per_minute), Some(1_200));
    p.exhausted(t0 + 12 * S);
    let (requests, _) = p.state(t0 + 12 * S);
    assert_eq!(
        requests.map(|r| r.per_minute),
        Some(1_200),
        "a 429 does not relearn it"
    );
}
