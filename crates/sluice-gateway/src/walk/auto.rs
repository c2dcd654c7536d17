//! The automatic router's part of the route step: each candidate's facts (its price per
//! token, its deployments' best observed P95 first byte, whether one could take the call
//! now) handed to `sluice-routing`'s router, whose choice is recorded with what it weighed.
//! The other candidates, in the router's order, become the request's first fallbacks.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use sluice_core::{AutoChoice, ChatRequest, Phase, RouteTaken};
use sluice_routing::ModelGroup;
use sluice_routing::auto::{Ask, Offer, Router, TokenPrice};
use tokio::time::Instant;

use super::call::{Call, Chosen, Routed};
use super::dispatch::window_key;
use crate::Gateway;

/// Samples a deployment's window needs before its P95 first byte is trusted.
const P95_MIN_SAMPLES: u64 = 20;

/// What one candidate offers now.
fn offer(gw: &Gateway, group: &ModelGroup, stream: bool, now: Instant) -> Offer {
    let price = group.deployments.first().and_then(|d| d.price).map(|p| {
        // Micro-units per million tokens, to USD per token.
        let per_token = |m: sluice_economy::Micros| m.0 as f64 * 1e-12;
        TokenPrice {
            input: per_token(p.input),
            cached_input: per_token(p.cached_input),
            output: per_token(p.output),
        }
    });
    let ttfb_p95 = group
        .deployments
        .iter()
        .filter_map(|d| {
            gw.observers.telemetry.windows().quantile(
                &window_key(group, d, stream),
                Phase::Ttfb,
                now,
                0.95,
                P95_MIN_SAMPLES,
            )
        })
        .min();
    let available = group.deployments.iter().any(|d| d.healthy(now));
    Offer {
        price,
        ttfb_p95,
        available,
    }
}

/// Chooses among `router`'s candidates for `request` (declaring `task`): the winner, the
/// other candidates in the order to fall back to, and the choice with what it weighed.
pub fn choose<'g>(
    gw: &'g Gateway,
    call: &Call,
    router: &Mutex<Router>,
    request: &ChatRequest,
    task: Option<&str>,
    asked: Option<Duration>,
) -> Result<Chosen<'g>, sluice_core::GatewayError> {
    let now = Instant::now();
    let mut r = router.lock();
    let groups = r
        .candidates
        .iter()
        .map(|c| gw.routes.group(c))
        .collect::<Result<Vec<&ModelGroup>, _>>()?;
    let offers: Vec<Offer> = groups
        .iter()
        .map(|g| offer(gw, g, request.stream, now))
        .collect();
    let received = call.record().timings.received;
    let ask = Ask {
        prompt_tokens: request.prompt_estimate(),
        max_tokens: request.max_tokens(),
        time_left: asked.map(|b| b.saturating_sub(now.saturating_duration_since(received))),
    };
    let choice = r.choose(task, &ask, &offers);
    let (floor, good_answer_value) = (r.policy.floor, r.policy.good_answer_value);
    let name = r.name.clone();
    drop(r);
    let winner = groups[choice.winner()];
    let rest = choice.order[1..].iter().map(|&i| groups[i]).collect();
    let route = Some(RouteTaken {
        route: name,
        rule: Arc::from(choice.why.label()),
        group: winner.name.clone(),
        unknown_task: false,
        auto: Some(Box::new(AutoChoice {
            task: choice.task,
            why: choice.why.label(),
            floor,
            good_answer_value,
            candidates: choice.estimates,
            wants_json: request
                .field("response_format")
                .is_some_and(|v| memchr::memmem::find(v, b"json").is_some()),
        })),
    });
    Ok(Chosen {
        group: winner,
        others: rest,
        routed: Routed {
            group: winner.name.clone(),
            route,
        },
    })
}

/// The `x-sluice-route` text of an automatic choice: the router, why, the winner, the task
/// and the mode (`floor 0.80`, or `value $0.0200` a good answer), then each candidate's
/// believed quality, its lower bound and expected cost.
pub fn explain(route: &RouteTaken, auto: &AutoChoice) -> String {
    let mode = match auto.good_answer_value {
        Some(v) => format!("value ${v:.4}"),
        None => format!("floor {:.2}", auto.floor),
    };
    let mut out = format!(
        "{}: {} -> {} (task {}, {mode};",
        route.route, auto.why, route.group, auto.task
    );
    for c in &auto.candidates {
        let cost = c
            .cost
            .map_or("unpriced".to_string(), |u| format!("${u:.6}"));
        out.push_str(&format!(
            " {} q={:.2} lo={:.2} {cost}{}{}",
            c.group,
            c.mean,
            c.lower,
            if c.fits { "" } else { " too-slow" },
            if c.available { "" } else { " unavailable" },
        ));
    }
    out.push(')');
    out
}
