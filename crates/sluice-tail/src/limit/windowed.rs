//! Windowing: one update per window from the window's average, so that a delay-based
//! algorithm reacts to a trend, not to one request's luck.

use std::time::Duration;

use tokio::time::Instant;

use super::{Algorithm, Sample};

/// Feeds `inner` the average of at least `min_samples` samples per window of `length`.
#[derive(Clone, Debug, PartialEq)]
pub struct Windowed<A> {
    inner: A,
    length: Duration,
    min_samples: u32,
    start: Option<Instant>,
    sum: Duration,
    count: u32,
    max_inflight: usize,
    dropped: bool,
}

impl<A> Windowed<A> {
    /// One-second windows of at least ten samples (Netflix `WindowedLimit`).
    pub fn new(inner: A) -> Self {
        Self {
            inner,
            length: Duration::from_secs(1),
            min_samples: 10,
            start: None,
            sum: Duration::ZERO,
            count: 0,
            max_inflight: 0,
            dropped: false,
        }
    }
}

impl<A: Algorithm> Algorithm for Windowed<A> {
    fn limit(&self) -> usize {
        self.inner.limit()
    }

    fn update(&mut self, now: Instant, s: Sample) -> usize {
        let start = *self.start.get_or_insert(now);
        self.sum += s.rtt;
        self.count += 1;
        self.max_inflight = self.max_inflight.max(s.inflight);
        self.dropped |= s.dropped;
        if now.saturating_duration_since(start) < self.length || self.count < self.min_samples {
            return self.inner.limit();
        }
        let avg = self.sum / self.count;
        let sample = Sample {
            rtt: avg,
            inflight: self.max_inflight,
            dropped: self.dropped,
        };
        self.start = Some(now);
        self.sum = Duration::ZERO;
        self.count = 0;
        self.max_inflight = 0;
        self.dropped = false;
        self.inner.update(now, sample)
    }
}
