//! Latency and length distributions of a simulated LLM: a lognormal body, an occasional stall
//! (the heavy tail), and a lognormal output length.

use std::time::Duration;

use rand::{Rng, RngExt};
use rand_distr::{Distribution, LogNormal};

/// A lognormal given by its median and shape.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LogNormalSpec {
    /// The median (e^mu).
    pub median: f64,
    /// The shape (sigma of the underlying normal). Zero gives the median every time.
    pub sigma: f64,
}

impl LogNormalSpec {
    /// One draw. Invalid parameters (negative sigma, zero median) give the median.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        if self.sigma <= 0.0 || self.median <= 0.0 {
            return self.median.max(0.0);
        }
        match LogNormal::new(self.median.ln(), self.sigma) {
            Ok(d) => d.sample(rng),
            Err(_) => self.median,
        }
    }

    /// The exact quantile `q` (for tests and reports): median · e^(sigma · z_q).
    pub fn quantile(&self, q: f64) -> f64 {
        self.median * (self.sigma * normal_quantile(q)).exp()
    }
}

/// Time to first token: a lognormal body plus, with probability `stall_p`, a fixed stall.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TtftModel {
    /// The body, in seconds.
    pub body: LogNormalSpec,
    /// Probability of a stall.
    pub stall_p: f64,
    /// Length of a stall.
    pub stall: Duration,
}

impl TtftModel {
    /// One draw: the body (prefill and queueing as usual) and the stall (zero when none).
    /// They stay apart because a prompt-cache hit shortens the body, never a stall.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> (Duration, Duration) {
        let body = Duration::from_secs_f64(self.body.sample(rng).clamp(0.0, 86_400.0));
        let stalled = self.stall_p > 0.0 && rng.random_bool(self.stall_p.clamp(0.0, 1.0));
        (body, if stalled { self.stall } else { Duration::ZERO })
    }
}

/// Output length: lognormal, at least 1, at most `max`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OutputModel {
    /// Tokens.
    pub tokens: LogNormalSpec,
    /// Upper bound (a request's `max_tokens` lowers it further).
    pub max: u32,
}

impl OutputModel {
    /// One draw, capped by `max_tokens` when the request has one.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R, max_tokens: Option<u64>) -> u32 {
        let cap = max_tokens.map_or(self.max, |m| {
            self.max.min(u32::try_from(m).unwrap_or(u32::MAX))
        });
        let n = self.tokens.sample(rng).round();
        (n as u32).clamp(1, cap.max(1))
    }
}

pub use sluice_tail::normal::quantile as normal_quantile;

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    fn quantile_of(mut v: Vec<f64>, q: f64) -> f64 {
        v.sort_by(f64::total_cmp);
        v[((v.len() as f64 * q).ceil() as usize).saturating_sub(1)]
    }

    #[test]
    fn normal_quantiles_are_right() {
        assert!((normal_quantile(0.5)).abs() < 1e-9);
        assert!((normal_quantile(0.99) - 2.326_347_874).abs() < 1e-6);
        assert!((normal_quantile(0.001) + 3.090_232_306).abs() < 1e-6);
    }

    #[test]
    fn lognormal_median_and_p99_match_the_configuration() {
        let spec = LogNormalSpec {
            median: 0.8,
            sigma: 0.5,
        };
        let mut rng = StdRng::seed_from_u64(11);
        let draws: Vec<f64> = (0..10_000).map(|_| spec.sample(&mut rng)).collect();
        let median = quantile_of(draws.clone(), 0.5);
        let p99 = quantile_of(draws, 0.99);
        assert!((median / 0.8 - 1.0).abs() < 0.03, "median {median}");
        let want = spec.quantile(0.99);
        assert!((want - 2.5601).abs() < 0.001, "analytic p99 {want}");
        assert!((p99 / want - 1.0).abs() < 0.08, "p99 {p99} vs {want}");
    }

    #[test]
    fn stalls_happen_at_the_configured_rate_and_length() {
        let m = TtftModel {
            body: LogNormalSpec {
                median: 0.8,
                sigma: 0.5,
            },
            stall_p: 0.02,
            stall: Duration::from_secs(8),
        };
        let mut rng = StdRng::seed_from_u64(5);
        let draws: Vec<(Duration, Duration)> = (0..10_000).map(|_| m.sample(&mut rng)).collect();
        let stalls = draws.iter().filter(|(_, s)| !s.is_zero()).count();
        assert!((160..=240).contains(&stalls), "{stalls} stalls in 10000");
        assert!(
            draws
                .iter()
                .all(|(_, s)| s.is_zero() || *s == Duration::from_secs(8))
        );
        // The P99 of the mixture sits in the stalls: above 8 s.
        let secs: Vec<f64> = draws.iter().map(|(b, s)| (*b + *s).as_secs_f64()).collect();
        let p99 = quantile_of(secs.clone(), 0.99);
        assert!(p99 > 8.0 && p99 < 10.0, "p99 {p99}");
        let median = quantile_of(secs, 0.5);
        assert!((median / 0.8 - 1.0).abs() < 0.05, "median {median}");
    }

    #[test]
    fn output_length_respects_bounds() {
        let m = OutputModel {
            tokens: LogNormalSpec {
                median: 200.0,
                sigma: 1.0,
            },
            max: 500,
        };
        let mut rng = StdRng::seed_from_u64(3);
        for _ in 0..2000 {
            let n = m.sample(&mut rng, Some(300));
            assert!((1..=300).contains(&n));
        }
    }

    #[test]
    fn same_seed_same_draws() {
        let spec = LogNormalSpec {
            median: 1.0,
            sigma: 0.7,
        };
        let a: Vec<f64> = {
            let mut r = StdRng::seed_from_u64(9);
            (0..50).map(|_| spec.sample(&mut r)).collect()
        };
        let b: Vec<f64> = {
            let mut r = StdRng::seed_from_u64(9);
            (0..50).map(|_| spec.sample(&mut r)).collect()
        };
        assert_eq!(a, b);
    }
}
