//! Retry policy: how many attempts, how long to wait between them, and the budget that keeps
//! retries from turning an upstream's bad minute into a storm.

use std::time::Duration;

use crate::budget::Budget;

/// How a model group retries failed attempts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// Retries allowed per request on average.
    pub budget: f64,
    /// Retries that may be spent at once after a quiet spell.
    pub burst: f64,
    /// Retries earned per second whatever the traffic (the floor that lets a quiet service
    /// retry its rare failure).
    pub min_per_second: f64,
    /// Base of the backoff between attempts that failed fast.
    pub backoff_base: Duration,
    /// Longest backoff.
    pub backoff_cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            budget: 0.2,
            burst: 10.0,
            min_per_second: 0.5,
            backoff_base: Duration::from_millis(25),
            backoff_cap: Duration::from_millis(250),
        }
    }
}

impl RetryPolicy {
    /// A fresh budget for this policy.
    pub fn budget(&self) -> Budget {
        Budget::new(self.budget, self.burst).with_floor(self.min_per_second)
    }

    /// The wait before retry number `n` (1 for the first retry): "full jitter", uniform in
    /// `[0, min(cap, base × (2^n − 1)))`, with `unit` in `[0, 1)` supplying the randomness
    /// (from the request id, so runs repeat).
    pub fn backoff(&self, n: u32, unit: f64) -> Duration {
        let factor = 2f64.powi(n.min(16) as i32) - 1.0;
        let ceiling = self.backoff_base.mul_f64(factor).min(self.backoff_cap);
        ceiling.mul_f64(unit.clamp(0.0, 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_then_caps_and_follows_the_jitter() {
        let p = RetryPolicy::default();
        assert_eq!(p.backoff(1, 0.999_999).as_millis(), 24);
        assert_eq!(p.backoff(2, 0.5), Duration::from_micros(37_500));
        assert_eq!(p.backoff(3, 0.999_999).as_millis(), 174);
        assert_eq!(p.backoff(9, 1.0), Duration::from_millis(250));
        assert_eq!(p.backoff(4, 0.0), Duration::ZERO);
    }
}
