//! The current error estimate of a route's semantic hits: the share of would-be hits whose
//! answer was wrong, measured where the policy sampled them for verification. A would-be hit
//! is verified with a known probability `p` (vCache's rule, or the static mode's audit
//! share), so each verified wrong answer stands for `1 / p` would-be hits (Horvitz and
//! Thompson's estimator): unbiased whatever the sampling, and it covers the answers served
//! unverified, which nothing else sees. Recent hits weigh more: every sum decays by
//! `1 / WINDOW` a would-be hit.

/// Would-be hits after which old evidence weighs 1/e.
pub const WINDOW: f64 = 1000.0;

/// One route's running estimate.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ErrorEstimate {
    would_be: f64,
    wrong: f64,
    verified: f64,
}

impl ErrorEstimate {
    /// A would-be hit (served, or sent upstream to verify).
    pub fn would_be_hit(&mut self) {
        let keep = 1.0 - 1.0 / WINDOW;
        self.would_be = self.would_be * keep + 1.0;
        self.wrong *= keep;
        self.verified *= keep;
    }

    /// What verifying one of them found: its answer `right` or not; it had been verified with
    /// probability `p`.
    pub fn verified(&mut self, right: bool, p: f64) {
        self.verified += 1.0;
        if !right && p > 0.0 {
            self.wrong += 1.0 / p;
        }
    }

    /// The estimated share of wrong answers among would-be hits; `None` before any was
    /// verified (nothing measured).
    pub fn value(&self) -> Option<f64> {
        (self.verified > 0.0 && self.would_be > 0.0).then(|| (self.wrong / self.would_be).min(1.0))
    }

    /// Would-be hits verified, decayed (how much evidence the value rests on).
    pub fn evidence(&self) -> f64 {
        self.verified
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    #[test]
    fn nothing_verified_is_no_estimate() {
        let mut e = ErrorEstimate::default();
        assert_eq!(e.value(), None);
        e.would_be_hit();
        assert_eq!(e.value(), None);
        e.verified(true, 1.0);
        assert_eq!(e.value(), Some(0.0));
    }

    #[test]
    fn sampled_verification_estimates_the_error_of_everything_served() {
        // 3% of would-be hits wrong, 10% of them verified: the estimate finds 3%.
        let mut rng = StdRng::seed_from_u64(7);
        let mut e = ErrorEstimate::default();
        for _ in 0..20_000 {
            e.would_be_hit();
            let wrong = rng.random::<f64>() < 0.03;
            if rng.random::<f64>() < 0.1 {
                e.verified(!wrong, 0.1);
            }
        }
        let v = e.value().unwrap();
        assert!((v - 0.03).abs() < 0.012, "{v}");
    }

    #[test]
    fn verifying_only_the_doubtful_ones_does_not_overstate_the_error() {
        // Doubtful hits (20% wrong) verified always, confident ones (1% wrong) at 5%: the
        // plain share of wrong verifications says ~17%; the weighted estimate the true 2.9%.
        let mut rng = StdRng::seed_from_u64(11);
        let mut e = ErrorEstimate::default();
        let (mut wrong_v, mut all_v) = (0.0, 0.0);
        for i in 0..40_000 {
            e.would_be_hit();
            let (rate, p) = if i % 10 == 0 {
                (0.2, 1.0)
            } else {
                (0.01, 0.05)
            };
            let wrong = rng.random::<f64>() < rate;
            if rng.random::<f64>() < p {
                e.verified(!wrong, p);
                all_v += 1.0;
                wrong_v += f64::from(u8::from(wrong));
            }
        }
        let truth = 0.1 * 0.2 + 0.9 * 0.01;
        let v = e.value().unwrap();
        assert!((v - truth).abs() < 0.01, "{v} vs {truth}");
        assert!(wrong_v / all_v > 0.1, "the unweighted share is biased");
    }

    #[test]
    fn old_evidence_fades() {
        let mut e = ErrorEstimate::default();
        for _ in 0..1000 {
            e.would_be_hit();
            e.verified(false, 1.0);
        }
        for _ in 0..5000 {
            e.would_be_hit();
            e.verified(true, 1.0);
        }
        assert!(e.value().unwrap() < 0.01, "{:?}", e.value());
    }
}
