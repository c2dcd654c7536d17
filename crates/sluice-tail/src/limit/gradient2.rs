//! Gradient2: the limit follows the ratio of long-term to short-term latency.

use tokio::time::Instant;

use super::{Algorithm, Sample};

/// An exponential average that starts as a plain mean over its first `warmup` samples.
#[derive(Clone, Debug, PartialEq)]
struct ExpAvg {
    value: f64,
    count: u32,
    warmup: u32,
    factor: f64,
}

impl ExpAvg {
    fn new(window: u32, warmup: u32) -> Self {
        Self {
            value: 0.0,
            count: 0,
            warmup,
            factor: 2.0 / (f64::from(window) + 1.0),
        }
    }

    fn add(&mut self, x: f64) -> f64 {
        if self.count < self.warmup {
            self.count += 1;
            self.value += (x - self.value) / f64::from(self.count);
        } else {
            self.value = self.value * (1.0 - self.factor) + x * self.factor;
        }
        self.value
    }
}

/// Netflix `Gradient2Limit` (tolerance 1.5, smoothing 0.2, queue 4, long window 600), plus a
/// ×0.9 cut on drops.
#[derive(Clone, Debug, PartialEq)]
pub struct Gradient2 {
    limit: f64,
    min: usize,
    max: usize,
    long_rtt: ExpAvg,
    tolerance: f64,
    smoothing: f64,
    queue: f64,
}

impl Gradient2 {
    /// Starts at `initial`, stays within `min..=max`.
    pub fn new(initial: usize, min: usize, max: usize) -> Self {
        let (limit, min, max) = super::bounded(initial, min, max);
        Self {
            limit,
            min,
            max,
            long_rtt: ExpAvg::new(600, 10),
            tolerance: 1.5,
            smoothing: 0.2,
            queue: 4.0,
        }
    }
}

impl Algorithm for Gradient2 {
    fn limit(&self) -> usize {
        self.limit as usize
    }

    fn update(&mut self, _: Instant, s: Sample) -> usize {
        let (lo, hi) = (self.min as f64, self.max as f64);
        if s.dropped {
            self.limit = (self.limit * 0.9).floor().clamp(lo, hi);
            return self.limit();
        }
        let short = s.rtt.as_secs_f64().max(1e-9);
        let long = self.long_rtt.add(short);
        // Recover fast after a long overload: the baseline decays while far above the present.
        if long / short > 2.0 {
            self.long_rtt.value *= 0.95;
        }
        if (s.inflight as f64) < self.limit / 2.0 {
            return self.limit();
        }
        let gradient = (self.tolerance * long / short).clamp(0.5, 1.0);
        let next = self.limit * gradient + self.queue;
        let next = self.limit * (1.0 - self.smoothing) + next * self.smoothing;
        self.limit = next.clamp(lo, hi);
        self.limit()
    }
}
