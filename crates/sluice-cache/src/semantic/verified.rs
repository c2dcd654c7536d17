//! The verified mode's rule (vCache, arXiv 2502.03771): each cached entry learns its own
//! similarity threshold online, and an answer is served from it just often enough that the
//! probability of serving a wrong one stays within the route's error bound `delta`.
//!
//! Per entry, `P(its answer is right for a question at similarity s) = sigmoid(gamma (s - t))`,
//! fitted by maximum likelihood on what verification found, `(s, right or wrong)`, seeded
//! with two pseudo-observations `(0, wrong)` and `(1, right)`. The uncertainty of `t` comes
//! from the Fisher information (delta method); when the labels are perfectly separable, and
//! the fit would diverge, from a table by number of observations. For a request at
//! similarity `s` the rule takes, over a grid of `eps`, `t' = t + z(1 - eps) sd(t)` and
//! `alpha = (1 - eps) sigmoid(gamma (s - t'))` (a lower bound on being right), the best of
//! them. Where it reaches `1 - delta` the answer is served, so that each answer served is
//! right with a probability of at least `1 - delta` (a bound on the precision of hits, not
//! only on wrong answers per question asked); where even the curve's optimistic side stays
//! below, the question is a miss without asking (verifying would teach nothing that could
//! serve it); in between it is verified (asked upstream, that answer served and compared).
//!
//! A logistic curve fitted over every similarity is shaped by where most evidence lies: where
//! rights and wrongs overlap, its slope is shallow, and it cannot say that the near-copies
//! above are nearly always right. So a curve also serves from the lowest similarity at or
//! above which the verified answers were right `1 - delta` of the time by a one-sided 95%
//! Wilson lower bound (with no wrong answer there, about 133 right ones at a 2% bound): what
//! it serves is a share of that region, so the bound holds for the precision of hits.
//!
//! An entry alone rarely gathers enough evidence (most questions are asked a few times), so
//! each route also keeps a pooled curve, fitted on every verification of its entries: an
//! entry without a fit of its own is decided by the route's, and an entry's own curve is
//! trusted only where its own evidence reaches (at or above the similarity of its
//! [`SUPPORT`]-th lowest right answer); below that, the stricter of the two decides, so a
//! few duplicates never open an entry to everything below them.

/// Observations (the two seeds included) below which an entry always verifies.
pub const MIN_OBSERVATIONS: usize = 6;

/// Real observations an entry keeps (the newest): each refit is linear in them, and an
/// entry's answer that was right for months says little of last week.
pub const MAX_OBSERVATIONS: usize = 256;

/// Observations a route's pooled curve keeps (the newest).
pub const POOLED_OBSERVATIONS: usize = 2048;

/// Right answers an entry must have seen at or below a similarity before its own curve
/// decides there.
pub const SUPPORT: usize = 3;

/// The share of servable would-be hits verified anyway: it keeps the curves and the route's
/// error estimate learning while answers are served.
pub const AUDIT: f64 = 0.05;

/// Real observations a curve needs before it may give a similarity up as hopeless (a few
/// mixed labels fit a flat curve that no similarity would clear).
pub const HOPELESS_AFTER: usize = 40;

/// The share of would-be hits still verified, on entries with no evidence of their own,
/// once a route cannot certify ([`Threshold::cannot_certify`]): enough to notice a change.
pub const TRICKLE: f64 = 0.01;

/// Verified answers, the most similar first, a region must hold before its record can say
/// that no similarity is servable (the route then stops verifying but for a trickle).
pub const STOP_AFTER: usize = 40;

/// The most similar verified answers a route keeps verifying for while all of them were
/// right: however wrong the answers below them, the region they start may yet certify.
pub const CLEAN_TOP: usize = 10;

/// How far below its estimate the optimistic side puts an entry's threshold (one-sided 95%).
const OPTIMISM_Z: f64 = 1.645;

/// The one-sided 95% quantile the region rule's Wilson lower bound takes.
const REGION_Z: f64 = 1.645;

/// What the rule decides for a would-be hit, from the most to the least permissive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Decision {
    /// Serve the entry's answer (verifying [`AUDIT`] of these anyway).
    Serve,
    /// Ask the upstream and compare: the evidence cannot tell yet.
    Verify,
    /// A miss: even the optimistic side of the curve would not serve it.
    Hopeless,
}

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
    /// Real observations kept.
    keep: usize,
    /// The region rule's answer for the last bound asked, `(delta, serve from)`, until the
    /// next observation.
    region: std::cell::Cell<Option<(f64, Option<f64>)>>,
    /// The real observations from the most similar down, each with the count of those at or
    /// above it and how many of them were right, until the next observation.
    ranked: std::sync::OnceLock<Vec<(f64, u32, u32)>>,
}

impl Default for Threshold {
    fn default() -> Self {
        Self {
            obs: vec![(0.0, false), (1.0, true)],
            fit: None,
            keep: MAX_OBSERVATIONS,
            region: std::cell::Cell::new(None),
            ranked: std::sync::OnceLock::new(),
        }
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

use sluice_tail::normal::quantile as normal_quantile;

impl Threshold {
    /// A route's pooled curve: every verification of its entries, the newest
    /// [`POOLED_OBSERVATIONS`] kept.
    pub fn pooled() -> Self {
        Self {
            keep: POOLED_OBSERVATIONS,
            ..Self::default()
        }
    }

    /// The lowest similarity its own evidence supports: that of its [`SUPPORT`]-th lowest
    /// right answer (`None`: fewer right answers than that).
    pub fn supported_from(&self) -> Option<f64> {
        let mut right: Vec<f64> = self.obs[2..]
            .iter()
            .filter(|(_, r)| *r)
            .map(|(s, _)| *s)
            .collect();
        if right.len() < SUPPORT {
            return None;
        }
        right.sort_by(f64::total_cmp);
        right.get(SUPPORT - 1).copied()
    }

    /// The decision for a request at similarity `s` to this entry of a route whose pooled
    /// curve is `route`: the entry's own where its evidence reaches, the route's where it
    /// has no fit, the stricter of the two elsewhere.
    pub fn decide_within(&self, route: &Threshold, s: f64, delta: f64) -> Decision {
        let pooled = || route.decide(s, delta);
        if self.fit.is_none() {
            return pooled();
        }
        let own = self.decide(s, delta);
        match self.supported_from() {
            Some(from) if s >= from => own,
            _ => own.max(pooled()),
        }
    }

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
        if self.obs.len() >= self.keep + 2 {
            self.obs.remove(2);
        }
        self.obs.push(((s * 1000.0).round() / 1000.0, right));
        self.fit = (self.obs.len() >= MIN_OBSERVATIONS)
            .then(|| fit(&self.obs))
            .flatten();
        self.region.set(None);
        self.ranked = std::sync::OnceLock::new();
    }

    fn ranked(&self) -> &[(f64, u32, u32)] {
        self.ranked.get_or_init(|| {
            let mut real: Vec<(f64, bool)> = self.obs[2..].to_vec();
            real.sort_by(|a, b| b.0.total_cmp(&a.0));
            let (mut n, mut right) = (0u32, 0u32);
            real.into_iter()
                .map(|(s, r)| {
                    n += 1;
                    right += u32::from(r);
                    (s, n, right)
                })
                .collect()
        })
    }

    /// Whether the answers verified at or above `s` could still be right `1 - delta` of the
    /// time (the Wilson bound's upper side; so while there are none).
    fn region_could_serve(&self, s: f64, delta: f64) -> bool {
        let ranked = self.ranked();
        let above = ranked.partition_point(|(x, _, _)| *x >= s);
        match above.checked_sub(1).map(|i| ranked[i]) {
            None => true,
            Some((_, n, right)) => {
                let (n, wrong) = (f64::from(n), f64::from(n - right));
                1.0 - wilson_lower(wrong, n) >= 1.0 - delta
            }
        }
    }

    /// Whether the evidence says no similarity can be served under `delta`: every region of
    /// the most similar verified answers holding at least [`STOP_AFTER`] of them was wrong
    /// too often for even the optimistic side of its one-sided 95% Wilson bound to reach
    /// `1 - delta` (with fewer, the evidence cannot say, and this is false), and the
    /// [`CLEAN_TOP`] most similar hold a wrong one. Regions only grow worse downward in
    /// similarity as a rule, so in practice this reads the top ones.
    pub fn cannot_certify(&self, delta: f64) -> bool {
        let ranked = self.ranked();
        if ranked.len() < STOP_AFTER {
            return false;
        }
        // The most similar answers all right: the region they start may yet certify.
        if ranked
            .get(CLEAN_TOP - 1)
            .is_some_and(|&(_, n, right)| n == right)
        {
            return false;
        }
        ranked.iter().enumerate().all(|(i, &(s, n, right))| {
            let closes = ranked.get(i + 1).is_none_or(|next| next.0 < s);
            let small = (n as usize) < STOP_AFTER;
            small || !closes || wilson_lower(f64::from(n - right), f64::from(n)) > delta
        })
    }

    /// The lowest similarity from which the answers verified at or above it were right at
    /// least `1 - delta` of the time, by a one-sided 95% Wilson lower bound (`None`: none).
    pub fn region_from(&self, delta: f64) -> Option<f64> {
        if let Some((d, from)) = self.region.get()
            && d == delta
        {
            return from;
        }
        let ranked = self.ranked();
        let mut from = None;
        for (i, &(s, n, right)) in ranked.iter().enumerate() {
            // A region ends between two similarities, never inside a run of equal ones.
            let closes = ranked.get(i + 1).is_none_or(|next| next.0 < s);
            if closes && wilson_lower(f64::from(right), f64::from(n)) >= 1.0 - delta {
                from = Some(s);
            }
        }
        self.region.set(Some((delta, from)));
        from
    }

    /// The decision for a request at similarity `s`, for a route whose error bound is
    /// `delta`: serve at or above [`Threshold::region_from`]; verify until there is a fit;
    /// serve where the curve's pessimistic side (the best of vCache's bounds over the `eps`
    /// grid) gives a right answer a probability of at least `1 - delta`; give up where even
    /// its optimistic side does not, nor could the answers verified at or above `s`
    /// (verifying there could not make it servable); verify in between.
    pub fn decide(&self, s: f64, delta: f64) -> Decision {
        if self.region_from(delta).is_some_and(|from| s >= from) {
            return Decision::Serve;
        }
        let Some(f) = self.fit else {
            return Decision::Verify;
        };
        let sd = f.var_t.max(0.0).sqrt();
        let mut lower = 0.0_f64;
        for i in 0..GRID {
            let eps = 1e-6 + (1.0 - 2e-6) * i as f64 / (GRID - 1) as f64;
            let t_upper = f.t + normal_quantile(1.0 - eps) * sd;
            lower = lower.max((1.0 - eps) * sigmoid(f.gamma * (s - t_upper)));
        }
        if lower >= 1.0 - delta {
            return Decision::Serve;
        }
        let upper = sigmoid(f.gamma * (s - (f.t - OPTIMISM_Z * sd)));
        if upper < 1.0 - delta
            && self.obs.len() >= HOPELESS_AFTER + 2
            && !self.region_could_serve(s, delta)
        {
            Decision::Hopeless
        } else {
            Decision::Verify
        }
    }
}

/// The one-sided lower bound (Wilson score, [`REGION_Z`]) on a share of `right` in `n`.
fn wilson_lower(right: f64, n: f64) -> f64 {
    if n <= 0.0 {
        return 0.0;
    }
    let p = right / n;
    let z2 = REGION_Z * REGION_Z;
    let centre = p + z2 / (2.0 * n);
    let spread = REGION_Z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    (centre - spread) / (1.0 + z2 / n)
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
mod tests;
