//! Lanes: each lane's rules (its share of the limit under contention, its queue, its
//! longest wait), as configured and as admission holds them.

use std::sync::Arc;
use std::time::Duration;

/// One lane's rules.
#[derive(Clone, Debug, PartialEq)]
pub struct LaneSpec {
    /// Name, as clients send it in `x-sluice-lane`.
    pub name: Arc<str>,
    /// Guaranteed share of the limit under contention.
    pub share: f64,
    /// Requests that may wait.
    pub max_queue: usize,
    /// How long one may wait.
    pub max_wait: Duration,
}

impl LaneSpec {
    /// The lane `[lanes.NAME]` describes.
    pub fn named(name: &str, p: &LaneParams) -> Self {
        let LaneParams {
            share,
            max_queue,
            max_wait,
        } = *p;
        Self {
            name: Arc::from(name),
            share,
            max_queue,
            max_wait,
        }
    }
}

/// `[lanes.NAME]` as it is written (every field optional, unknown fields refused): a class
/// of traffic with its own queue.
#[derive(Clone, Copy, Debug, PartialEq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LaneParams {
    /// Share of an upstream's concurrency limit the lane is guaranteed under contention
    /// (a guarantee, not a cap: idle slots go to whoever waits).
    pub share: f64,
    /// Requests that may wait; beyond that sluice answers 503 with `Retry-After`.
    pub max_queue: usize,
    /// How long a request may wait for a slot (and for retries) before 503.
    #[serde(with = "humantime_serde")]
    pub max_wait: Duration,
}

impl Default for LaneParams {
    fn default() -> Self {
        Self {
            share: 0.5,
            max_queue: 1000,
            max_wait: Duration::from_secs(60),
        }
    }
}

/// The lanes used when a config defines none: interactive (80% guaranteed, a short wait)
/// before batch (20%, a long wait: batch work waits rather than fails).
pub fn default_lanes() -> Vec<(String, LaneParams)> {
    vec![
        (
            "interactive".into(),
            LaneParams {
                share: 0.8,
                max_queue: 256,
                max_wait: Duration::from_secs(30),
            },
        ),
        (
            "batch".into(),
            LaneParams {
                share: 0.2,
                max_queue: 10_000,
                max_wait: Duration::from_secs(600),
            },
        ),
    ]
}

impl LaneParams {
    /// What is wrong with one lane, if anything: (field, message). Shares adding up to more
    /// than 1 is the lanes' problem together, [`shares_problem`].
    pub fn problems(&self) -> Vec<crate::Problem> {
        let mut out = Vec::new();
        if !(0.0..=1.0).contains(&self.share) {
            out.push(("share", "must be between 0 and 1".into()));
        }
        if self.max_wait.is_zero() {
            out.push(("max_wait", "must be longer than zero".into()));
        }
        out
    }
}

/// Why lanes' shares together are wrong, if they are: more than 1 in all.
pub fn shares_problem<'a>(lanes: impl IntoIterator<Item = &'a LaneParams>) -> Option<String> {
    let total: f64 = lanes.into_iter().map(|l| l.share).sum();
    (total > 1.0 + 1e-9).then(|| format!("shares add up to {total}, more than 1"))
}
