//! The verified mode's rule (vCache, arXiv 2502.03771): each cached entry learns its own
//! similarity threshold online, and an answer is served from it just often enough that the
//! probability of serving a wrong one stays within the route's error bound `delta`.
//!
//! Per entry, `P(its answer is right for a question at similarity s) = sigmoid(gamma (s - t))`,
//! fitted by maximum likelihood on what verification found, `(s, right or wrong)`, seeded
//! with two pseudo-observations `(0, wrong)` and `(1, right)`. The uncertainty of `t` comes
//! from the Fisher information (delta method); when the labels are perfectly separable, and
//! the fit would diverge, from a table by number of observations. For a request at
//! similarity `s` the rule takes, over a grid of `eps`, `t' = t + z(1 - eps) sd(t)`,
//! `alpha = (1 - eps) sigmoid(gamma (s - t'))` (a lower bound on being right) and
//! `tau = 1 - delta / (1 - alpha)`; with `tau` the smallest, a draw `u <= tau` verifies
//! (asks the upstream, and serves its answer) and `u > tau` serves the cached one.

/// Observations (the two seeds included) below which an entry always verifies.
pub const MIN_OBSERVATIONS: usize = 6;

/// Real observations an entry keeps (the newest): each refit is linear in them, and an
/// entry's answer that was right for months says little of last week.
pub const MAX_OBSERVATIONS: usize = 256;

/// Points of the `eps` grid.
const GRID: usize = 50;

/// The variance of `t` for perfectly separable labels, by observations: vCache's table at
/// the points it is known here (6, 10, 48), linear between them, the last beyond.
const SEPARABLE_VAR: [(f64, f64); 3] = [(6.0, 0.035_445), (10.0, 0.0194), (48.0, 0.0153)];

/// Steepness taken for separable labels (the fit's limit is a step).
const SEPARABLE_GAMMA: f64 = 50.0;

/// A fitted correctness curve.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fit {
    /// Steepness.
    pub gamma: f64,
    /// The similarity at which the entry's answer is right half the time, in `[0, 1]`.
    pub t: f64,
    /// The variance of `t`.
    pub var_t: f64,
}

/// What an entry learnt of its own threshold.
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    /// `(similarity, the cached answer was right)`, the two seeds first.
    obs: Vec<(f64, bool)>,
    fit: Option<Fit>,
}

impl Default for Threshold {
    fn default() -> Self {
        Self {
            obs: vec![(0.0, false), (1.0, true)],
            fit: None,
        }
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

use sluice_tail::normal::quantile as normal_quantile;

impl Threshold {
    /// Observations so far, seeds included.
    pub fn observations(&self) -> usize {
        self.obs.len()
    }

    /// The current fit, once there are enough observations.
    pub fn fit(&self) -> Option<Fit> {
        self.fit
    }

    /// Learns that the cached answer was `right` (or not) for a question at similarity `s`.
    pub fn observe(&mut self, s: f64, right: bool) {
        if self.obs.len() >= MAX_OBSERVATIONS + 2 {
            self.obs.remove(2);
        }
        self.obs.push(((s * 1000.0).round() / 1000.0, right));
        self.fit = (self.obs.len() >= MIN_OBSERVATIONS)
            .then(|| fit(&self.obs))
            .flatten();
    }

    /// The probability of verifying (asking the upstream) a request at similarity `s`, for
    /// a route whose error bound is `delta`: 1 until the entry has a fit.
    pub fn verify_probability(&self, s: f64, delta: f64) -> f64 {
        let Some(f) = self.fit else {
            return 1.0;
        };
        let sd = f.var_t.max(0.0).sqrt();
        let mut tau = f64::INFINITY;
        for i in 0..GRID {
            let eps = 1e-6 + (1.0 - 2e-6) * i as f64 / (GRID - 1) as f64;
            let t_upper = f.t + normal_quantile(1.0 - eps) * sd;
            let alpha = (1.0 - eps) * sigmoid(f.gamma * (s - t_upper));
            let wrong = (1.0 - alpha).max(1e-12);
            tau = tau.min(1.0 - delta / wrong);
        }
        tau.clamp(0.0, 1.0)
    }

    /// Whether to verify, given a uniform draw `u` in `[0, 1)`.
    pub fn verify(&self, s: f64, delta: f64, u: f64) -> bool {
        u < self.verify_probability(s, delta)
    }
}

/// Whether every right answer lies at a similarity at least every wrong one's.
fn separable(obs: &[(f64, bool)]) -> Option<(f64, f64)> {
    let max_wrong = obs
        .iter()
        .filter(|(_, r)| !r)
        .map(|(s, _)| *s)
        .fold(f64::NEG_INFINITY, f64::max);
    let min_right = obs
        .iter()
        .filter(|(_, r)| *r)
        .map(|(s, _)| *s)
        .fold(f64::INFINITY, f64::min);
    (max_wrong <= min_right).then_some((max_wrong, min_right))
}

fn separable_var(n: f64) -> f64 {
    let [(n0, v0), (n1, v1), (n2, v2)] = SEPARABLE_VAR;
    if n <= n0 {
        v0
    } else if n <= n1 {
        v0 + (v1 - v0) * (n - n0) / (n1 - n0)
    } else if n <= n2 {
        v1 + (v2 - v1) * (n - n1) / (n2 - n1)
    } else {
        v2
    }
}

/// The maximum-likelihood curve through `obs` (Newton's method on the logistic likelihood in
/// `w = gamma`, `b = -gamma t`), with `t`'s variance; `None` if it does not converge.
fn fit(obs: &[(f64, bool)]) -> Option<Fit> {
    let n = obs.len() as f64;
    if let Some((lo, hi)) = separable(obs) {
        return Some(Fit {
            gamma: SEPARABLE_GAMMA,
            t: ((lo + hi) / 2.0).clamp(0.0, 1.0),
            var_t: separable_var(n),
        });
    }
    let (mut w, mut b) = (1.0_f64, 0.0_f64);
    let mut converged = false;
    let mut h = [[0.0_f64; 2]; 2];
    for _ in 0..100 {
        let (mut gw, mut gb) = (0.0, 0.0);
        h = [[0.0; 2]; 2];
        for &(s, right) in obs {
            let p = sigmoid(w * s + b);
            let y = f64::from(u8::from(right));
            gw += (y - p) * s;
            gb += y - p;
            let v = p * (1.0 - p);
            h[0][0] += v * s * s;
            h[0][1] += v * s;
            h[1][1] += v;
        }
        h[1][0] = h[0][1];
        let det = h[0][0] * h[1][1] - h[0][1] * h[1][0];
        if det.abs() < 1e-12 {
            return None;
        }
        let dw = (h[1][1] * gw - h[0][1] * gb) / det;
        let db = (-h[1][0] * gw + h[0][0] * gb) / det;
        w += dw;
        b += db;
        if dw.abs() < 1e-9 && db.abs() < 1e-9 {
            converged = true;
            break;
        }
    }
    if !converged || !w.is_finite() || !b.is_finite() {
        return None;
    }
    let gamma = w.max(1e-6);
    let t = (-b / gamma).clamp(0.0, 1.0);
    // Var(t) = g' H^-1 g, with g = (dt/dw, dt/db) = (b / w^2, -1 / w).
    let det = h[0][0] * h[1][1] - h[0][1] * h[1][0];
    let inv = [
        [h[1][1] / det, -h[0][1] / det],
        [-h[1][0] / det, h[0][0] / det],
    ];
    let g = [b / (gamma * gamma), -1.0 / gamma];
    let var_t =
        g[0] * (inv[0][0] * g[0] + inv[0][1] * g[1]) + g[1] * (inv[1][0] * g[0] + inv[1][1] * g[1]);
    Some(Fit { gamma, t, var_t })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_verifies_everything_until_it_has_a_fit() {
        let mut t = Threshold::default();
        assert_eq!(t.verify_probability(0.99, 0.02), 1.0);
        for s in [0.9, 0.92, 0.95] {
            t.observe(s, true);
        }
        assert_eq!(t.observations(), 5);
        assert_eq!(t.verify_probability(0.99, 0.02), 1.0);
        t.observe(0.7, false);
        assert!(t.fit().is_some());
    }

    #[test]
    fn separable_labels_put_the_threshold_between_them() {
        let mut t = Threshold::default();
        for (s, r) in [(0.95, true), (0.93, true), (0.8, false), (0.75, false)] {
            t.observe(s, r);
        }
        let f = t.fit().unwrap_or_else(|| panic!("a fit"));
        assert!((f.t - 0.865).abs() < 1e-9, "{f:?}");
        assert!((f.var_t - 0.035_445).abs() < 1e-9);
        // Far above the threshold it serves more often than near it; below it, it serves
        // only as often as the bound allows when every such answer is wrong.
        assert!(t.verify_probability(0.99, 0.05) < t.verify_probability(0.88, 0.05));
        assert!(t.verify_probability(0.7, 0.05) > 0.9);
    }

    #[test]
    fn more_evidence_of_a_clean_threshold_serves_more_and_a_tighter_bound_serves_less() {
        let mut few = Threshold::default();
        let mut many = Threshold::default();
        for (i, t) in [&mut few, &mut many].into_iter().enumerate() {
            let rounds = if i == 0 { 2 } else { 20 };
            for k in 0..rounds {
                let jitter = f64::from(k % 5) * 0.002;
                t.observe(0.95 + jitter, true);
                t.observe(0.72 - jitter, false);
            }
            // A little overlap: the labels are not perfectly separable.
            t.observe(0.86, false);
            t.observe(0.84, true);
        }
        let (pf, pm) = (
            few.verify_probability(0.97, 0.02),
            many.verify_probability(0.97, 0.02),
        );
        assert!(pm < pf, "{pm} {pf}");
        assert!(many.verify_probability(0.97, 0.005) >= pm);
        let f = many.fit().unwrap_or_else(|| panic!("a fit"));
        assert!(f.t > 0.75 && f.t < 0.95, "{f:?}");
        assert!(f.var_t > 0.0);
    }

    #[test]
    fn the_rule_keeps_wrong_serves_within_the_bound_on_a_simulated_entry() {
        // An entry whose answer is right with probability sigmoid(40 (s - 0.85)) for a
        // question at similarity s; questions arrive spread over [0.7, 1). Wrong answers
        // served, over all questions, stay within each bound; a looser bound serves more.
        use rand::{RngExt, SeedableRng};
        let mut served_at = Vec::new();
        for delta in [0.01, 0.02, 0.05] {
            let mut rng = rand::rngs::StdRng::seed_from_u64(3);
            let mut t = Threshold::default();
            let (mut served_wrong, mut served, n) = (0, 0, 5_000);
            for _ in 0..n {
                let s: f64 = 0.7 + 0.3 * rng.random::<f64>();
                let right = rng.random::<f64>() < sigmoid(40.0 * (s - 0.85));
                if t.verify(s, delta, rng.random()) {
                    t.observe(s, right);
                } else {
                    served += 1;
                    served_wrong += usize::from(!right);
                }
            }
            let error = served_wrong as f64 / n as f64;
            assert!(error <= delta, "delta {delta}: error {error}");
            served_at.push(served);
        }
        assert!(
            served_at[0] <= served_at[1] && served_at[1] <= served_at[2],
            "{served_at:?}"
        );
        assert!(served_at[2] > 5_000 / 5, "{served_at:?}");
    }
}
