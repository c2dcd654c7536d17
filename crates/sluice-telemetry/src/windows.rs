//! Percentile windows per (model group, upstream), for both TTFB and total latency.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;
use sluice_core::Phase;
use sluice_tail::{LatencyWindow, Percentiles, WindowConfig, WindowError};
use tokio::time::Instant;

/// Which windows a latency belongs to. Streamed and complete answers are kept apart: the
/// first byte of a complete answer is its last, so mixing the two would make a "P95 time to
/// first byte" that describes neither (and a hedging delay too late for streams).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WindowKey {
    /// The model group.
    pub group: Arc<str>,
    /// The upstream (deployment).
    pub upstream: Arc<str>,
    /// Whether the answers are streamed.
    pub stream: bool,
}

impl WindowKey {
    /// `stream` or `complete`, for labels.
    pub fn mode(&self) -> &'static str {
        if self.stream { "stream" } else { "complete" }
    }
}

/// The two windows of one (group, upstream).
#[derive(Debug)]
pub struct PairWindows {
    ttfb: LatencyWindow,
    total: LatencyWindow,
}

impl PairWindows {
    fn window(&mut self, phase: Phase) -> &mut LatencyWindow {
        match phase {
            Phase::Ttfb => &mut self.ttfb,
            Phase::Total => &mut self.total,
        }
    }
}

/// Every window pair, created on first use.
#[derive(Debug)]
pub struct Windows {
    config: WindowConfig,
    pairs: Mutex<HashMap<WindowKey, Arc<Mutex<PairWindows>>>>,
}

/// Percentiles of one (group, upstream).
#[derive(Clone, Debug, Serialize)]
pub struct UpstreamLatency {
    /// The model group.
    pub group: String,
    /// The upstream (deployment).
    pub upstream: String,
    /// `stream` or `complete`.
    pub mode: &'static str,
    /// Time to first byte, milliseconds.
    pub ttfb: Percentiles,
    /// Total time, milliseconds.
    pub total: Percentiles,
}

/// The `/admin/latency` document: what callers waited (from their request's arrival), and
/// apart from it what each upstream's attempts took (from each attempt's own start). The
/// two differ by queueing, pauses after 429s and retries, and are never the same figure.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyReport {
    /// The span the percentiles describe.
    pub window_seconds: f64,
    /// Latency values are in milliseconds.
    pub unit: &'static str,
    /// What callers waited, one entry per (lane, group, tenant class) seen: from arrival to
    /// the first byte (`ttfb`) and to the last (`total`).
    pub clients: Vec<crate::clients::ClientLatency>,
    /// What upstreams' attempts took, one entry per (group, upstream, mode) seen: from each
    /// attempt's start to its first byte (`ttfb`) and to its end (`total`).
    pub upstreams: Vec<UpstreamLatency>,
}

impl Windows {
    /// Checks the shape once, so later window creation cannot fail.
    pub fn new(config: WindowConfig) -> Result<Self, WindowError> {
        LatencyWindow::new(config, Instant::now())?;
        Ok(Self {
            config,
            pairs: Mutex::new(HashMap::new()),
        })
    }

    /// The windows of `key`, created if new.
    pub fn pair(&self, key: &WindowKey, now: Instant) -> Option<Arc<Mutex<PairWindows>>> {
        let mut pairs = self.pairs.lock();
        if let Some(p) = pairs.get(key) {
            return Some(p.clone());
        }
        let fresh = PairWindows {
            ttfb: LatencyWindow::new(self.config, now).ok()?,
            total: LatencyWindow::new(self.config, now).ok()?,
        };
        let p = Arc::new(Mutex::new(fresh));
        pairs.insert(key.clone(), p.clone());
        Some(p)
    }

    /// Records one latency.
    pub fn record(&self, key: &WindowKey, phase: Phase, now: Instant, latency: Duration) {
        if let Some(p) = self.pair(key, now) {
            Self::record_in(&p, phase, now, latency);
        }
    }

    /// Records one latency in windows already looked up with [`Windows::pair`].
    pub fn record_in(pair: &Mutex<PairWindows>, phase: Phase, now: Instant, latency: Duration) {
        pair.lock().window(phase).record(now, latency);
    }

    /// What `read` makes of the `phase` window of `key`, if that window exists.
    fn read<T>(
        &self,
        key: &WindowKey,
        phase: Phase,
        read: impl FnOnce(&mut LatencyWindow) -> Option<T>,
    ) -> Option<T> {
        let p = self.pairs.lock().get(key).cloned()?;
        let mut guard = p.lock();
        read(guard.window(phase))
    }

    /// The latency at quantile `q` of `phase` for `key`, if there are `min_samples`.
    pub fn quantile(
        &self,
        key: &WindowKey,
        phase: Phase,
        now: Instant,
        q: f64,
        min_samples: u64,
    ) -> Option<Duration> {
        self.read(key, phase, |w| w.quantile(now, q, min_samples))
    }

    /// The quantile `q` of `phase` for `key` over the window's body (stalls left out), if
    /// there are `min_samples`.
    pub fn body_quantile(
        &self,
        key: &WindowKey,
        phase: Phase,
        now: Instant,
        q: f64,
        min_samples: u64,
    ) -> Option<sluice_tail::hedge::BodyQuantile> {
        self.read(key, phase, |w| w.body_quantile(now, q, min_samples))
    }

    /// The report of every pair, sorted by group then upstream.
    pub fn report(&self, now: Instant) -> LatencyReport {
        let pairs: Vec<(WindowKey, Arc<Mutex<PairWindows>>)> = self
            .pairs
            .lock()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut upstreams: Vec<UpstreamLatency> = pairs
            .into_iter()
            .map(|(key, p)| {
                let mut w = p.lock();
                UpstreamLatency {
                    group: key.group.to_string(),
                    upstream: key.upstream.to_string(),
                    mode: key.mode(),
                    ttfb: w.ttfb.percentiles(now),
                    total: w.total.percentiles(now),
                }
            })
            .collect();
        upstreams
            .sort_by(|a, b| (&a.group, &a.upstream, a.mode).cmp(&(&b.group, &b.upstream, b.mode)));
        LatencyReport {
            window_seconds: self.config.length.as_secs_f64(),
            unit: "ms",
            clients: Vec::new(),
            upstreams,
        }
    }
}
