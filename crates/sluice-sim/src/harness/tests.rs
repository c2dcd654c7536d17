use std::time::Duration;

use super::*;

fn scenario(name: &str) -> Scenario {
    Scenario::builtin(name).unwrap().unwrap()
}

/// `s` through a plain proxy: no retries, breakers, queues or pacing.
fn proxy(s: &Scenario) -> Report {
    run_with(s, sluice_gateway::GatewayBuilder::bare()).unwrap()
}

/// `s` through sluice's defaults with hedging off: the tail as it comes from the upstream.
fn unhedged(s: &Scenario) -> Report {
    run_with(s, sluice_gateway::GatewayBuilder::new().without_hedging()).unwrap()
}

fn json(r: &Report) -> String {
    serde_json::to_string(r).unwrap()
}

#[test]
fn the_same_seed_gives_the_same_summary_twice() {
    let s = scenario("heavy-tail");
    let a = run(&s).unwrap();
    let b = run(&s).unwrap();
    assert_eq!(json(&a), json(&b));
    assert!(a.summary.all.count > 2_500, "{}", a.summary.all.count);
}

#[test]
fn a_different_seed_gives_a_different_run() {
    let mut s = scenario("heavy-tail");
    let a = run(&s).unwrap();
    s.meta.seed += 1;
    let b = run(&s).unwrap();
    assert_ne!(a.summary.all.total, b.summary.all.total);
}

#[test]
fn the_heavy_tail_shows_in_p99_and_not_in_the_median() {
    let r = unhedged(&scenario("heavy-tail"));
    let all = &r.summary.all;
    assert_eq!(
        all.ok, all.count,
        "no faults in this scenario: {:?}",
        all.errors_by_status
    );
    // 2% of requests stall 8 s before their first token: the P99 of TTFB sits in the stalls,
    // the median near the 800 ms body.
    assert!(
        all.ttfb.p50 > Duration::from_millis(700) && all.ttfb.p50 < Duration::from_millis(950),
        "{:?}",
        all.ttfb
    );
    assert!(all.ttfb.p99 > Duration::from_secs(8), "{:?}", all.ttfb);
    let stalls: u64 = r.upstreams.values().map(|u| u.stalls).sum();
    let share = stalls as f64 / all.count as f64;
    assert!((0.013..0.027).contains(&share), "stall share {share}");
}

#[test]
fn a_plain_proxy_passes_the_rate_limited_scenarios_429s_through() {
    let r = proxy(&scenario("rate-limited"));
    let limited = r.upstreams["limited"].rate_limited;
    assert!(limited > 250, "{limited} 429s");
    assert_eq!(
        r.summary.all.errors_by_status.get(&429).copied(),
        Some(limited)
    );
    // The upstream admitted about its 60 RPM over three minutes (plus the full bucket at start).
    let admitted = r.upstreams["limited"].answered;
    assert!((150..=250).contains(&admitted), "{admitted} admitted");
}

#[test]
fn through_a_plain_proxy_an_outage_fails_half_the_requests_for_a_minute() {
    let r = proxy(&scenario("outage"));
    let failed = r
        .summary
        .all
        .errors_by_status
        .get(&502)
        .copied()
        .unwrap_or(0);
    let alpha_503 = r.upstreams["alpha"].error_503;
    assert_eq!(
        failed, alpha_503,
        "each injected 503 reached a client as 502"
    );
    // 20 req/s, half to alpha, for 60 s: about 600.
    assert!((500..=700).contains(&failed), "{failed}");
}

#[test]
fn a_brownout_shows_in_the_gateways_windows() {
    let r = run(&scenario("brownout")).unwrap();
    // The run ends after the brownout; the client-side P99 still carries it.
    assert!(
        r.summary.all.total.p99 > Duration::from_secs(4),
        "{:?}",
        r.summary.all.total
    );
    assert_eq!(r.summary.all.ok, r.summary.all.count);
}

fn hedged(s: &Scenario) -> Report {
    run_with(
        s,
        sluice_gateway::GatewayBuilder::new().hedging(sluice_tail::HedgePolicy::default()),
    )
    .unwrap()
}

#[test]
fn hedging_cuts_the_heavy_tail_at_a_bounded_cost() {
    let s = scenario("heavy-tail");
    let off = unhedged(&s);
    let on = hedged(&s);
    let (a, b) = (&off.summary.all, &on.summary.all);
    assert_eq!(
        (a.ok, b.ok),
        (a.count, b.count),
        "every request answered in both runs"
    );
    // Stalls of 8 s sit in the P99 of time to first byte without hedging; a hedge sent after
    // the P95 (about 1.8 s) answers within a few seconds instead.
    assert!(a.ttfb.p99 > Duration::from_secs(8), "off: {:?}", a.ttfb);
    assert!(
        b.ttfb.p99 * 2 < a.ttfb.p99,
        "P99 TTFB off {:?}, on {:?}",
        a.ttfb.p99,
        b.ttfb.p99
    );
    assert!(
        b.over_slo * 2 < a.over_slo,
        "SLO breaches off {}, on {}",
        a.over_slo,
        b.over_slo
    );
    // The extra requests the upstreams saw are the hedges: about 5%, the P95's complement.
    let share = on.extra_requests as f64 / b.count as f64;
    assert!(
        (0.02..=0.08).contains(&share),
        "hedges were {share:.3} of requests"
    );
    assert_eq!(off.extra_requests, 0);
}

#[test]
fn hedged_runs_repeat_exactly() {
    let s = scenario("heavy-tail");
    assert_eq!(json(&hedged(&s)), json(&hedged(&s)));
}

#[test]
fn a_scenario_can_switch_hedging_on_itself() {
    let text = Scenario::builtin("heavy-tail").unwrap().unwrap();
    let mut s = text;
    s.gateway.hedge = Some(sluice_tail::HedgePolicy::default());
    let r = run(&s).unwrap();
    assert!(r.extra_requests > 0);
}

fn admitted(s: &Scenario) -> Report {
    run_with(s, crate::variants::builder("+hedging").unwrap()).unwrap()
}

/// sluice as it comes, with no policy configured: the defaults pace, queue and retry.
#[test]
fn by_default_every_batch_document_finishes_behind_a_60_rpm_limit_without_429s() {
    let s = scenario("rate-limited");
    let plain = proxy(&s);
    let paced = run(&s).unwrap();
    let batch = |r: &Report| r.summary.lanes["batch"].clone();
    assert!(
        batch(&plain).ok < batch(&plain).count / 2,
        "the plain proxy loses most of the batch to 429s"
    );
    assert_eq!(
        batch(&paced).ok,
        batch(&paced).count,
        "{:?}",
        batch(&paced).errors_by_status
    );
    assert_eq!(
        paced.summary.all.ok, paced.summary.all.count,
        "interactive too"
    );
    // Backpressure, not magic: 450 requests at 60 a minute (after a first minute's burst)
    // take six and a half minutes from the first burst, so the second burst's last document
    // waits about five.
    assert!(batch(&paced).total.max > Duration::from_secs(250));
    // The upstream never saw more than its limit allows: paced by the headers of its answers,
    // sluice sent nothing into a 429, where the plain proxy met hundreds.
    assert!(plain.upstreams["limited"].rate_limited > 200);
    assert_eq!(paced.upstreams["limited"].rate_limited, 0);
    assert_eq!(paced.upstreams["limited"].answered, paced.summary.all.count);
}

#[test]
fn admission_keeps_batch_floods_from_failing_interactive_users() {
    let s = scenario("doc-analysis");
    let plain = proxy(&s);
    let paced = admitted(&s);
    let interactive = |r: &Report| r.summary.lanes["interactive"].clone();
    assert!(
        interactive(&plain).ok < interactive(&plain).count,
        "the plain proxy fails some"
    );
    assert_eq!(interactive(&paced).ok, interactive(&paced).count);
    assert_eq!(paced.summary.all.ok, paced.summary.all.count);
    // Hedging still cuts the stalls out of the interactive first byte.
    assert!(interactive(&paced).ttfb.p99 * 2 < interactive(&plain).ttfb.p99);
}

#[test]
fn admitted_runs_repeat_exactly() {
    let s = scenario("doc-analysis");
    assert_eq!(json(&admitted(&s)), json(&admitted(&s)));
}

#[test]
fn by_default_an_outage_is_cut_down_to_the_calls_that_found_it() {
    let s = scenario("outage");
    let plain = proxy(&s);
    let broken = run(&s).unwrap();
    let failed = |r: &Report| r.summary.all.count - r.summary.all.ok;
    assert!(failed(&plain) > 500, "{}", failed(&plain));
    assert!(
        failed(&broken) * 5 < failed(&plain),
        "{} vs {}",
        failed(&broken),
        failed(&plain)
    );
    // The sick upstream saw far fewer calls during the outage.
    assert!(broken.upstreams["alpha"].error_503 * 3 < plain.upstreams["alpha"].error_503);
}
