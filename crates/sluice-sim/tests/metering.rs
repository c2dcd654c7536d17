//! Every call metered: usage as the upstream reported it, priced by the catalog, on the call
//! record.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use parking_lot::Mutex;
use sluice_core::CallRecord;
use sluice_economy::{Micros, Price};
use sluice_gateway::GatewayBuilder;
use sluice_sim::harness::run_with;
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
    let records = Arc::new(Mutex::new(Vec::new()));
    let sink = records.clone();
    let builder = GatewayBuilder::new()
        .price("alpha-chat", price)
        .on_record(Arc::new(move |r: &CallRecord| sink.lock().push(r.clone())));
    run_with(&s, builder).unwrap();
    let records = records.lock();
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
