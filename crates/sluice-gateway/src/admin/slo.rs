//! `GET /admin/slo`: each SLO, what it promises, its good and bad events since the gateway
//! started, and the share of its error budget left.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};
use sluice_telemetry::slo::{Objective, Slo, Verdict};

use crate::Gateway;

/// An SLO with its running counts.
#[derive(Debug)]
pub struct Judged {
    /// The SLO.
    pub slo: Slo,
    good: AtomicU64,
    bad: AtomicU64,
}

impl Judged {
    /// `slo`, nothing counted yet.
    pub fn new(slo: Slo) -> Self {
        Self {
            slo,
            good: AtomicU64::new(0),
            bad: AtomicU64::new(0),
        }
    }

    /// Counts one verdict.
    pub fn count(&self, v: Verdict) {
        let c = match v {
            Verdict::Good => &self.good,
            Verdict::Bad(_) => &self.bad,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    fn report(&self) -> Value {
        let (good, bad) = (
            self.good.load(Ordering::Relaxed),
            self.bad.load(Ordering::Relaxed),
        );
        let (kind, objective, target) = match self.slo.objective {
            Objective::Latency { target, .. } => ("latency", target, Some(target)),
            Objective::Availability { target } => ("availability", target, Some(target)),
            Objective::CacheShare { floor } => ("prompt_cache_share", floor, None),
        };
        let budget_left = target.filter(|_| good + bad > 0).map(|t| {
            let bad_share = bad as f64 / (good + bad) as f64;
            1.0 - bad_share / (1.0 - t)
        });
        json!({
            "name": self.slo.name,
            "kind": kind,
            "objective": objective,
            "good": good,
            "bad": bad,
            "budget_left": budget_left,
        })
    }
}

/// `GET /admin/slo`.
pub async fn show(State(gw): State<Arc<Gateway>>) -> Json<Value> {
    let slos: Vec<Value> = gw.slos.iter().map(Judged::report).collect();
    Json(json!({ "slos": slos }))
}
