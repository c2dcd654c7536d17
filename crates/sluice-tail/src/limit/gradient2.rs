//! Gradient2: the limit follows the ratio of long-term to short-term latency.

use tokio::time::Instant;

use super::ema::ExpAvg;
use super::{Algorithm, Sample};

/// How much of a latency cut applies per window (growth applies `smoothing`, 0.2).
const CUT_SMOOTHING: f64 = 0.5;

/// Netflix `Gradient2Limit` (tolerance 1.5, smoothing 0.2 on growth and 0.5 on cuts, long
/// window 600),
/// plus a ×0.9 cut on drops, latency cuts taken from what was in flight, a headroom of
/// `max(4, √limit)` (Netflix's suggested square-root queue), and a
/// slow start: until the first cut, each window with latency at its baseline and the limit
/// at least half used doubles it, as TCP does. Without it, growth of 0.2 × headroom a window
/// took over a minute to bring a limit of 64 up to the 150 streams a busy upstream was
/// serving, and every request queued meanwhile.
#[derive(Clone, Debug, PartialEq)]
pub struct Gradient2 {
    limit: f64,
    min: usize,
    max: usize,
    long_rtt: ExpAvg,
    tolerance: f64,
    smoothing: f64,
    slow_start: bool,
    /// A fixed long-term latency to compare with, instead of the running average.
    reference: Option<f64>,
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
            slow_start: true,
            reference: None,
        }
    }

    /// Compares each window's latency with `reference` rather than with a running average
    /// of past windows. For latencies already expressed against their own long-term
    /// baseline ([`super::Normalized`]: 1.0 is normal): the running average would otherwise
    /// absorb a congestion that lasts, call it normal after a minute, and let the limit grow
    /// back into it while latency climbed.
    pub fn against(mut self, reference: f64, tolerance: f64) -> Self {
        self.reference = Some(reference);
        self.tolerance = tolerance.max(1.0);
        self
    }
}

impl Algorithm for Gradient2 {
    fn limit(&self) -> usize {
        self.limit as usize
    }

    fn update(&mut self, _: Instant, s: Sample) -> usize {
        let (lo, hi) = (self.min as f64, self.max as f64);
        if s.dropped {
            self.slow_start = false;
            self.limit = (self.limit * 0.9).floor().clamp(lo, hi);
            return self.limit();
        }
        let short = s.rtt.as_secs_f64().max(1e-9);
        let long = match self.reference {
            Some(r) => r,
            None => {
                let long = self.long_rtt.add(short);
                // Recover fast after a long overload: the baseline decays while far above
                // the present.
                if long / short > 2.0 {
                    self.long_rtt.value *= 0.95;
                }
                long
            }
        };
        if (s.inflight as f64) < self.limit / 2.0 {
            return self.limit();
        }
        let gradient = (self.tolerance * long / short).clamp(0.5, 1.0);
        if self.slow_start {
            if gradient >= 1.0 {
                self.limit = (self.limit * 2.0).clamp(lo, hi);
                return self.limit();
            }
            self.slow_start = false;
        }
        if gradient < 1.0 {
            // Latency says too much is in flight: the congestion happened at what was in
            // flight, so cut from there, not from a limit that was never reached (a limit of
            // 128 with 34 in flight took seven windows of cuts to get below 34).
            self.limit = self.limit.min((s.inflight as f64).max(lo));
        }
        let next = self.limit * gradient + self.limit.sqrt().max(4.0);
        // Cuts are smoothed half as much as growth: an upstream that lost capacity is followed
        // within seconds (with 0.2 both ways, 45 s to follow a halving), while growth stays
        // cautious.
        let smoothing = if next < self.limit {
            CUT_SMOOTHING
        } else {
            self.smoothing
        };
        let next = self.limit * (1.0 - smoothing) + next * smoothing;
        self.limit = next.clamp(lo, hi);
        self.limit()
    }

    fn raise_to(&mut self, limit: usize) {
        self.limit = self
            .limit
            .max(limit as f64)
            .clamp(self.min as f64, self.max as f64);
    }
}
