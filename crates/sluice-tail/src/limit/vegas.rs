//! Vegas: estimate the queue at the upstream from how far latency sits above its no-load
//! value, and keep that queue between alpha and beta.

use std::time::Duration;

use tokio::time::Instant;

use super::{Algorithm, Sample};

/// `max(1, floor(log10(x)))`.
fn log10(x: usize) -> f64 {
    (x.max(1) as f64).log10().floor().max(1.0)
}

/// Netflix `VegasLimit` (alpha 3·log10, beta 6·log10, probe every ~30·limit samples).
#[derive(Clone, Debug, PartialEq)]
pub struct Vegas {
    limit: f64,
    max: usize,
    rtt_noload: Option<Duration>,
    probe_count: u64,
    probe_jitter: f64,
    rng: u64,
}

impl Vegas {
    /// Starts at `initial`, at most `max`; `seed` drives the probe jitter.
    pub fn new(initial: usize, max: usize, seed: u64) -> Self {
        let mut v = Self {
            limit: initial.clamp(1, max.max(1)) as f64,
            max: max.max(1),
            rtt_noload: None,
            probe_count: 0,
            probe_jitter: 0.75,
            rng: seed ^ 0x9e37_79b9_7f4a_7c15,
        };
        v.probe_jitter = v.jitter();
        v
    }

    /// Uniform in [0.5, 1.0), from SplitMix64.
    fn jitter(&mut self) -> f64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        0.5 + (z >> 11) as f64 / (1u64 << 53) as f64 * 0.5
    }
}

impl Algorithm for Vegas {
    fn limit(&self) -> usize {
        self.limit as usize
    }

    fn update(&mut self, _: Instant, s: Sample) -> usize {
        self.probe_count += 1;
        // Re-measure the no-load latency now and then, so a stale minimum does not pin us.
        if self.probe_jitter * 30.0 * self.limit <= self.probe_count as f64 {
            self.probe_jitter = self.jitter();
            self.probe_count = 0;
            self.rtt_noload = Some(s.rtt);
            return self.limit();
        }
        let noload = match self.rtt_noload {
            Some(n) if s.rtt >= n => n,
            _ => {
                self.rtt_noload = Some(s.rtt);
                return self.limit();
            }
        };
        let l = self.limit;
        let rtt = s.rtt.as_secs_f64().max(1e-9);
        let queue = (l * (1.0 - noload.as_secs_f64() / rtt)).ceil();
        let lg = log10(l as usize);
        let next = if s.dropped {
            l - lg
        } else if (s.inflight as f64) * 2.0 < l {
            return self.limit();
        } else if queue <= lg {
            l + 6.0 * lg
        } else if queue < 3.0 * lg {
            l + lg
        } else if queue > 6.0 * lg {
            l - lg
        } else {
            return self.limit();
        };
        self.limit = next.clamp(1.0, self.max as f64);
        self.limit()
    }
}
