//! Admission's acceptance, in virtual time: the real gateway stack against seeded simulated
//! upstreams, admission off and on over the same traffic in the same test.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use sluice_core::{CallRecord, ErrorKind};
use sluice_gateway::GatewayBuilder;
use sluice_sim::harness::{Report, run_recorded, run_with};
use sluice_sim::scenario::Scenario;
use sluice_sim::variants;
use sluice_tail::admission::LaneSpec;
use tokio::time::Instant;

fn admission() -> GatewayBuilder {
    variants::builder("+hedging").unwrap()
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn lane<'a>(records: &'a [CallRecord], name: &'a str) -> impl Iterator<Item = &'a CallRecord> {
    records
        .iter()
        .filter(move |r| r.lane.as_deref() == Some(name))
}

/// The P99 of `values` (seconds).
fn p99(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[((values.len() as f64 * 0.99).ceil() as usize).saturating_sub(1)]
}

fn total(r: &CallRecord) -> f64 {
    secs(r.timings.done.unwrap() - r.timings.received)
}

fn ttfb(r: &CallRecord) -> f64 {
    secs(r.timings.first_byte.unwrap() - r.timings.received)
}

/// The seed's exercise, at ten times its scale: one upstream with a rate limit of 600 a
/// minute (10 a second, enforced a second at a time), 69% of requests interactive (streams,
/// Poisson at 5.52/s) and 31% batch, arriving as bursts of 200 at once every 80 s; on average
/// 0.8 of the limit.
fn seed_exercise() -> String {
    behind_600_rpm("seed-exercise", 6, 400, 5.52)
}

/// One upstream with a rate limit of 600 a minute (10 a second, enforced a second at a
/// time) and Poisson interactive streams at `interactive_rate` a second, for `secs`.
fn behind_600_rpm(name: &str, seed: u64, secs: u64, interactive_rate: f64) -> String {
    format!(
        r#"
[scenario]
name = "{name}"
description = "interactive streams and batch behind a shared 600 RPM limit"
seed = {seed}
duration = "{secs}s"
slo = "10s"

[gateway]
first_byte_timeout = "60s"
idle_timeout = "30s"

[upstreams.shared]
ttft_median = "800ms"
ttft_sigma = 0.4
per_token = "10ms"
tokens_per_chunk = 4
output_tokens_median = 100
rpm = 600
rpm_burst = 10

[models.review]
deployments = [{{ provider = "shared", model = "review-large" }}]

[[traffic]]
lane = "interactive"
model = "review"
rate = {interactive_rate}
prompt_tokens = 1000
stream = true
"#
    )
}

fn with_bursts(text: &str, at: &[u64]) -> String {
    let mut out = text.to_string();
    for t in at {
        out.push_str(&format!(
            "\n[[bursts]]\nlane = \"batch\"\nmodel = \"review\"\nat = \"{t}s\"\ncount = 200\n\
             spread = \"0s\"\nprompt_tokens = 2000\nstream = false\n"
        ));
    }
    out
}

const BURSTS: [u64; 5] = [20, 100, 180, 260, 340];

/// (a) The seed's exercise: with admission, the upstream's 429s fall below 0.5% (from most
/// of every burst without it), interactive P99 stays within 1.5x of the same traffic without
/// batch, every batch document completes, and each burst drains within 1.5x of the time the
/// rate limit allows it.
///
/// "The time the limit allows": interactive requests go first and take 5.52 of the 10 calls a
/// second, so a burst of 200 can drain no faster than 200 / 4.48 s = 45 s (the literal
/// 200 / limit = 20 s would need the interactive lane to stop).
#[test]
fn batch_bursts_behind_a_rate_limit_finish_without_429s_or_hurting_interactive_users() {
    let s = Scenario::parse(&with_bursts(&seed_exercise(), &BURSTS)).unwrap();
    let quiet = Scenario::parse(&seed_exercise()).unwrap();
    let off = run_with(&s, GatewayBuilder::bare()).unwrap();
    let (on, records) = run_recorded(&s, admission()).unwrap();
    let (_, alone) = run_recorded(&quiet, admission()).unwrap();

    let rate_429 = |r: &Report| {
        let u = &r.upstreams["shared"];
        u.rate_limited as f64 / u.requests as f64
    };
    let interactive_p99 = |records: &[CallRecord]| {
        p99(lane(records, "interactive")
            .filter(|r| r.is_success())
            .map(total)
            .collect())
    };
    let (with_batch, without) = (interactive_p99(&records), interactive_p99(&alone));
    eprintln!(
        "429 rate: off {:.1}%, on {:.2}%; interactive P99 {with_batch:.2} s with batch, \
         {without:.2} s without",
        rate_429(&off) * 100.0,
        rate_429(&on) * 100.0
    );
    assert!(
        rate_429(&off) > 0.2,
        "without admission the bursts meet the limit"
    );
    assert!(rate_429(&on) < 0.005);
    assert!(with_batch <= 1.5 * without);

    let batch = &on.summary.lanes["batch"];
    assert_eq!((batch.count, batch.ok), (1_000, 1_000), "{batch:?}");
    assert_eq!(on.summary.all.ok, on.summary.all.count, "nothing lost");

    // Bursts: batch requests grouped by arrival (200 at once, 80 s apart).
    let mut arrivals: Vec<(Instant, Instant)> = lane(&records, "batch")
        .map(|r| (r.timings.received, r.timings.done.unwrap()))
        .collect();
    arrivals.sort();
    let bursts: Vec<&[(Instant, Instant)]> = arrivals.chunks(200).collect();
    assert_eq!(bursts.len(), BURSTS.len());
    let allowed = 200.0 / (10.0 - 5.52);
    for b in bursts {
        let start = b[0].0;
        assert!(secs(b[199].0 - start) < 0.001, "a burst arrives at once");
        let took = secs(b.iter().map(|(_, done)| *done).max().unwrap() - start);
        eprintln!("a burst drained in {took:.1} s (allowed {allowed:.1} s)");
        assert!(took <= 1.5 * allowed, "a burst took {took:.1} s");
    }
}

/// Sustained overload: 13 requests a second (4 interactive, 9 batch, Poisson) for ten
/// minutes at an upstream that serves 10.
fn overload() -> String {
    behind_600_rpm("overload", 8, 600, 4.0)
}

const BATCH_TRAFFIC: &str = r#"
[[traffic]]
lane = "batch"
model = "review"
rate = 9.0
prompt_tokens = 2000
stream = false
"#;

fn overload_lanes() -> Vec<LaneSpec> {
    vec![
        LaneSpec {
            name: Arc::from("interactive"),
            share: 0.8,
            max_queue: 256,
            max_wait: Duration::from_secs(30),
        },
        LaneSpec {
            name: Arc::from("batch"),
            share: 0.2,
            max_queue: 300,
            max_wait: Duration::from_secs(600),
        },
    ]
}

/// (b) Sustained overload: nothing accepted is lost (every failure is a refusal at the door,
/// 503 with `Retry-After`, never a request that waited and was then dropped), the queues stay
/// within their bounds, each `Retry-After` is within 2x of when the queue ahead of the
/// refused request had really drained, and interactive P99 stays within 2x of its value
/// with no batch at all.
#[test]
fn sustained_overload_refuses_honestly_at_the_door_and_loses_nothing_accepted() {
    let s = Scenario::parse(&format!("{}{BATCH_TRAFFIC}", overload())).unwrap();
    let quiet = Scenario::parse(&overload()).unwrap();
    let (report, records) = run_recorded(&s, admission().lanes(overload_lanes())).unwrap();
    let (_, alone) = run_recorded(&quiet, admission().lanes(overload_lanes())).unwrap();

    let refused: Vec<&CallRecord> = records.iter().filter(|r| !r.is_success()).collect();
    assert!(
        refused.len() > 100,
        "1.3x overload must refuse some: {}",
        refused.len()
    );
    for r in &refused {
        assert_eq!(
            (r.status, r.error),
            (503, Some(ErrorKind::Overloaded)),
            "{r:?}"
        );
        assert!(
            r.attempts.is_empty(),
            "a refused request never reached the upstream"
        );
        assert!(
            r.timings.done.unwrap() - r.timings.received < Duration::from_millis(1),
            "refused at the door, not after waiting"
        );
        assert!(r.retry_after.is_some());
    }
    let upstream = &report.upstreams["shared"];
    assert!((upstream.rate_limited as f64) < 0.005 * upstream.requests as f64);

    // The queue at any moment: arrived, not yet dispatched, not refused.
    let mut events: Vec<(Instant, i64)> = Vec::new();
    for r in records.iter().filter(|r| r.is_success()) {
        events.push((r.timings.received, 1));
        events.push((r.timings.dispatched.unwrap(), -1));
    }
    events.sort();
    let (mut depth, mut deepest) = (0i64, 0i64);
    for (_, d) in events {
        depth += d;
        deepest = deepest.max(depth);
    }
    eprintln!("deepest queue {deepest}, {} refused", refused.len());
    assert!(deepest <= 256 + 300, "queue grew to {deepest}");

    // When capacity really came back for a request refused at t: when the last batch request
    // waiting at t was dispatched.
    let batch: Vec<&CallRecord> = lane(&records, "batch").filter(|r| r.is_success()).collect();
    let mut worst: f64 = 1.0;
    for r in refused
        .iter()
        .filter(|r| r.lane.as_deref() == Some("batch"))
    {
        let t = r.timings.received;
        let back = batch
            .iter()
            .filter(|q| q.timings.received < t && q.timings.dispatched.unwrap() > t)
            .map(|q| q.timings.dispatched.unwrap())
            .max()
            .unwrap_or(t);
        let real = secs(back - t).max(1.0);
        let told = secs(r.retry_after.unwrap());
        worst = worst.max(told / real).max(real / told);
    }
    eprintln!("Retry-After off by {worst:.2}x at worst");
    assert!(worst <= 2.0, "a Retry-After was {worst:.2}x off");

    let interactive_p99 = |records: &[CallRecord]| {
        p99(lane(records, "interactive")
            .filter(|r| r.is_success())
            .map(total)
            .collect())
    };
    let (loaded, unloaded) = (interactive_p99(&records), interactive_p99(&alone));
    eprintln!("interactive P99 {loaded:.2} s loaded, {unloaded:.2} s unloaded");
    assert!(loaded <= 2.0 * unloaded);
    assert!(lane(&records, "interactive").all(CallRecord::is_success));
}

/// An upstream serving 40 requests at once that loses half its capacity at 200 s: 3
/// interactive streams and 5 batch documents a second, each served for about 3 s, need about
/// 24. After the halving it serves about 6 a second: the interactive lane's 3 fit, the batch
/// lane's 5 do not, and wait in sluice.
const HALVING: &str = r#"
[scenario]
name = "halving"
description = "An upstream that loses half its capacity mid-run"
seed = 12
duration = "400s"
slo = "10s"

[gateway]
first_byte_timeout = "120s"
idle_timeout = "30s"

[upstreams.shared]
ttft_median = "800ms"
ttft_sigma = 0.3
per_token = "20ms"
tokens_per_chunk = 4
output_tokens_median = 100
capacity = 40

[[upstreams.shared.degradations]]
from = "200s"
to = "1000s"
capacity_factor = 0.5

[models.review]
deployments = [{ provider = "shared", model = "review-large" }]

[[traffic]]
lane = "interactive"
model = "review"
rate = 3.0
prompt_tokens = 1000
stream = true

[[traffic]]
lane = "batch"
model = "review"
rate = 5.0
prompt_tokens = 1000
stream = false
"#;

/// (c) Capacity halves mid-run: within 30 s the gateway holds what it sends near the new
/// capacity (the limit followed), and interactive first-byte P99 recovers to within 2x of
/// what it was before, while without admission it grows without bound.
#[test]
fn when_capacity_halves_the_limit_follows_and_interactive_latency_recovers() {
    let s = Scenario::parse(HALVING).unwrap();
    let (_, off) = run_recorded(&s, GatewayBuilder::bare()).unwrap();
    let (_, on) = run_recorded(&s, admission()).unwrap();

    let t0 = on.iter().map(|r| r.timings.received).min().unwrap();
    let halved = t0 + Duration::from_secs(200);
    let window = |records: &[CallRecord], from: f64, to: f64| {
        p99(lane(records, "interactive")
            .filter(|r| r.is_success())
            .filter(|r| {
                let at = secs(r.timings.received - t0);
                at >= from && at < to
            })
            .map(ttfb)
            .collect())
    };
    let before = window(&on, 60.0, 200.0);
    let after_on = window(&on, 260.0, 400.0);
    let after_off = window(&off, 260.0, 400.0);
    eprintln!(
        "interactive first-byte P99: {before:.2} s before; after, {after_on:.2} s with \
         admission, {after_off:.2} s without"
    );
    // Gradient2 lets latency run to 1.5x its baseline before it cuts; within 2x of before
    // is recovered.
    assert!(after_on <= 2.0 * before);
    assert!(
        after_off > 3.0 * before,
        "without admission the upstream's queue hurts"
    );

    // Requests in flight (each holds its admission slot from dispatch to its last byte).
    // From 30 s after the halving, sluice dispatches a request only while fewer than 26 are
    // in flight (the limit followed the new capacity of 20; before, it let about 24 through
    // and those already at the upstream drain at its new pace).
    let mut events: Vec<(Instant, i64)> = Vec::new();
    for r in on.iter().filter(|r| r.timings.dispatched.is_some()) {
        events.push((r.timings.dispatched.unwrap(), 1));
        events.push((r.timings.done.unwrap(), -1));
    }
    // Ends before starts at the same instant: a slot freed and taken again.
    events.sort_by_key(|(t, d)| (*t, *d));
    let (mut inflight, mut worst) = (0i64, 0i64);
    let mut last_over = halved;
    for (t, d) in events {
        if d > 0 && t > halved + Duration::from_secs(30) {
            worst = worst.max(inflight + 1);
        }
        if d > 0 && inflight + 1 > 26 {
            last_over = t;
        }
        inflight += d;
    }
    eprintln!(
        "last dispatch over 26 in flight: {:.1} s after the halving",
        secs(last_over - halved)
    );
    eprintln!("most in flight at a dispatch from 30 s after the halving: {worst}");
    assert!(
        worst <= 26,
        "dispatched with {worst} in flight for a capacity of 20"
    );
}
