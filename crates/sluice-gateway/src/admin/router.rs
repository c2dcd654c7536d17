//! `GET /admin/router`: what each automatic router believes, per task and candidate: its
//! posterior (alpha, beta, mean, lower credible bound, evidence), the output length and
//! cached share it expects, and how often it chose it (and explored it).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::Gateway;

/// `GET /admin/router`.
pub async fn show(State(gw): State<Arc<Gateway>>) -> Json<Value> {
    let routers: Vec<Value> = gw
        .routes
        .routers()
        .into_iter()
        .map(|(name, router)| {
            let r = router.lock();
            let tasks: Vec<Value> = r
                .tasks()
                .into_iter()
                .map(|(task, arms)| {
                    let candidates: Vec<Value> = r
                        .candidates
                        .iter()
                        .zip(&arms)
                        .map(|(group, a)| {
                            json!({
                                "group": &**group,
                                "alpha": a.belief.alpha,
                                "beta": a.belief.beta,
                                "mean": a.belief.mean(),
                                "lower": r.lower(&a.belief),
                                "clears_floor": r.lower(&a.belief) >= r.policy.floor,
                                "evidence": a.belief.evidence(),
                                "output_tokens": a.output.get(),
                                "cached_share": a.cached.get(),
                                "picks": a.picks,
                                "explored": a.explored,
                                "settled": a.settled,
                            })
                        })
                        .collect();
                    json!({"task": &*task, "candidates": candidates})
                })
                .collect();
            json!({
                "name": &**name,
                "candidates": r.candidates.iter().map(|c| &**c).collect::<Vec<_>>(),
                "floor": r.policy.floor,
                "confidence": r.policy.confidence,
                "explore": r.policy.explore,
                "memory": r.policy.memory,
                "latency_weight": r.policy.latency_weight,
                "good_answer_value": r.policy.good_answer_value,
                "revisit": r.policy.revisit,
                "tasks": tasks,
            })
        })
        .collect();
    Json(json!({ "routers": routers }))
}
