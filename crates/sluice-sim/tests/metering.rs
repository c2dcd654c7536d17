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
    };
    let builder = GatewayBuilder::new().price("alpha-chat", price);
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
