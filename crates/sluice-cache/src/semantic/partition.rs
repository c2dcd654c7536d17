//! One partition's entries and the scan that finds a question's nearest among them.
//!
//! Rows sit side by side in buffers (row `i` is entry `i`'s): the exact vectors, and beside
//! them each vector quantised to one signed byte a dimension with its step and the L1 norm
//! of what the bytes stand for. A scan reads the bytes (a quarter of the vectors' memory,
//! which bounds a scan of 100,000 entries) and computes for each row an upper bound of its
//! true similarity: the integer dot product scaled back, plus the most the rounding can
//! have moved it, `step_e / 2 * |q|_1 + step_q / 2 * |e'|_1` (each rounding error is at most
//! half a step; Hölder's inequality bounds their dot with the other vector). Only a row whose
//! bound beats the best so far is scored exactly, from its vector, so the result is the
//! exact scan's, to the bit.

use hashbrown::HashMap;
use tokio::time::Instant;

use super::{Entry, Facts};

/// Slack for the floating-point rounding of the bound itself (far above f32's error on 64
/// to a few thousand dimensions, far below any similarity difference that matters).
const SLACK: f32 = 1e-4;

/// A vector in bytes: `codes[k] * step` is component `k` to within `step / 2`.
#[derive(Debug, PartialEq)]
pub struct Quantised {
    /// One signed byte a dimension.
    pub codes: Vec<i8>,
    /// What one unit of a code stands for.
    pub step: f32,
    /// The L1 norm of the vector the codes stand for.
    pub l1: f32,
}

/// `v` quantised, its largest component at ±127.
pub fn quantise(v: &[f32]) -> Quantised {
    let max = v.iter().fold(0.0_f32, |m, x| m.max(x.abs()));
    let step = if max > 0.0 { max / 127.0 } else { 1.0 };
    let codes: Vec<i8> = v
        .iter()
        .map(|x| (x / step).round().clamp(-127.0, 127.0) as i8)
        .collect();
    let l1 = codes.iter().map(|&c| f32::from(c).abs()).sum::<f32>() * step;
    Quantised { codes, step, l1 }
}

/// The dot product of two rows of codes (sixteen running sums, so the loop vectorises).
fn dot_codes(a: &[i8], b: &[i8]) -> i32 {
    let mut acc = [0_i32; 16];
    let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: i32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(&x, &y)| i32::from(x) * i32::from(y))
        .sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..16 {
            acc[k] += i32::from(x[k]) * i32::from(y[k]);
        }
    }
    acc.iter().sum::<i32>() + tail
}

/// The cosine similarity of two unit vectors (eight running sums, so the loop vectorises).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let mut acc = [0.0_f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    f64::from(acc.iter().sum::<f32>() + tail)
}

/// One partition's entries.
#[derive(Debug, Default)]
pub struct Partition {
    pub(super) entries: Vec<Entry>,
    vectors: Vec<f32>,
    codes: Vec<i8>,
    steps: Vec<f32>,
    l1s: Vec<f32>,
    /// Each row's [`Facts::fingerprint`].
    prints: Vec<u64>,
    pub(super) dim: usize,
    /// Each entry's row, by id.
    rows: HashMap<u64, usize>,
}

/// What a scan found: the most similar live entry, and the most similar live entry whose
/// facts agree with the question's.
pub struct Found<'a> {
    /// The nearest, and its similarity.
    pub nearest: Option<(f64, &'a Entry)>,
    /// The nearest the guards allow, and its similarity.
    pub allowed: Option<(f64, &'a Entry)>,
}

impl Partition {
    pub(super) fn get(&self, id: u64) -> Option<&Entry> {
        self.entries.get(*self.rows.get(&id)?)
    }

    pub(super) fn get_mut(&mut self, id: u64) -> Option<&mut Entry> {
        self.entries.get_mut(*self.rows.get(&id)?)
    }

    pub(super) fn push(&mut self, vector: &[f32], e: Entry) {
        let q = quantise(vector);
        self.rows.insert(e.id, self.entries.len());
        self.vectors.extend_from_slice(vector);
        self.codes.extend_from_slice(&q.codes);
        self.steps.push(q.step);
        self.l1s.push(q.l1);
        self.prints.push(e.facts.fingerprint());
        self.entries.push(e);
    }

    /// Removes entry `id`: the last row takes its place.
    pub(super) fn remove(&mut self, id: u64) -> Option<Entry> {
        let i = self.rows.remove(&id)?;
        let (last, d) = (self.entries.len() - 1, self.dim);
        if i != last {
            self.vectors.copy_within(last * d..(last + 1) * d, i * d);
            self.codes.copy_within(last * d..(last + 1) * d, i * d);
            let moved = self.entries[last].id;
            self.rows.insert(moved, i);
        }
        self.vectors.truncate(last * d);
        self.codes.truncate(last * d);
        self.steps.swap_remove(i);
        self.l1s.swap_remove(i);
        self.prints.swap_remove(i);
        Some(self.entries.swap_remove(i))
    }

    /// The nearest live entries to unit vector `v` (of the partition's dimension) with
    /// `facts`; `live` says whether an entry still counts at this moment.
    pub(super) fn scan(
        &self,
        v: &[f32],
        facts: &Facts,
        now: Instant,
        live: impl Fn(&Entry, Instant) -> bool,
    ) -> Found<'_> {
        let mut nearest: Option<(f64, &Entry)> = None;
        let mut allowed: Option<(f64, &Entry)> = None;
        let print = facts.fingerprint();
        let q = quantise(v);
        let d = self.dim;
        for i in 0..self.entries.len() {
            let approx = dot_codes(&q.codes, &self.codes[i * d..(i + 1) * d]) as f32
                * q.step
                * self.steps[i];
            let bound = 0.5 * (self.steps[i] * (q.l1 + SLACK) + q.step * self.l1s[i]) + SLACK;
            let upper = f64::from(approx + bound);
            let may_be_nearest = nearest.is_none_or(|(b, _)| upper > b);
            // The guards' digest first: an entry whose facts differ is never read for them.
            let may_be_allowed = self.prints[i] == print && allowed.is_none_or(|(b, _)| upper > b);
            if !may_be_nearest && !may_be_allowed {
                continue; // most rows: neither scored exactly nor read
            }
            let s = cosine(v, &self.vectors[i * d..(i + 1) * d]);
            let beats_nearest = nearest.is_none_or(|(b, _)| s > b);
            let beats_allowed = may_be_allowed && allowed.is_none_or(|(b, _)| s > b);
            if !beats_nearest && !beats_allowed {
                continue;
            }
            let e = &self.entries[i];
            if !live(e, now) {
                continue;
            }
            if beats_nearest {
                nearest = Some((s, e));
            }
            if beats_allowed && facts.allowed(&e.facts).is_ok() {
                allowed = Some((s, e));
            }
        }
        Found { nearest, allowed }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    fn unit(rng: &mut StdRng, d: usize) -> Vec<f32> {
        let mut v: Vec<f32> = (0..d).map(|_| rng.random::<f32>() - 0.5).collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= n);
        v
    }

    /// A unit vector near `centre`.
    fn near(centre: &[f32], rng: &mut StdRng) -> Vec<f32> {
        let noise = unit(rng, centre.len());
        let mut v: Vec<f32> = centre
            .iter()
            .zip(&noise)
            .map(|(c, n)| c + 0.3 * n)
            .collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= n);
        v
    }

    #[test]
    fn the_bound_holds_for_every_pair() {
        let mut rng = StdRng::seed_from_u64(3);
        for d in [8, 64, 384] {
            for _ in 0..2000 {
                let (a, b) = (unit(&mut rng, d), unit(&mut rng, d));
                let (qa, qb) = (quantise(&a), quantise(&b));
                let approx = dot_codes(&qa.codes, &qb.codes) as f32 * qa.step * qb.step;
                let bound = 0.5 * (qb.step * (qa.l1 + SLACK) + qa.step * qb.l1) + SLACK;
                let exact = cosine(&a, &b) as f32;
                assert!(
                    (exact - approx).abs() <= bound,
                    "{d}: {exact} {approx} {bound}"
                );
            }
        }
        assert_eq!(quantise(&[0.0, 0.0]).codes, vec![0, 0]);
    }

    #[test]
    fn the_scan_finds_what_scoring_every_row_exactly_finds() {
        let mut rng = StdRng::seed_from_u64(5);
        let now = Instant::now();
        let d = 64;
        let mut part = Partition {
            dim: d,
            ..Partition::default()
        };
        // Clustered vectors (near duplicates are the hard case) and facts of three kinds.
        let centre = unit(&mut rng, d);
        let texts = ["order 1", "order 2", "an order"];
        let mut rows = Vec::new();
        for id in 0..3000_u64 {
            let v = near(&centre, &mut rng);
            let facts = Facts::of(texts[(id % 3) as usize]);
            part.push(&v, super::super::tests::entry(id, facts.clone(), now));
            rows.push((v, facts));
        }
        // Some removed, so rows moved.
        for id in (0..3000).step_by(7) {
            part.remove(id);
        }
        for _ in 0..200 {
            let q = near(&centre, &mut rng);
            let facts = Facts::of(texts[rng.random_range(0..3)]);
            let found = part.scan(&q, &facts, now, |_, _| true);
            // Every row scored exactly.
            let mut nearest: Option<(f64, u64)> = None;
            let mut allowed: Option<(f64, u64)> = None;
            for e in &part.entries {
                let s = cosine(&q, &rows[e.id as usize].0);
                if nearest.is_none_or(|(b, _)| s > b) {
                    nearest = Some((s, e.id));
                }
                if facts.allowed(&e.facts).is_ok() && allowed.is_none_or(|(b, _)| s > b) {
                    allowed = Some((s, e.id));
                }
            }
            let id = |f: Option<(f64, &Entry)>| f.map(|(s, e)| (s, e.id));
            assert_eq!(id(found.nearest).map(|x| x.1), nearest.map(|x| x.1));
            assert_eq!(id(found.allowed), allowed);
        }
    }
}
