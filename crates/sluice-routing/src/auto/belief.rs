//! What the router believes of one candidate for one task: a Beta posterior of a good
//! answer that forgets old evidence, and running means of its output length and cached share.

use rand::Rng;
use rand_distr::{Beta, Distribution};

/// The prior of every belief: Beta(1, 1), uniform, "nothing known".
pub const PRIOR: f64 = 1.0;

/// A Beta posterior over the probability that an answer is good.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Belief {
    /// Good answers seen (with the prior's one), decayed.
    pub alpha: f64,
    /// Bad answers seen (with the prior's one), decayed.
    pub beta: f64,
}

impl Default for Belief {
    fn default() -> Self {
        Self {
            alpha: PRIOR,
            beta: PRIOR,
        }
    }
}

impl Belief {
    /// The posterior mean.
    pub fn mean(&self) -> f64 {
        self.alpha / (self.alpha + self.beta)
    }

    /// The evidence it holds beyond the prior, in answers.
    pub fn evidence(&self) -> f64 {
        self.alpha + self.beta - 2.0 * PRIOR
    }

    /// The lower credible bound `z` standard deviations below the mean (the normal
    /// approximation of the Beta, which errs low for small counts: a new candidate never
    /// clears a floor on its prior alone), clamped to `[0, 1]`.
    pub fn lower(&self, z: f64) -> f64 {
        let n = self.alpha + self.beta;
        let var = self.alpha * self.beta / (n * n * (n + 1.0));
        (self.mean() - z * var.sqrt()).clamp(0.0, 1.0)
    }

    /// The upper credible bound `z` standard deviations above the mean, clamped to `[0, 1]`.
    pub fn upper(&self, z: f64) -> f64 {
        (self.mean() + z * self.variance().sqrt()).clamp(0.0, 1.0)
    }

    /// The posterior's variance.
    pub fn variance(&self) -> f64 {
        let n = self.alpha + self.beta;
        self.alpha * self.beta / (n * n * (n + 1.0))
    }

    /// Adds one answer scored `score` in `[0, 1]` (1 good, 0 bad; a fraction is that share
    /// of a good answer).
    pub fn add(&mut self, score: f64) {
        self.alpha += score;
        self.beta += 1.0 - score;
    }

    /// Takes back an answer scored `score` (when explicit feedback replaces an implicit
    /// score), never below the prior.
    pub fn remove(&mut self, score: f64) {
        self.alpha = (self.alpha - score).max(PRIOR);
        self.beta = (self.beta - (1.0 - score)).max(PRIOR);
    }

    /// Moves the evidence toward the prior by `keep` (the share of it kept, in `(0, 1]`).
    pub fn decay(&mut self, keep: f64) {
        self.alpha = PRIOR + (self.alpha - PRIOR) * keep;
        self.beta = PRIOR + (self.beta - PRIOR) * keep;
    }

    /// One draw from the posterior (Thompson sampling); the mean if the parameters are
    /// degenerate (they cannot be: both stay at least the prior).
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        match Beta::new(self.alpha, self.beta) {
            Ok(d) => d.sample(rng),
            Err(_) => self.mean(),
        }
    }
}

/// A running mean that forgets like the beliefs do; empty until the first sample.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Mean {
    value: Option<f64>,
}

impl Mean {
    /// The mean, once something was seen.
    pub fn get(&self) -> Option<f64> {
        self.value
    }

    /// A mean that starts at `v` (restored from the store).
    pub fn of(v: Option<f64>) -> Self {
        Self { value: v }
    }

    /// Adds `x`, weighing the old mean by `keep`.
    pub fn add(&mut self, x: f64, keep: f64) {
        self.value = Some(match self.value {
            None => x,
            Some(m) => m * keep + x * (1.0 - keep),
        });
    }
}

pub use sluice_tail::normal::quantile as normal_quantile;

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn the_lower_bound_rises_with_evidence_and_the_prior_clears_nothing() {
        let z = normal_quantile(0.9);
        let prior = Belief::default();
        assert!(prior.lower(z) < 0.2, "{}", prior.lower(z));
        let mut b = Belief::default();
        for i in 0..40 {
            b.add(if i % 10 == 0 { 0.0 } else { 1.0 });
        }
        assert!(b.mean() > 0.85 && b.lower(z) > 0.8, "{b:?}");
        let few = {
            let mut f = Belief::default();
            for _ in 0..4 {
                f.add(1.0);
            }
            f
        };
        // Four good answers in four believe more than 0.8 on average, but not credibly.
        assert!(few.mean() > 0.8 && few.lower(z) < 0.8 && few.lower(z) < b.lower(z));
    }

    #[test]
    fn decay_moves_toward_the_prior_and_remove_never_passes_it() {
        let mut b = Belief {
            alpha: 101.0,
            beta: 11.0,
        };
        b.decay(0.5);
        assert_eq!((b.alpha, b.beta), (51.0, 6.0));
        assert!((b.evidence() - 55.0).abs() < 1e-9);
        b.remove(1.0);
        assert_eq!((b.alpha, b.beta), (50.0, 6.0));
        let mut p = Belief::default();
        p.remove(1.0);
        assert_eq!(p, Belief::default());
    }

    #[test]
    fn samples_follow_the_posterior() {
        let mut rng = StdRng::seed_from_u64(7);
        let b = Belief {
            alpha: 90.0,
            beta: 10.0,
        };
        let n = 2_000;
        let over = (0..n).filter(|_| b.sample(&mut rng) >= 0.85).count();
        // P(theta >= 0.85) for Beta(90, 10) is about 0.93.
        assert!((over as f64 / n as f64 - 0.93).abs() < 0.04, "{over}");
        let mut m = Mean::default();
        assert_eq!(m.get(), None);
        m.add(100.0, 0.9);
        m.add(200.0, 0.9);
        assert!((m.get().unwrap_or(0.0) - 110.0).abs() < 1e-9);
    }
}
