//! The tail-latency engine's acceptance, in virtual time: the real gateway stack against
//! seeded simulated upstreams, each policy off and on over the same traffic in the same test.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use sluice_core::AttemptOutcome;
use sluice_gateway::GatewayBuilder;
use sluice_sim::harness::{Report, run_recorded, run_with};
use sluice_sim::scenario::{BUILTIN, Scenario};
use sluice_sim::variants;
use sluice_tail::{HedgePolicy, RetryPolicy};

/// `s` through a plain proxy: each test here measures one policy against none.
fn run(s: &Scenario) -> Result<Report, sluice_sim::harness::HarnessError> {
    run_with(s, GatewayBuilder::bare())
}

fn scenario(name: &str) -> Scenario {
    Scenario::builtin(name).unwrap().unwrap()
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn failed(r: &Report) -> u64 {
    r.summary.all.count - r.summary.all.ok
}

/// The standard normal distribution function (erfc by its Chebyshev fit, relative error
/// below 1.2e-7: Numerical Recipes' `erfcc`).
fn normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * x);
    let poly = [
        -1.265_512_23,
        1.000_023_68,
        0.374_091_96,
        0.096_784_18,
        -0.186_288_06,
        0.278_868_07,
        -1.135_203_98,
        1.488_515_87,
        -0.822_152_23,
        0.170_872_77,
    ]
    .iter()
    .rev()
    .fold(0.0, |acc, c| acc * t + c);
    let erfc = t * (-x * x + poly).exp();
    if z >= 0.0 {
        1.0 - erfc / 2.0
    } else {
        erfc / 2.0
    }
}

/// The fewest 504s any hedging can reach without a signal that tells a stall from a slow
/// request, for upstreams answering after a lognormal first byte (`median`, `sigma`) except
/// for a share `stall` of requests that outlast `deadline`, with `budget` hedges a request.
///
/// All such a policy knows of a request is how long it has waited, so it picks, for each
/// hedge, how long a request waits before one (any mix of times; at most one hedge a
/// request). A hedge at `t` goes out for a share p(t) of requests (those still waiting) and
/// rescues those among them that would miss the deadline while the hedge lands in time: a
/// hedge rescues at most r(t) = P(miss | waiting at t) x P(hedge lands by the deadline).
/// While the budget is below p(t) of the best t, the best any policy can do is spend the
/// whole budget there: budget x max r(t).
fn fewest_504s_without_a_stall_signal(
    median: Duration,
    sigma: f64,
    stall: f64,
    deadline: Duration,
    budget: f64,
) -> f64 {
    let body_by = |t: f64| {
        if t <= 0.0 {
            0.0
        } else {
            normal_cdf((t / secs(median)).ln() / sigma)
        }
    };
    let d = secs(deadline);
    let miss = stall + (1.0 - stall) * (1.0 - body_by(d));
    let (best, waiting) = (1..1000)
        .map(|i| d * f64::from(i) / 1000.0)
        .map(|t| {
            let waiting = stall + (1.0 - stall) * (1.0 - body_by(t));
            let lands = (1.0 - stall) * body_by(d - t);
            (miss / waiting * lands, waiting)
        })
        .fold((0.0, 1.0), |a, b| if b.0 > a.0 { b } else { a });
    assert!(
        budget <= waiting,
        "a budget this large needs the whole linear program"
    );
    miss - budget * best
}

/// (a) 20,000 requests over two upstreams with lognormal first tokens (median 800 ms, sigma
/// 0.5) and 2% stalls of 8 s. Hedging at the observed P95 within a 5% budget against no
/// hedging, and against what other gateways offer for this: a fixed 3 s per-attempt timeout,
/// then a retry on the other upstream.
#[test]
fn hedging_cuts_p99_and_p999_at_a_bounded_cost_and_beats_timeout_and_retry() {
    let s = scenario("tail-at-scale");
    let off = run(&s).unwrap();
    let on = run_with(&s, GatewayBuilder::bare().hedging(HedgePolicy::default())).unwrap();
    let mut remedy_scenario = s.clone();
    remedy_scenario.gateway.first_byte_timeout = Duration::from_secs(3);
    let remedy = run_with(
        &remedy_scenario,
        GatewayBuilder::bare().retries(RetryPolicy::default()),
    )
    .unwrap();

    let count = on.summary.all.count;
    assert!(count > 19_500, "{count} requests");
    for r in [&off, &on, &remedy] {
        assert_eq!(
            r.summary.all.ok, count,
            "{:?}",
            r.summary.all.errors_by_status
        );
    }
    let (a, b, c) = (
        &off.summary.all.total,
        &on.summary.all.total,
        &remedy.summary.all.total,
    );
    let p99_gain = secs(a.p99) / secs(b.p99);
    let p999_gain = secs(a.p999) / secs(b.p999);
    let extra = on.extra_requests as f64 / count as f64;
    let vs_remedy = 1.0 - secs(b.p99) / secs(c.p99);
    eprintln!(
        "P99 {:?} -> {:?} ({p99_gain:.2}x), P999 {:?} -> {:?} ({p999_gain:.2}x), \
         extra calls {:.1}%, timeout+retry P99 {:?} ({:.0}% worse than hedging)",
        a.p99,
        b.p99,
        a.p999,
        b.p999,
        extra * 100.0,
        c.p99,
        vs_remedy * 100.0
    );
    assert!(p99_gain >= 2.8, "P99 only {p99_gain:.2}x lower");
    assert!(p999_gain >= 2.2, "P999 only {p999_gain:.2}x lower");
    // Extra calls as the simulated upstreams counted them (every hedge that left, won or not).
    assert!(extra <= 0.06, "{:.2}% extra upstream calls", extra * 100.0);
    assert_eq!(off.extra_requests, 0);
    assert!(
        vs_remedy >= 0.2,
        "hedging's P99 only {:.0}% below timeout+retry",
        vs_remedy * 100.0
    );

    // When stalls are common: the same upstreams with 10% stalls and a 2 s deadline on
    // every request. The whole window's P95 is a stall, so a hedge at it would always come
    // after the deadline; the trigger takes the P95 of the window's body, and no later than
    // the last moment a hedge can still finish inside the deadline.
    let stalls = |p: f64| {
        let mut c = s.clone();
        c.meta.duration = Duration::from_secs(200);
        for (_, u) in &mut c.upstreams {
            u.stall_probability = p;
        }
        for t in &mut c.traffic {
            t.timeout = Some(Duration::from_secs(2));
        }
        c
    };
    let timed_out = |r: &Report| {
        r.summary
            .all
            .errors_by_status
            .get(&504)
            .copied()
            .unwrap_or(0) as f64
            / r.summary.all.count as f64
    };
    let common = stalls(0.10);
    let unhedged = run(&common).unwrap();
    let (hedged, records) = run_recorded(
        &common,
        GatewayBuilder::bare().hedging(HedgePolicy::default()),
    )
    .unwrap();
    let n = hedged.summary.all.count as f64;
    let (off_504, on_504) = (timed_out(&unhedged), timed_out(&hedged));
    let extra = hedged.extra_requests as f64 / n;
    let by_deadline = records
        .iter()
        .filter(|r| r.hedge_rule == Some("deadline"))
        .count();
    eprintln!(
        "10% stalls, 2 s deadline: 504s {:.1}% unhedged, {:.1}% hedged; extra calls {:.1}%; \
         hedge time set by the deadline on {by_deadline} of {n} requests",
        off_504 * 100.0,
        on_504 * 100.0,
        extra * 100.0
    );
    // The fewest 504s any hedging can reach here without a signal that tells a stall from a
    // slow request, with this budget (its floor and starting burst included): at the moment
    // a hedge must leave to land in time, most requests still waiting are only slow, so one
    // hedge rescues about one doomed request in five. A hedge at the whole window's P95 (a
    // stall, 8 s) would never leave before the deadline: as many 504s as with no hedging.
    let up = &common.upstreams[0].1;
    let rate: f64 = common.traffic.iter().map(|t| t.rate).sum();
    let spend = |p: &HedgePolicy| p.budget + p.min_per_second / rate + p.burst / n;
    let best = |stall: f64, p: &HedgePolicy| {
        fewest_504s_without_a_stall_signal(
            up.ttft_median,
            up.ttft_sigma,
            stall,
            Duration::from_secs(2),
            spend(p),
        )
    };
    let floor = best(0.10, &HedgePolicy::default());
    eprintln!(
        "10% stalls: the fewest 504s any hedging without a stall signal reaches with a 5% \
         budget: {:.1}%",
        floor * 100.0
    );
    assert!(off_504 >= 0.11, "unhedged 504s {:.1}%", off_504 * 100.0);
    assert!(
        on_504 <= floor + 0.004,
        "hedged 504s {:.1}% against a best possible {:.1}% ({:.1}% unhedged)",
        on_504 * 100.0,
        floor * 100.0,
        off_504 * 100.0
    );
    assert!(extra <= 0.06, "{:.2}% extra upstream calls", extra * 100.0);
    assert!(by_deadline > 0, "the deadline never set a hedge's time");
    // A budget of 20% rescues what 5% cannot: down to the stalls it cannot reach in time
    // and the body's own tail beyond 2 s.
    let wide = HedgePolicy {
        budget: 0.20,
        ..HedgePolicy::default()
    };
    let wide_run = run_with(&common, GatewayBuilder::bare().hedging(wide)).unwrap();
    let generous = timed_out(&wide_run);
    let wide_extra = wide_run.extra_requests as f64 / wide_run.summary.all.count as f64;
    let floor_wide = best(0.10, &wide);
    eprintln!(
        "10% stalls, 20% budget: 504s {:.1}% (best possible {:.1}%); extra calls {:.1}%",
        generous * 100.0,
        floor_wide * 100.0,
        wide_extra * 100.0
    );
    assert!(wide_extra <= spend(&wide) + 0.01, "{wide_extra}");
    assert!(
        generous <= floor_wide + 0.004,
        "504s {:.1}% with a 20% budget, best possible {:.1}%",
        generous * 100.0,
        floor_wide * 100.0
    );
    // Streamed answers are hedged on their own window (a stream's first byte is its first
    // token, not its last): the same bound holds for them.
    let mut streamed = common.clone();
    for t in &mut streamed.traffic {
        t.stream = true;
    }
    let off_streams = timed_out(&run(&streamed).unwrap());
    let on_streams = timed_out(
        &run_with(
            &streamed,
            GatewayBuilder::bare().hedging(HedgePolicy::default()),
        )
        .unwrap(),
    );
    eprintln!(
        "10% stalls, streamed, 5% budget: 504s {:.1}% unhedged, {:.1}% hedged, best possible \
         {:.1}%",
        off_streams * 100.0,
        on_streams * 100.0,
        floor * 100.0
    );
    assert!(
        on_streams <= floor + 0.004,
        "streams: {on_streams} (best possible {floor}, unhedged {off_streams})"
    );
    // What a 5% budget does at a stall rate at the budget, and at four times it.
    for p in [0.05, 0.20] {
        let c = stalls(p);
        let off = timed_out(&run(&c).unwrap());
        let on = timed_out(
            &run_with(&c, GatewayBuilder::bare().hedging(HedgePolicy::default())).unwrap(),
        );
        let floor = best(p, &HedgePolicy::default());
        eprintln!(
            "{:.0}% stalls, 2 s deadline, 5% budget: 504s {:.1}% unhedged, {:.1}% hedged, \
             best possible {:.1}%",
            p * 100.0,
            off * 100.0,
            on * 100.0,
            floor * 100.0
        );
        assert!(on < off, "{p}: {on} (unhedged {off})");
        assert!(on <= floor + 0.004, "{p}: {on} (best possible {floor})");
    }
}

/// (b) One of two upstreams answers 503 from 60 s to 120 s.
#[test]
fn a_breaker_takes_a_dead_upstream_out_within_seconds_and_lets_it_back() {
    let s = scenario("outage");
    let plain = run(&s).unwrap();
    let (broken, records) = run_recorded(&s, variants::builder("+hedging").unwrap()).unwrap();
    let count = broken.summary.all.count;
    eprintln!(
        "failed: plain {} of {}, with breakers {} ({:?})",
        failed(&plain),
        plain.summary.all.count,
        failed(&broken),
        broken.summary.all.errors_by_status
    );
    assert!(failed(&plain) > 500, "the outage hurts without policies");
    assert!(
        (failed(&broken) as f64) < 0.01 * count as f64,
        "{} of {count} failed",
        failed(&broken)
    );

    let t0 = records.iter().map(|r| r.timings.received).min().unwrap();
    let at = |i: tokio::time::Instant| secs(i - t0);
    let alpha: Vec<(f64, AttemptOutcome)> = records
        .iter()
        .flat_map(|r| r.attempts.iter())
        .filter(|a| a.upstream.starts_with("alpha"))
        .map(|a| (at(a.started), a.outcome))
        .collect();
    let first_failure = alpha
        .iter()
        .filter(|(_, o)| matches!(o, AttemptOutcome::Failed(_)))
        .map(|(t, _)| *t)
        .fold(f64::INFINITY, f64::min);
    // Before the first probe (15 s after opening), the last call alpha got tells when the
    // breaker opened.
    let last_before_probes = alpha
        .iter()
        .map(|(t, _)| *t)
        .filter(|t| *t >= first_failure && *t < first_failure + 15.0)
        .fold(first_failure, f64::max);
    eprintln!("first 503 at {first_failure:.1} s, breaker open by {last_before_probes:.1} s");
    assert!(
        last_before_probes - first_failure < 5.0,
        "alpha still got calls {:.1} s into the outage",
        last_before_probes - first_failure
    );
    // Once alpha is back (from 120 s) and probes have closed its breaker, it takes its share
    // again: in the last 10 s of traffic about half the calls go to it, and succeed.
    let end = at(records.iter().map(|r| r.timings.received).max().unwrap());
    let late: Vec<&(f64, AttemptOutcome)> = alpha.iter().filter(|(t, _)| *t > end - 10.0).collect();
    let late_all = records
        .iter()
        .filter(|r| at(r.timings.received) > end - 10.0)
        .count();
    assert!(
        late.len() * 10 > late_all * 3,
        "alpha got {} of {late_all} calls at the end",
        late.len()
    );
    assert!(
        late.iter()
            .all(|(_, o)| !matches!(o, AttemptOutcome::Failed(_))),
        "alpha is healthy again"
    );
}

/// (c) One of two upstreams fails every call, the whole run, and retries are on (without
/// breakers, so only the retry budget stands between the failures and a storm).
#[test]
fn retries_cannot_storm_a_dead_upstream() {
    let mut s = scenario("outage");
    let alpha = s
        .upstreams
        .iter_mut()
        .find(|(n, _)| n == "alpha")
        .map(|(_, u)| u)
        .unwrap();
    alpha.degradations[0].from = Duration::ZERO;
    alpha.degradations[0].to = s.meta.duration + Duration::from_secs(60);
    let plain = run(&s).unwrap();
    let retried = run_with(&s, GatewayBuilder::bare().retries(RetryPolicy::default())).unwrap();
    let clients = retried.summary.all.count;
    let calls: u64 = retried.upstreams.values().map(|u| u.requests).sum();
    let ratio = calls as f64 / clients as f64;
    eprintln!(
        "{calls} upstream calls for {clients} requests ({ratio:.3}x); failed: {} without \
         retries, {} with",
        failed(&plain),
        failed(&retried)
    );
    assert!(ratio <= 1.25, "{ratio:.3} upstream calls per request");
    // The budget is spent, not hoarded: retries rescued a good share of the failures.
    assert!(failed(&retried) * 10 < failed(&plain) * 8);
}

/// (d) Every request carries a 2 s deadline; no answer, good or bad, comes later than
/// 2.05 s, in every built-in scenario, with every policy on (hedges, admission queues,
/// retries, breakers) and with none.
#[test]
fn a_two_second_deadline_holds_in_every_scenario() {
    for (name, _) in BUILTIN {
        let mut s = scenario(name);
        // A scenario with the semantic cache runs only over HTTP (`sluice demo`, which
        // `tests/faq_cache.rs` rehearses); virtual time cannot replay it.
        if s.gateway.semantic.is_some() {
            assert_eq!(*name, "faq");
            continue;
        }
        let deadline = Some(Duration::from_secs(2));
        for t in &mut s.traffic {
            t.timeout = deadline;
        }
        for b in &mut s.bursts {
            b.timeout = deadline;
        }
        s.meta.slo = Some(Duration::from_millis(2_050));
        for (label, builder) in [
            ("plain", GatewayBuilder::bare()),
            ("defaults", GatewayBuilder::new()),
            ("all policies", variants::builder("+hedging").unwrap()),
        ] {
            let r = run_with(&s, builder).unwrap();
            let all = &r.summary.all;
            assert_eq!(
                all.over_slo, 0,
                "{name}, {label}: {} answers later than 2.05 s",
                all.over_slo
            );
            assert!(all.count > 0 && all.ok > 0, "{name}, {label}: {all:?}");
            if all.ok > 0 {
                assert!(all.total.max <= Duration::from_millis(2_050), "{name}");
            }
        }
    }
}
