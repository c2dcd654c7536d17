//! Windowing: one update per window from the window's median latency, so that a delay-based
//! algorithm reacts to a trend, not to one request's luck. The median rather than Netflix's
//! default mean (Envoy's gradient controller also takes the P50): LLM latencies are heavy-
//! tailed, and one 8 s stall among twenty 800 ms answers doubled a window's mean, which
//! Gradient2 read as congestion and cut, window after window.

use std::time::Duration;

use tokio::time::Instant;

use super::{Algorithm, Sample};

/// The most latencies one window keeps (later ones only count as drops and in flight).
const MAX_KEPT: usize = 1_000;

/// Feeds `inner` the median of at least `min_samples` samples per window of `length`.
#[derive(Clone, Debug, PartialEq)]
pub struct Windowed<A> {
    inner: A,
    length: Duration,
    min_samples: u32,
    start: Option<Instant>,
    rtts: Vec<Duration>,
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
            rtts: Vec::new(),
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
        if self.rtts.len() < MAX_KEPT {
            self.rtts.push(s.rtt);
        }
        self.count += 1;
        self.max_inflight = self.max_inflight.max(s.inflight);
        self.dropped |= s.dropped;
        if now.saturating_duration_since(start) < self.length || self.count < self.min_samples {
            return self.inner.limit();
        }
        let mid = self.rtts.len() / 2;
        let (_, median, _) = self.rtts.select_nth_unstable(mid);
        let sample = Sample {
            rtt: *median,
            inflight: self.max_inflight,
            dropped: self.dropped,
            class: s.class,
        };
        self.start = Some(now);
        self.rtts.clear();
        self.count = 0;
        self.max_inflight = 0;
        self.dropped = false;
        self.inner.update(now, sample)
    }

    fn raise_to(&mut self, limit: usize) {
        self.inner.raise_to(limit);
    }

    fn upstream_slower(&self) -> bool {
        self.inner.upstream_slower()
    }
}
