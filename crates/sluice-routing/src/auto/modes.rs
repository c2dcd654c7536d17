//! The two modes side by side on an MMLU-like run (seeded, no clock): 57 tasks of 246
//! requests each in a random order, a weak candidate right 40-90% of the time by task and a
//! strong one at twenty times its price, better by 0-25 points. Sweeping the floor mode's floor
//! and the budget mode's value gives each a curve of quality gap closed against strong share
//! over the whole run, first requests included; the budget mode must need no larger a strong
//! share than the floor mode for half and for 80% of the gap.

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::budget_mix::{ASK, optimum};
use super::*;

const TASKS: usize = 57;
const PER_TASK: usize = 246;

/// (weak, strong) quality per task.
fn tasks(seed: u64) -> Vec<(f64, f64)> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..TASKS)
        .map(|_| {
            let weak: f64 = rng.random_range(0.4..0.9);
            let strong = (weak + rng.random_range(0.0..0.25)).min(0.98);
            (weak, strong)
        })
        .collect()
}

/// Runs `policy` over `q`'s tasks in a seeded random order: (gap closed, strong share).
fn run(q: &[(f64, f64)], policy: &RouterPolicy, seed: u64) -> (f64, f64) {
    let offers = [1.0, 20.0].map(super::mixes::offer);
    let names = vec![Arc::from("weak"), Arc::from("strong")];
    let mut r = Router::new("auto", names, policy.clone());
    let mut rng = StdRng::seed_from_u64(seed + 1_000);
    let mut order: Vec<usize> = (0..TASKS * PER_TASK).map(|k| k % TASKS).collect();
    for k in (1..order.len()).rev() {
        order.swap(k, rng.random_range(0..=k));
    }
    let (mut strong, mut good) = (0.0, 0.0);
    for &t in &order {
        let (w, s) = q[t];
        let c = r.choose(Some(&format!("subject-{t}")), &ASK, &offers);
        let pick = c.winner();
        let ok = rng.random_bool(if pick == 1 { s } else { w });
        r.observe(&c.task, pick, f64::from(u8::from(ok)), None);
        strong += f64::from(u8::from(pick == 1));
        good += f64::from(u8::from(ok));
    }
    let n = order.len() as f64;
    let (weak_q, strong_q) = q.iter().fold((0.0, 0.0), |(a, b), (w, s)| (a + w, b + s));
    let (weak_q, strong_q) = (weak_q / TASKS as f64, strong_q / TASKS as f64);
    ((good / n - weak_q) / (strong_q - weak_q), strong / n)
}

/// The smallest strong share at which a curve of (gap closed, strong share) points reaches
/// `gap`, read on the line between the two points around it (sorted by share).
fn share_at(points: &[(f64, f64)], gap: f64) -> Option<f64> {
    let mut p = points.to_vec();
    p.sort_by(|a, b| a.1.total_cmp(&b.1));
    // The curve as a frontier: the best gap reached at or below each share.
    let mut best = f64::NEG_INFINITY;
    let mut frontier: Vec<(f64, f64)> = Vec::new();
    for (g, s) in p {
        if g > best {
            best = g;
            frontier.push((g, s));
        }
    }
    frontier.windows(2).find_map(|w| {
        let ((g0, s0), (g1, s1)) = (w[0], w[1]);
        (g0 < gap && g1 >= gap).then(|| s0 + (s1 - s0) * (gap - g0) / (g1 - g0))
    })
}

#[test]
fn the_budget_mode_needs_no_more_strong_calls_than_the_floor_mode_for_the_same_gap() {
    // The strong candidate's extra cost a call, to turn gains into values.
    let extra = {
        let arms = [Arm::default(), Arm::default()];
        let cost = |p: f64| {
            super::mixes::offer(p)
                .price
                .map_or(0.0, |p| pick::expected_cost(&p, &arms[0], &arms, &ASK))
        };
        cost(20.0) - cost(1.0)
    };
    for seed in 1..=3 {
        let q = tasks(seed);
        let floors: Vec<(f64, f64)> = (0..=18)
            .map(|k| 0.5 + 0.025 * f64::from(k))
            .map(|floor| {
                let policy = RouterPolicy {
                    floor,
                    ..RouterPolicy::for_mode(None)
                };
                run(&q, &policy, seed)
            })
            .collect();
        let values: Vec<(f64, f64)> = (0..=18)
            .map(|k| extra / (0.005 + 0.015 * f64::from(k)))
            .map(|worth| run(&q, &RouterPolicy::for_mode(Some(worth)), seed))
            .collect();
        for gap in [0.5, 0.8] {
            let (f, b) = (share_at(&floors, gap), share_at(&values, gap));
            eprintln!(
                "seed {seed}: {:.0}% of the gap at a strong share of {} (floor mode), {} (budget mode); {:.3} in hindsight",
                gap * 100.0,
                f.map_or("never".into(), |s| format!("{s:.3}")),
                b.map_or("never".into(), |s| format!("{s:.3}")),
                optimum(&q, gap).1
            );
            let (f, b) = (f.unwrap_or(1.0), b.unwrap_or(1.0));
            assert!(
                b <= f + 0.005,
                "seed {seed}: {gap} of the gap at {b:.3} strong (budget) vs {f:.3} (floor)"
            );
        }
    }
}
