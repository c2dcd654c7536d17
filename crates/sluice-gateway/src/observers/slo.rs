//! Each SLO with its running counts of good and bad calls since the gateway started.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};
use sluice_telemetry::slo::{Objective, Slo, Verdict};

/// An SLO with its running counts.
#[derive(Debug)]
pub struct Judged {
    /// The SLO.
    pub slo: Slo,
    good: AtomicU64,
    bad: AtomicU64,
}

/// Exports each SLO's objective (`sluice_slo_objective`), for budgets computed from it.
pub fn export_objectives(telemetry: &sluice_telemetry::Telemetry, slos: &[Slo]) {
    for slo in slos {
        if let Some(target) = slo.target() {
            telemetry.slo_objective(&slo.name, target);
        }
    }
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

    pub(crate) fn report(&self) -> Value {
        let (good, bad) = (
            self.good.load(Ordering::Relaxed),
            self.bad.load(Ordering::Relaxed),
        );
        let (kind, objective, target) = match self.slo.objective {
            Objective::Latency { target, .. } => ("latency", target, Some(target)),
            Objective::Availability { target } => ("availability", target, Some(target)),
            Objective::CacheShare { floor } => ("prompt_cache_share", floor, None),
            Objective::BatchWindow { target } => ("batch_window", target, Some(target)),
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
