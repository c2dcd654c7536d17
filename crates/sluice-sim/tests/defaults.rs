//! sluice as it comes, in virtual time: no policy configured, against a provider limited to
//! 10 requests a second. The seed's incident (batch floods on one rate limit) must not
//! happen: upstream 429s stay under 0.5% of attempts, every request finishes, and no request
//! is retried past its attempts or the group's retry budget.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;

use sluice_core::{AttemptKind, CallRecord};
use sluice_gateway::GatewayBuilder;
use sluice_sim::harness::{Report, run_recorded};
use sluice_sim::scenario::Scenario;
use sluice_tail::RetryPolicy;

/// A provider of 600 requests a minute enforced 10 a second, interactive streams at
/// `interactive` a second for `secs`, and batch floods of `count` at each of `at`; no policy
/// in the gateway's configuration.
fn flood(secs: u64, interactive: f64, count: u64, at: &[u64], rate_headers: bool) -> Scenario {
    let mut text = format!(
        r#"
[scenario]
name = "flood"
description = "batch floods on a 10/s provider, sluice with its defaults"
seed = 11
duration = "{secs}s"
slo = "10s"

[upstreams.limited]
ttft_median = "800ms"
ttft_sigma = 0.4
per_token = "10ms"
tokens_per_chunk = 4
output_tokens_median = 100
rpm = 600
rpm_burst = 10
rate_headers = {rate_headers}

[models.review]
deployments = [{{ provider = "limited", model = "review-large" }}]

[[traffic]]
lane = "interactive"
model = "review"
rate = {interactive}
prompt_tokens = 1000
stream = true
"#
    );
    for t in at {
        text.push_str(&format!(
            "\n[[bursts]]\nlane = \"batch\"\nmodel = \"review\"\nat = \"{t}s\"\ncount = {count}\n\
             spread = \"1s\"\nprompt_tokens = 2000\nstream = false\n"
        ));
    }
    Scenario::parse(&text).unwrap()
}

/// Upstream 429s as a share of the attempts the upstream received.
fn rate_429(r: &Report) -> f64 {
    let u = &r.upstreams["limited"];
    u.rate_limited as f64 / u.requests as f64
}

/// No request made more attempts than `max_attempts`, and the retries of the whole run fit
/// the budget: its starting burst, its share of every request, and its floor over the run.
fn retries_within_budget(records: &[CallRecord], secs: u64) {
    let p = RetryPolicy::default();
    let mut most = 0;
    let mut retries = 0usize;
    for r in records {
        most = most.max(r.attempts.len());
        retries += r
            .attempts
            .iter()
            .filter(|a| a.kind == AttemptKind::Retry)
            .count();
    }
    assert!(
        most <= p.max_attempts as usize,
        "{most} attempts in one request"
    );
    let budget = p.burst + p.budget * records.len() as f64 + p.min_per_second * secs as f64;
    assert!(
        retries as f64 <= budget,
        "{retries} retries against a budget of {budget:.0}"
    );
}

fn statuses(r: &Report) -> HashMap<u16, u64> {
    r.summary.all.errors_by_status.clone().into_iter().collect()
}

/// The defaults' promise over a run of `secs`: 429s under 0.5% of attempts, every request
/// finished, retries within their bounds.
fn kept_the_promise(what: &str, on: &Report, records: &[CallRecord], secs: u64) {
    eprintln!(
        "{what}: {:.3}% of {} attempts 429, {} of {} failed: {:?}",
        rate_429(on) * 100.0,
        on.upstreams["limited"].requests,
        on.summary.all.count - on.summary.all.ok,
        on.summary.all.count,
        statuses(on)
    );
    assert!(
        rate_429(on) < 0.005,
        "{what}: {:.3}% 429s",
        rate_429(on) * 100.0
    );
    assert_eq!(
        on.summary.all.ok,
        on.summary.all.count,
        "{what}: every request finishes: {:?}",
        statuses(on)
    );
    retries_within_budget(records, secs);
}

#[test]
fn by_default_a_batch_flood_on_a_10_per_second_provider_meets_almost_no_429s() {
    // Interactive traffic first, then three floods of 1,000 documents: the batch-flood incident,
    // with 3,000 batch requests over about seven and a half minutes of the provider's limit.
    let s = flood(600, 2.0, 1_000, &[30, 200, 370], true);
    let (proxy, _) = run_recorded(&s, GatewayBuilder::bare()).unwrap();
    let (on, records) = run_recorded(&s, GatewayBuilder::new()).unwrap();
    eprintln!(
        "plain proxy: {:.1}% of attempts 429, {} of {} requests failed",
        rate_429(&proxy) * 100.0,
        proxy.summary.all.count - proxy.summary.all.ok,
        proxy.summary.all.count,
    );
    assert!(rate_429(&proxy) > 0.3, "the plain proxy meets the limit");
    kept_the_promise("defaults", &on, &records, 600);
}

#[test]
fn by_default_a_flood_at_a_cold_start_meets_almost_no_429s() {
    // The flood is the first traffic the gateway sees: nothing is known of the provider's
    // limit until its first answers say it.
    let s = flood(420, 1.0, 2_860, &[0], true);
    let (on, records) = run_recorded(&s, GatewayBuilder::new()).unwrap();
    kept_the_promise("cold flood", &on, &records, 420);
}

#[test]
fn by_default_a_provider_that_announces_no_limits_is_paced_by_its_429s() {
    // Only a 429 and its Retry-After say the provider is full, as many providers answer.
    let s = flood(600, 2.0, 1_000, &[30, 200, 370], false);
    let (on, records) = run_recorded(&s, GatewayBuilder::new()).unwrap();
    kept_the_promise("no rate headers", &on, &records, 600);
}
