//! `GET /admin/upstreams`: what every deployment's tail policies think right now — breaker
//! state and counts, concurrency limit, in flight and queued per lane (and how many tenants
//! wait), a 429's pause, what the pacer holds of the rate limits — and
//! what each group's hedging and retry budgets hold.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};
use sluice_tail::BreakerState;
use sluice_tail::pace::DimensionState;
use tokio::time::Instant;

use crate::Gateway;
use sluice_routing::{Deployment, ModelGroup};

/// `GET /admin/upstreams`.
pub async fn upstreams(State(gw): State<Arc<Gateway>>) -> Json<Value> {
    let now = Instant::now();
    let groups: Vec<Value> = gw.routes().groups().map(|g| group(&gw, g, now)).collect();
    Json(json!({ "groups": groups }))
}

fn ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn group(gw: &Gateway, g: &ModelGroup, now: Instant) -> Value {
    json!({
        "group": &*g.name,
        "timeout_ms": g.timeout.map(ms),
        "hedge_budget": g.hedging.as_ref().map(|h| h.budget.balance()),
        "hedges_waiting": g.hedging.as_ref().map(|h| h.budget.waiting()),
        "retry_budget": g.retrying.as_ref().map(|r| r.budget.lock().balance()),
        "deployments": g.deployments.iter().map(|d| deployment(gw, d, now)).collect::<Vec<_>>(),
    })
}

fn deployment(gw: &Gateway, d: &Deployment, now: Instant) -> Value {
    let breaker = d.breaker.as_ref().map(|b| {
        let s = b.lock().snapshot(now);
        let until = match s.state {
            BreakerState::Closed => None,
            BreakerState::Open { until } => Some(until),
            BreakerState::HalfOpen { next_probe, .. } => Some(next_probe),
        };
        json!({
            "state": s.state.label(),
            "next_call_in_ms": until.map(|u| ms(u.saturating_duration_since(now))),
            "window_calls": s.calls,
            "window_failures": s.failures,
            "window_slow": s.slow,
            "failures_in_a_row": s.streak,
            "opened": s.opened,
            "closed": s.closed,
        })
    });
    let admission = d.limiter.as_ref().map(|l| {
        let s = l.stats();
        let lanes: Vec<Value> = s
            .lanes
            .iter()
            .zip(&s.tenants_waiting)
            .map(|((lane, inflight, queued), tenants)| {
                json!({
                    "lane": &**lane,
                    "inflight": inflight,
                    "queued": queued,
                    "tenants_queued": tenants,
                })
            })
            .collect();
        let pace = |d: Option<DimensionState>| {
            d.map(
                |d| json!({"per_minute": d.per_minute, "burst": d.burst, "available": d.available}),
            )
        };
        json!({
            "limit": s.limit,
            "inflight": s.inflight,
            "paused_for_ms": s.paused_until.map(|p| ms(p.saturating_duration_since(now))),
            "pace_requests": pace(s.requests_pace),
            "pace_tokens": pace(s.tokens_pace),
            "lanes": lanes,
            "refused_at_arrival": s.refused_at_arrival,
            "waited_out": s.timed_out,
        })
    });
    json!({
        "name": &*d.name,
        "model": &*d.model,
        "weight": d.weight,
        "cooling_after_429": gw.is_cooling(&d.name, now),
        "breaker": breaker,
        "admission": admission,
    })
}
