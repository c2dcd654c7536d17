//! Adaptive concurrency limits: how many requests an upstream should have in flight, found
//! from what its answers say (latency and drops), as TCP finds a window.
//!
//! The algorithms follow Netflix's concurrency-limits (AIMD, Gradient2, Vegas) with two
//! deliberate changes: Gradient2 ignores drops there, but an LLM upstream's 429/503/timeout is
//! the clearest overload signal it gives, so here a drop cuts the limit by the AIMD ratio;
//! and latency that does not rise with sluice's own concurrency is the upstream's slowness,
//! not congestion ([`Slowdown`]), so a slower provider is not cut below what its arrivals
//! need.

mod aimd;
mod ema;
mod gradient2;
mod normalized;
mod params;
mod slowdown;
mod vegas;
mod windowed;

use std::fmt::Debug;
use std::time::Duration;

use tokio::time::Instant;

pub use aimd::Aimd;
pub use gradient2::Gradient2;
pub use normalized::{CLASSES, Normalized};
pub use params::{LimitAlgorithm, LimitParams};
pub use slowdown::{MAX_ELASTICITY, Slowdown};
pub use vegas::Vegas;
pub use windowed::Windowed;

/// What one finished request says about the upstream.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Its latency (time to first byte).
    pub rtt: Duration,
    /// Requests in flight when it started.
    pub inflight: usize,
    /// Whether it was dropped: refused for load (429, 503) or timed out.
    pub dropped: bool,
    /// Which kind of answer it was (0: streamed, 1: complete); latencies are compared only
    /// within a kind (see [`Normalized`]).
    pub class: usize,
}

/// An adaptive limit.
pub trait Algorithm: Send + Debug {
    /// The current limit.
    fn limit(&self) -> usize;
    /// Folds one sample in at `now`; returns the new limit.
    fn update(&mut self, now: Instant, sample: Sample) -> usize;
    /// Gives back cuts that were mistaken: the limit becomes at least `limit` (within its
    /// bounds). Algorithms without such cuts keep their limit.
    fn raise_to(&mut self, _limit: usize) {}
    /// Whether the upstream answers well above its usual latency now, as the algorithm last
    /// read it (whatever the cause): a queue sluice holds then, and what it refuses, is the
    /// upstream's slowness carried, not sluice's own. Algorithms that do not read latency
    /// against a baseline say no.
    fn upstream_slower(&self) -> bool {
        false
    }
}

/// Bounds made sane (`1 <= min <= max`), and the starting limit inside them.
pub(crate) fn bounded(initial: usize, min: usize, max: usize) -> (f64, usize, usize) {
    let min = min.max(1);
    let max = max.max(min);
    (initial.clamp(min, max) as f64, min, max)
}

/// A limit that never moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fixed(pub usize);

impl Algorithm for Fixed {
    fn limit(&self) -> usize {
        self.0
    }
    fn update(&mut self, _: Instant, _: Sample) -> usize {
        self.0
    }
}

/// Which algorithm, with its bounds; builds the algorithm.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LimitSpec {
    /// A fixed limit.
    Fixed(usize),
    /// Additive increase, multiplicative decrease on drops (the default for LLM upstreams:
    /// their 429s and timeouts are the signal, their latency mostly output length).
    Aimd {
        /// Starting limit.
        initial: usize,
        /// Lowest limit.
        min: usize,
        /// Highest limit.
        max: usize,
    },
    /// Gradient of long- against short-term latency (windowed), cut on drops.
    Gradient2 {
        /// Starting limit.
        initial: usize,
        /// Lowest limit.
        min: usize,
        /// Highest limit.
        max: usize,
    },
    /// TCP Vegas' queue estimate from the no-load latency (windowed).
    Vegas {
        /// Starting limit.
        initial: usize,
        /// Highest limit.
        max: usize,
    },
}

impl LimitSpec {
    /// The algorithm; `seed` feeds Vegas' probe jitter.
    pub fn build(&self, seed: u64) -> Box<dyn Algorithm> {
        match *self {
            Self::Fixed(n) => Box::new(Fixed(n.max(1))),
            Self::Aimd { initial, min, max } => Box::new(Aimd::new(initial, min, max)),
            // Each sample is normalised by its kind first, then windows average inflation,
            // and the upstream's own slowness is taken out before the gradient is read.
            Self::Gradient2 { initial, min, max } => Box::new(Normalized::new(Windowed::new(
                Slowdown::new(Gradient2::new(initial, min, max).against(1.0, 1.5)),
            ))),
            Self::Vegas { initial, max } => Box::new(Normalized::new(Windowed::new(Vegas::new(
                initial, max, seed,
            )))),
        }
    }
}

#[cfg(test)]
mod tests;
