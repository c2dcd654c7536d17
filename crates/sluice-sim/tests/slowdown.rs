//! A slower upstream is not an overload, in virtual time: the real gateway stack with its
//! defaults against a seeded simulated upstream that becomes six times slower for three
//! minutes at the same arrival rate, beside a plain proxy over the same traffic.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use sluice_core::CallRecord;
use sluice_gateway::GatewayBuilder;
use sluice_sim::harness::run_recorded;
use sluice_sim::scenario::Scenario;
use sluice_sim::variants;
use sluice_telemetry::slo::{Culprit, Facts, Measure, Objective, Slo, Verdict};
use tokio::time::Instant;

/// Complete answers at 5 a second from an upstream with no capacity limit, about 1.5 s each;
/// from 60 s to 240 s every answer takes six times as long (about 9 s), so about 45 must be
/// in flight to carry the same arrivals (arrival rate times latency).
const SLOWDOWN: &str = r#"
[scenario]
name = "slowdown"
description = "an upstream six times slower for three minutes, arrivals unchanged"
seed = 21
duration = "330s"
slo = "30s"

[upstreams.slow]
ttft_median = "500ms"
ttft_sigma = 0.3
per_token = "10ms"
tokens_per_chunk = 4
output_tokens_median = 100

[[upstreams.slow.degradations]]
from = "60s"
to = "240s"
latency_factor = 6.0

[models.review]
deployments = [{ provider = "slow", model = "review-large" }]

[[traffic]]
lane = "interactive"
model = "review"
rate = 5.0
prompt_tokens = 1000
stream = false
"#;

fn failed(records: &[CallRecord]) -> usize {
    records.iter().filter(|r| !r.is_success()).count()
}

/// The most requests in flight at the upstream at once, from `from` on.
fn most_in_flight(records: &[CallRecord], from: Instant) -> i64 {
    let mut events: Vec<(Instant, i64)> = Vec::new();
    for r in records.iter().filter(|r| r.timings.dispatched.is_some()) {
        events.push((r.timings.dispatched.unwrap(), 1));
        events.push((r.timings.done.unwrap(), -1));
    }
    events.sort_by_key(|(t, d)| (*t, *d));
    let (mut now, mut most) = (0, 0);
    for (t, d) in events {
        now += d;
        if t >= from {
            most = most.max(now);
        }
    }
    most
}

/// A six-fold slowdown at a constant arrival rate: sluice's default concurrency limit stays
/// at what the arrivals need, so no request is refused or runs out of time that the plain
/// proxy would have served, none waits in sluice's queue for long, and the SLO judge puts
/// every bad event on the upstream.
#[test]
fn a_six_fold_slowdown_is_carried_not_refused() {
    let s = Scenario::parse(SLOWDOWN).unwrap();
    let (_, plain) = run_recorded(&s, GatewayBuilder::bare()).unwrap();
    let (_, ours) = run_recorded(&s, variants::builder("sluice").unwrap()).unwrap();

    eprintln!(
        "failed: {} through sluice, {} through a plain proxy, of {}",
        failed(&ours),
        failed(&plain),
        ours.len()
    );
    assert!(ours.len() > 1_500, "{} requests", ours.len());
    assert!(
        failed(&ours) <= failed(&plain),
        "sluice turned the upstream's slowdown into its own errors: {:?}",
        ours.iter().find(|r| !r.is_success())
    );

    let t0 = ours.iter().map(|r| r.timings.received).min().unwrap();
    let slow_from = t0 + Duration::from_secs(90);
    let most = most_in_flight(&ours, slow_from);
    eprintln!("most in flight during the slowdown: {most}");
    assert!(
        most >= 40,
        "the limit held {most} in flight where about 45 are needed"
    );

    let mut waits: Vec<f64> = ours
        .iter()
        .filter_map(|r| r.timings.queue())
        .map(|d| d.as_secs_f64())
        .collect();
    waits.sort_by(f64::total_cmp);
    let p99 = waits[waits.len() * 99 / 100];
    eprintln!("queue wait in sluice, P99: {p99:.3} s");
    let most_wait = waits.last().copied().unwrap_or_default();
    eprintln!("longest: {most_wait:.2} s");
    // The slow start's window at the first requests, and the change itself, cost a
    // second or so; without the limit's judgement of the slowdown, P99 was 13 s.
    assert!(p99 < 1.5, "requests queued in sluice: P99 {p99:.2} s");
    assert!(most_wait < 5.0, "a request queued {most_wait:.2} s");

    // An objective of 5 s per answer: the slowdown breaks it, and it is the upstream's doing.
    let slo = Slo {
        name: Arc::from("answers"),
        objective: Objective::Latency {
            measure: Measure::Total,
            threshold: Duration::from_secs(5),
            target: 0.99,
        },
        lanes: Vec::new(),
        groups: Vec::new(),
    };
    let verdicts: Vec<Verdict> = ours
        .iter()
        .filter_map(|r| slo.judge(&Facts::of(r, Measure::Total, false)))
        .collect();
    let bad: Vec<Culprit> = verdicts
        .iter()
        .filter_map(|v| match v {
            Verdict::Bad(c) => Some(*c),
            Verdict::Good => None,
        })
        .collect();
    eprintln!("{} bad events of {}", bad.len(), verdicts.len());
    assert!(bad.len() > 500, "the slowdown breaks the objective");
    assert!(
        bad.iter().all(|c| *c == Culprit::UpstreamSlow),
        "culprits: {:?}",
        bad.iter().filter(|c| **c != Culprit::UpstreamSlow).count()
    );
}
