//! AIMD: +1 per sample while the upstream is at least half used, ×0.9 on a drop.

use std::time::Duration;

use tokio::time::Instant;

use super::{Algorithm, Sample};

/// Additive increase, multiplicative decrease (Netflix `AIMDLimit`).
#[derive(Clone, Debug, PartialEq)]
pub struct Aimd {
    limit: f64,
    min: usize,
    max: usize,
    backoff: f64,
    timeout: Duration,
}

impl Aimd {
    /// Starts at `initial`, stays within `min..=max`; backs off to 90% on a drop.
    pub fn new(initial: usize, min: usize, max: usize) -> Self {
        let (limit, min, max) = super::bounded(initial, min, max);
        Self {
            limit,
            min,
            max,
            backoff: 0.9,
            timeout: Duration::from_secs(120),
        }
    }
}

impl Algorithm for Aimd {
    fn limit(&self) -> usize {
        self.limit as usize
    }

    fn update(&mut self, _: Instant, s: Sample) -> usize {
        if s.dropped || s.rtt > self.timeout {
            self.limit = (self.limit * self.backoff).floor();
        } else if s.inflight * 2 >= self.limit as usize {
            self.limit += 1.0;
        }
        self.limit = self.limit.clamp(self.min as f64, self.max as f64);
        self.limit()
    }
}
