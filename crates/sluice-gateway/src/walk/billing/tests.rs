#![allow(clippy::unwrap_used)]

use sluice_core::{Attempt, RequestId};
use sluice_economy::Micros;
use tokio::time::Instant;

use super::*;

const PRICE: Price = Price {
    input: Micros(2_000_000),
    cached_input: Micros(500_000),
    cache_write: Micros(2_000_000),
    output: Micros(8_000_000),
    published: None,
};

fn priced(price: Option<Price>) -> Priced {
    Priced {
        model: Arc::from("m"),
        price,
    }
}

/// A call of a 1,000-token prompt whose attempts ended so, the upstream named when one
/// answered.
fn record(outcomes: &[AttemptOutcome], usage: Option<Usage>) -> CallRecord {
    let now = Instant::now();
    let mut r = CallRecord::new(RequestId::generate(), now);
    r.prompt_estimate = 1_000;
    for o in outcomes {
        let mut a = Attempt::start(Arc::from("up"), now);
        a.outcome = *o;
        r.attempts.push(a);
    }
    if outcomes.contains(&AttemptOutcome::Ok) {
        r.upstream = Some(Arc::from("up"));
    }
    r.usage = usage;
    r
}

fn usage(prompt: u64, completion: u64) -> Usage {
    Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        ..Usage::default()
    }
}

#[test]
fn an_answer_is_settled_at_its_usage_and_price() {
    let r = record(&[AttemptOutcome::Ok], Some(usage(1_000, 100)));
    let s = settlement(&r, 200, &[priced(Some(PRICE))], Some(0), 0);
    assert_eq!(s.usage, Some(usage(1_000, 100)));
    assert!(!s.estimated && !s.costs.unpriced);
    assert_eq!(s.costs.total(), Some(2_000 + 800));
    assert_eq!(s.reservation, (1_100, 2_800));
    assert_eq!(s.prompt_cache, Some((0, 0)));
}

#[test]
fn an_answer_without_usage_is_settled_by_an_estimate_never_zero() {
    let r = record(&[AttemptOutcome::Ok], None);
    let s = settlement(&r, 200, &[priced(Some(PRICE))], Some(0), 401);
    assert!(s.estimated);
    assert_eq!(
        s.usage,
        Some(usage(1_000, 101)),
        "a token per four bytes, rounded up"
    );
    assert_eq!(s.reservation.0, 1_101);
    // A failed call reports nothing and is not estimated.
    let failed = record(
        &[AttemptOutcome::Failed(ErrorKind::UpstreamServerError)],
        None,
    );
    let s = settlement(&failed, 502, &[priced(Some(PRICE))], None, 0);
    assert_eq!((s.usage, s.estimated), (None, false));
}

#[test]
fn an_unpriced_model_that_worked_leaves_the_cost_unknown() {
    let r = record(&[AttemptOutcome::Ok], Some(usage(1_000, 100)));
    let s = settlement(&r, 200, &[priced(None)], Some(0), 0);
    assert!(s.costs.unpriced);
    assert_eq!(s.prompt_cache, None);
    // A hedge that lost on an unpriced deployment: the extra it ran up is unknown too.
    let hedged = record(
        &[AttemptOutcome::Ok, AttemptOutcome::Lost],
        Some(usage(1_000, 100)),
    );
    let s = settlement(
        &hedged,
        200,
        &[priced(Some(PRICE)), priced(None)],
        Some(0),
        0,
    );
    assert!(s.costs.unpriced);
    // One refused before it worked on anything costs nothing, known.
    let refused = record(
        &[
            AttemptOutcome::Ok,
            AttemptOutcome::Failed(ErrorKind::UpstreamConnect),
        ],
        Some(usage(1_000, 100)),
    );
    let s = settlement(
        &refused,
        200,
        &[priced(Some(PRICE)), priced(None)],
        Some(0),
        0,
    );
    assert!(!s.costs.unpriced);
}

#[test]
fn a_call_no_upstream_worked_on_costs_nothing_and_its_row_says_zero_not_unknown() {
    let r = record(&[], None);
    let s = settlement(&r, 402, &[], None, 0);
    assert_eq!((s.costs.total(), s.costs.unpriced), (None, false));
    let mut settled = r;
    settled.unpriced = s.costs.unpriced;
    assert_eq!(entry(&settled, None).cost_micros, Some(0));
    settled.unpriced = true;
    assert_eq!(entry(&settled, None).cost_micros, None);
}

#[test]
fn a_stream_the_client_cut_is_billed_for_what_the_upstream_produced() {
    use sluice_core::record::CLIENT_CLOSED;
    // Read on to its usage: billed at the usage, as any answer.
    let read_on = record(&[AttemptOutcome::Ok], Some(usage(1_000, 300)));
    let s = settlement(&read_on, CLIENT_CLOSED, &[priced(Some(PRICE))], Some(0), 80);
    assert!(!s.estimated);
    assert_eq!(s.costs.total(), Some(2_000 + 2_400));
    assert_eq!(s.costs.extra, 0);
    // Cut off before its usage came (a bound reached): estimated from the bytes produced,
    // flagged, and the prompt is not charged a second time as a cancelled attempt's.
    let mut bounded = record(&[AttemptOutcome::Cancelled], None);
    bounded.upstream = Some(Arc::from("up"));
    let s = settlement(
        &bounded,
        CLIENT_CLOSED,
        &[priced(Some(PRICE))],
        Some(0),
        400,
    );
    assert!(s.estimated);
    assert_eq!(s.usage, Some(usage(1_000, 100)));
    assert_eq!((s.costs.answer, s.costs.extra), (Some(2_000 + 800), 0));
    // A client that left before any answer: the prompt the upstream read, no estimate.
    let early = record(&[AttemptOutcome::Cancelled], None);
    let s = settlement(&early, CLIENT_CLOSED, &[priced(Some(PRICE))], None, 0);
    assert!(!s.estimated);
    assert_eq!(s.costs.total(), Some(2_000));
}
