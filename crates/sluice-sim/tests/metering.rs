//! Every call metered: usage as the upstream reported it, priced by the catalog, on the call
//! record.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use sluice_core::CallRecord;
use sluice_economy::{Micros, Price};
use sluice_gateway::GatewayBuilder;
use sluice_sim::harness::run_recorded;
use sluice_sim::scenario::Scenario;

#[test]
fn each_answer_is_priced_from_its_reported_usage_and_unpriced_models_cost_nothing() {
    let s = Scenario::builtin("steady").unwrap().unwrap();
    let price = Price {
        input: Micros(2_000_000),
        cached_input: Micros(500_000),
        cache_write: Micros(2_000_000),
        output: Micros(8_000_000),
        published: None,
    };
    // Without hedges, so that each request's cost is its answer's alone (a losing hedge's
    // cost is the next test's).
    let builder = GatewayBuilder::new()
        .without_hedging()
        .price("alpha-chat", price);
    let (_, records) = run_recorded(&s, builder).unwrap();
    let total: u64 = records.iter().filter_map(|r| r.cost_micros).sum();
    assert!(total > 0);
    let (mut priced, mut unpriced) = (0, 0);
    for r in records.iter().filter(|r| r.is_success()) {
        let usage = r.usage.unwrap();
        assert!(
            usage.prompt_tokens > 0 && usage.completion_tokens > 0,
            "{r:?}"
        );
        match r.upstream.as_deref() {
            Some("alpha/alpha-chat") => {
                assert_eq!(r.cost_micros, Some(price.cost(&usage).0));
                // 800 prompt tokens at $2/M and ~120 out at $8/M: about $0.0026.
                assert!((1_000..10_000).contains(&r.cost_micros.unwrap()), "{r:?}");
                priced += 1;
            }
            _ => {
                assert_eq!(r.cost_micros, None);
                unpriced += 1;
            }
        }
    }
    assert!(priced > 1_000 && unpriced > 1_000, "{priced} {unpriced}");
}

/// A thousand requests of one tenant at the same instant, against credits for about thirty:
/// each is reserved at its worst case before it leaves, so the spend stays within the credits
/// (give or take what one call used beyond its estimate), and the rest are refused with 402
/// at once, costing the upstream nothing.
#[test]
fn a_thousand_requests_at_once_never_overspend_a_tight_budget() {
    let text = r#"
[scenario]
name = "budget"
description = "A burst of 1,000 against tight credits"
seed = 4
duration = "30s"

[gateway]
first_byte_timeout = "60s"
idle_timeout = "30s"

[upstreams.alpha]
ttft_median = "800ms"
per_token = "10ms"
output_tokens_median = 120

[models.chat]
deployments = [{ provider = "alpha", model = "alpha-chat" }]

[[bursts]]
lane = "interactive"
tenant = "acme"
model = "chat"
at = "1s"
count = 1000
spread = "0s"
prompt_tokens = 800
max_tokens = 200
stream = false
"#;
    let s = Scenario::parse(text).unwrap();
    let price = Price {
        input: Micros(2_000_000),
        cached_input: Micros(500_000),
        cache_write: Micros(2_000_000),
        output: Micros(8_000_000),
        published: None,
    };
    let credits = Micros(100_000);
    let limits = sluice_economy::Limits {
        credits: Some(credits),
        ..sluice_economy::Limits::default()
    };
    let builder = GatewayBuilder::new()
        .price("alpha-chat", price)
        .tenant_limits("acme", limits);
    let (report, records) = run_recorded(&s, builder).unwrap();
    let ok: Vec<&CallRecord> = records.iter().filter(|r| r.is_success()).collect();
    let refused = records.iter().filter(|r| r.status == 402).count();
    let spent: u64 = ok.iter().filter_map(|r| r.cost_micros).sum();
    // The largest worst case one call could reserve: its prompt and 200 output tokens.
    let one_reservation = 2 * 1_000 + 8 * 200;
    eprintln!(
        "{} served, {refused} refused, spent {spent} of {}",
        ok.len(),
        credits.0
    );
    assert_eq!(ok.len() + refused, 1_000);
    assert!(ok.len() >= 20, "{} served", ok.len());
    assert!(spent <= credits.0 + one_reservation, "spent {spent}");
    assert_eq!(report.upstreams["alpha"].requests, ok.len() as u64);
}

/// Hedges and retries are paid for by the request that caused them: an attempt that lost
/// the race (the upstream read its prompt) adds its prompt at the input price to the call's
/// cost, apart as `extra_cost_micros`; a call with no such attempt has none.
#[test]
fn hedges_that_lose_are_billed_to_the_request_that_sent_them() {
    let s = Scenario::builtin("heavy-tail").unwrap().unwrap();
    let price = Price {
        input: Micros(2_000_000),
        cached_input: Micros(500_000),
        cache_write: Micros(2_000_000),
        output: Micros(8_000_000),
        published: None,
    };
    let mut builder = sluice_sim::variants::builder("+hedging").unwrap();
    for model in ["alpha-chat", "beta-chat"] {
        builder = builder.price(model, price);
    }
    let (_, records) = run_recorded(&s, builder).unwrap();
    let (mut hedged, mut extra_total, mut cost_total) = (0, 0, 0);
    for r in &records {
        let lost = r
            .attempts
            .iter()
            .filter(|a| a.outcome == sluice_core::AttemptOutcome::Lost)
            .count() as u64;
        let prompt_cost = sluice_core::Usage {
            prompt_tokens: r.prompt_estimate,
            ..sluice_core::Usage::default()
        };
        assert_eq!(
            r.extra_cost_micros,
            lost * price.cost(&prompt_cost).0,
            "{r:?}"
        );
        if let (true, Some(usage)) = (r.is_success(), r.usage) {
            assert_eq!(
                r.cost_micros,
                Some(price.cost(&usage).0 + r.extra_cost_micros),
                "{r:?}"
            );
        }
        hedged += u64::from(lost > 0);
        extra_total += r.extra_cost_micros;
        cost_total += r.cost_micros.unwrap_or(0);
    }
    eprintln!(
        "{hedged} of {} calls paid for a losing attempt: {extra_total} of {cost_total} micro-units",
        records.len()
    );
    assert!(hedged > 50, "{hedged}");
    // Hedges are a few percent of calls and cost a prompt each: a small part of the bill.
    assert!(extra_total > 0 && extra_total * 10 < cost_total);
}
