//! One window's figures: percentiles (nearest rank), where the slowest calls' time went, and
//! the rates the explainer compares.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Summary;

/// A lane's percentiles, in seconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LaneStats {
    /// Calls.
    pub calls: u64,
    /// First byte, P50.
    pub p50_ttfb: f64,
    /// First byte, P99.
    pub p99_ttfb: f64,
    /// Whole call, P50.
    pub p50_total: f64,
    /// Whole call, P99.
    pub p99_total: f64,
    /// Whole call, P999.
    pub p999_total: f64,
}

/// A window's figures (times in seconds, rates as shares of its calls).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Stats {
    /// Calls.
    pub calls: u64,
    /// Whole call, P50 over every lane.
    pub p50_total: f64,
    /// Whole call, P99.
    pub p99_total: f64,
    /// Whole call, P999.
    pub p999_total: f64,
    /// Per lane.
    pub lanes: Vec<(String, LaneStats)>,
    /// The slowest 5% of calls, on average: time before dispatch.
    pub slow_queue: f64,
    /// ... dispatch to the upstream's first byte, outside the answering attempt: failed
    /// attempts, pauses after 429s and waits for a slot before a retry.
    pub slow_waits: f64,
    /// ... the upstream's own time, from its attempt's start: the answering attempt's first
    /// byte, or how long an attempt waited for one that never came.
    pub slow_attempt: f64,
    /// ... first byte to the end (the stream).
    pub slow_stream: f64,
    /// Share of calls in the `batch` lane.
    pub batch_share: f64,
    /// Share that met the upstream's rate limit (a 429, or a wait for its pace).
    pub rate_limited: f64,
    /// Share answered 5xx.
    pub errors: f64,
    /// Share hedged.
    pub hedged: f64,
    /// Share retried.
    pub retried: f64,
    /// Share served from a cache.
    pub cache_hits: f64,
    /// The answering attempts' own first byte (from each attempt's start), P99, over calls
    /// an upstream answered; `None` when no call had a first byte.
    pub attempt_ttfb_p99: Option<f64>,
    /// Calls whose attempts went and never had a first byte (not in the P99 above).
    pub unanswered: u64,
    /// The same per upstream.
    pub upstream_p99: Vec<(String, f64)>,
}

/// The `q` quantile of `v` (sorted in place), nearest rank; 0 for none.
fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

impl Stats {
    /// The figures of `calls`.
    pub fn of(calls: &[Summary]) -> Self {
        let n = calls.len();
        if n == 0 {
            return Self::default();
        }
        let share =
            |f: &dyn Fn(&Summary) -> bool| calls.iter().filter(|c| f(c)).count() as f64 / n as f64;
        let mut totals: Vec<f64> = calls.iter().map(|c| c.total.as_secs_f64()).collect();
        let p50_total = quantile(&mut totals, 0.5);
        let p99_total = quantile(&mut totals, 0.99);
        let p999_total = quantile(&mut totals, 0.999);
        let mut by_lane: BTreeMap<&str, Vec<&Summary>> = BTreeMap::new();
        for c in calls {
            by_lane.entry(&c.lane).or_default().push(c);
        }
        let lanes = by_lane
            .into_iter()
            .map(|(lane, cs)| {
                let mut ttfb: Vec<f64> = cs.iter().map(|c| c.ttfb.as_secs_f64()).collect();
                let mut total: Vec<f64> = cs.iter().map(|c| c.total.as_secs_f64()).collect();
                (
                    lane.to_string(),
                    LaneStats {
                        calls: cs.len() as u64,
                        p50_ttfb: quantile(&mut ttfb, 0.5),
                        p99_ttfb: quantile(&mut ttfb, 0.99),
                        p50_total: quantile(&mut total, 0.5),
                        p99_total: quantile(&mut total, 0.99),
                        p999_total: quantile(&mut total, 0.999),
                    },
                )
            })
            .collect();
        // The slowest 5% (at least one call): where their time went.
        let mut slowest: Vec<&Summary> = calls.iter().collect();
        slowest.sort_by_key(|c| std::cmp::Reverse(c.total));
        slowest.truncate((n / 20).max(1));
        let mean = |f: &dyn Fn(&Summary) -> f64| {
            slowest.iter().map(|c| f(c)).sum::<f64>() / slowest.len() as f64
        };
        let slow_queue = mean(&|c| c.queue.as_secs_f64());
        let slow_waits = mean(&|c| c.upstream_ttfb.saturating_sub(c.attempt_ttfb).as_secs_f64());
        let slow_attempt = mean(&|c| c.attempt_own.as_secs_f64());
        let slow_stream = mean(&|c| c.total.saturating_sub(c.ttfb).as_secs_f64());
        let reached: Vec<&Summary> = calls
            .iter()
            .filter(|c| !c.cache_hit && !c.attempt_ttfb.is_zero())
            .collect();
        let mut all: Vec<f64> = reached
            .iter()
            .map(|c| c.attempt_ttfb.as_secs_f64())
            .collect();
        let mut by_upstream: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for c in &reached {
            by_upstream
                .entry(&c.upstream)
                .or_default()
                .push(c.attempt_ttfb.as_secs_f64());
        }
        Self {
            calls: n as u64,
            p50_total,
            p99_total,
            p999_total,
            lanes,
            slow_queue,
            slow_waits,
            slow_attempt,
            slow_stream,
            batch_share: share(&|c| &*c.lane == "batch"),
            rate_limited: share(&|c| c.rate_limited),
            errors: share(&|c| c.status >= 500),
            hedged: share(&|c| c.hedged),
            retried: share(&|c| c.retried),
            cache_hits: share(&|c| c.cache_hit),
            attempt_ttfb_p99: (!all.is_empty()).then(|| quantile(&mut all, 0.99)),
            unanswered: calls
                .iter()
                .filter(|c| !c.cache_hit && c.attempt_ttfb.is_zero() && !c.attempt_own.is_zero())
                .count() as u64,
            upstream_p99: by_upstream
                .into_iter()
                .map(|(u, mut v)| (u.to_string(), quantile(&mut v, 0.99)))
                .collect(),
        }
    }
}
