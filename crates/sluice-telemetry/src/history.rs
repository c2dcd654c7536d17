//! The latency trend the server already holds: the recent calls it keeps for the incident
//! explainer, cut into steps of a few seconds, with per step and lane what clients waited
//! (arrival to the last byte, P50 to P999, and to the first byte, P99) beside what the
//! upstream's answering attempts took (their own first byte, P99). A page opened during an
//! incident shows the minutes before it, not only what it polls from then on.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::diagnose::Summary;

/// One step of one lane.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Step {
    /// Seconds before now at which the step ends (0 for the newest).
    pub ago_seconds: u64,
    /// Calls that ended in it.
    pub calls: u64,
    /// What clients waited for the last byte, seconds: P50, P95, P99, P999.
    pub total: [f64; 4],
    /// What clients waited for the first byte, P99, seconds.
    pub ttfb_p99: f64,
    /// The answering attempts' own first byte, P99, seconds; `None` when no call of the step
    /// had one (never a 0 for calls that had none).
    pub attempt_ttfb_p99: Option<f64>,
}

/// The trend, per lane.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct History {
    /// The step, seconds.
    pub step_seconds: u64,
    /// The span the kept calls cover, seconds (the ring holds a number of calls, not a time).
    pub covers_seconds: u64,
    /// Each lane's steps, oldest first; steps with no call are left out.
    pub lanes: BTreeMap<String, Vec<Step>>,
}

/// The `q` quantile of sorted `v`, nearest rank; 0 for none.
fn rank(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[i - 1]
}

/// The trend of `calls` (each with how long ago it ended), in steps of `step`.
pub fn history(calls: &[(Duration, Summary)], step: Duration) -> History {
    let step_s = step.as_secs().max(1);
    let mut cells: BTreeMap<(String, u64), Vec<&Summary>> = BTreeMap::new();
    let mut oldest = 0;
    for (ago, s) in calls {
        let bucket = ago.as_secs() / step_s;
        oldest = oldest.max(ago.as_secs());
        cells
            .entry((s.lane.to_string(), bucket))
            .or_default()
            .push(s);
    }
    let mut lanes: BTreeMap<String, Vec<Step>> = BTreeMap::new();
    for ((lane, bucket), cs) in cells {
        let sorted = |f: &dyn Fn(&Summary) -> Option<f64>| {
            let mut v: Vec<f64> = cs.iter().filter_map(|c| f(c)).collect();
            v.sort_by(f64::total_cmp);
            v
        };
        let total = sorted(&|c| Some(c.total.as_secs_f64()));
        let ttfb = sorted(&|c| Some(c.ttfb.as_secs_f64()));
        let attempt =
            sorted(&|c| (!c.attempt_ttfb.is_zero()).then_some(c.attempt_ttfb.as_secs_f64()));
        lanes.entry(lane).or_default().push(Step {
            ago_seconds: bucket * step_s,
            calls: cs.len() as u64,
            total: [0.5, 0.95, 0.99, 0.999].map(|q| rank(&total, q)),
            ttfb_p99: rank(&ttfb, 0.99),
            attempt_ttfb_p99: (!attempt.is_empty()).then(|| rank(&attempt, 0.99)),
        });
    }
    for steps in lanes.values_mut() {
        steps.sort_by_key(|s| std::cmp::Reverse(s.ago_seconds));
    }
    History {
        step_seconds: step_s,
        covers_seconds: oldest,
        lanes,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn call(lane: &str, total_ms: u64, attempt_ms: u64) -> Summary {
        let ms = Duration::from_millis;
        Summary {
            lane: Arc::from(lane),
            upstream: Arc::from("east"),
            status: 200,
            queue: ms(1),
            upstream_ttfb: ms(total_ms / 2),
            attempt_ttfb: ms(attempt_ms),
            attempt_own: ms(attempt_ms),
            ttfb: ms(total_ms / 2),
            total: ms(total_ms),
            rate_limited: false,
            hedged: false,
            retried: false,
            cache_hit: false,
        }
    }

    #[test]
    fn steps_hold_what_clients_waited_beside_the_attempts() {
        let mut calls = Vec::new();
        // Three minutes ago, a calm step; now, clients wait 20 s while attempts take 1 s.
        for i in 0..100 {
            calls.push((Duration::from_secs(185), call("interactive", 900 + i, 500)));
            calls.push((
                Duration::from_secs(3),
                call("interactive", 20_000 + i, 1_000),
            ));
        }
        calls.push((Duration::from_secs(4), call("batch", 30_000, 1_100)));
        let h = history(&calls, Duration::from_secs(10));
        assert_eq!(h.step_seconds, 10);
        assert_eq!(h.covers_seconds, 185);
        let steps = &h.lanes["interactive"];
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[0].ago_seconds, 180, "oldest first");
        assert!((steps[0].total[2] - 0.998).abs() < 1e-9, "{:?}", steps[0]);
        assert!((steps[0].total[3] - 0.999).abs() < 1e-9, "{:?}", steps[0]);
        assert!(steps[1].total[2] > 20.0 && steps[1].attempt_ttfb_p99.unwrap() <= 1.0);
        assert_eq!(h.lanes["batch"][0].calls, 1);
    }
}
