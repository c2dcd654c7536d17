//! The router on mixes whose quality is not monotone in price (seeded, no clock): four
//! candidates at 1x, 2.5x, 6x and 15x over ten tasks, among them a cheap candidate just above
//! the floor, dear candidates worse than cheaper ones, and a task no candidate clears (the
//! cheap one right 32% of the time, the dearest 3%); then one candidate drops on a task and
//! a cheaper one improves on another.

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::*;

const PRICES: [f64; 4] = [1.0, 2.5, 6.0, 15.0];

/// quality[task][candidate]
fn table() -> Vec<[f64; 4]> {
    vec![
        [0.88, 0.84, 0.95, 0.90],
        [0.60, 0.92, 0.85, 0.97],
        [0.50, 0.70, 0.93, 0.85],
        [0.40, 0.75, 0.70, 0.95],
        [0.93, 0.90, 0.96, 0.97],
        [0.32, 0.20, 0.10, 0.03],
        [0.70, 0.95, 0.60, 0.80],
        [0.86, 0.99, 0.99, 0.99],
        [0.55, 0.65, 0.91, 0.70],
        [0.75, 0.90, 0.80, 0.78],
    ]
}

/// The candidate an oracle that knows the table takes: the cheapest clearing `floor`, else
/// the best.
fn oracle(q: &[f64; 4], floor: f64) -> usize {
    (0..4)
        .find(|&i| q[i] >= floor)
        .unwrap_or_else(|| (0..4).max_by(|&a, &b| q[a].total_cmp(&q[b])).unwrap_or(0))
}

/// The oracle's cost and good-answer rate per request over `q`'s tasks at `floor`.
fn oracle_rates(q: &[[f64; 4]], floor: f64) -> (f64, f64) {
    let n = q.len() as f64;
    let cost = q.iter().map(|row| PRICES[oracle(row, floor)]).sum::<f64>() / n;
    let good = q.iter().map(|row| row[oracle(row, floor)]).sum::<f64>() / n;
    (cost, good)
}

/// A candidate at `p` times the cheapest one's price (the budget mix's too).
pub(super) fn offer(p: f64) -> Offer {
    Offer {
        price: Some(TokenPrice {
            input: p / 4.0,
            cached_input: p / 40.0,
            output: p,
        }),
        ttfb_p95: None,
        available: true,
    }
}

fn offers() -> Vec<Offer> {
    PRICES.iter().map(|p| offer(*p)).collect()
}

const ASK: Ask = Ask {
    prompt_tokens: 400,
    max_tokens: None,
    time_left: None,
};

/// Runs `rounds` requests of every task in turn; returns (cost, good answers, requests) and
/// each task's picks.
fn run(
    r: &mut Router,
    q: &[[f64; 4]],
    rng: &mut StdRng,
    rounds: usize,
) -> ((f64, f64, f64), Vec<Vec<usize>>) {
    let offers = offers();
    let (mut cost, mut good) = (0.0, 0.0);
    let mut picks = vec![Vec::with_capacity(rounds); q.len()];
    for _ in 0..rounds {
        for (t, row) in q.iter().enumerate() {
            let c = r.choose(Some(&format!("task-{t}")), &ASK, &offers);
            let w = c.winner();
            let ok = rng.random_bool(row[w]);
            r.observe(&c.task, w, f64::from(u8::from(ok)), None);
            cost += PRICES[w];
            good += f64::from(u8::from(ok));
            picks[t].push(w);
        }
    }
    ((cost, good, (rounds * q.len()) as f64), picks)
}

fn router() -> Router {
    router_with(RouterPolicy::default())
}

fn router_with(policy: RouterPolicy) -> Router {
    let names = ["c1", "c2_5", "c6", "c15"]
        .iter()
        .map(|n| Arc::from(*n))
        .collect();
    Router::new("auto", names, policy)
}

fn share(picks: &[usize], who: usize) -> f64 {
    picks.iter().filter(|&&w| w == who).count() as f64 / picks.len().max(1) as f64
}

#[test]
fn on_a_mix_not_monotone_in_price_it_costs_within_fifteen_percent_of_the_oracle() {
    let q = table();
    let (oracle_cost, oracle_good) = oracle_rates(&q, RouterPolicy::default().floor);
    for seed in 1..=4 {
        let mut r = router();
        let mut rng = StdRng::seed_from_u64(seed);
        run(&mut r, &q, &mut rng, 2_000);
        let ((cost, good, reqs), picks) = run(&mut r, &q, &mut rng, 6_000);
        let (cost, good) = (cost / reqs, good / reqs);
        eprintln!(
            "seed {seed}: cost {:.3}x the oracle's, good answers {:.3}x",
            cost / oracle_cost,
            good / oracle_good
        );
        assert!(
            cost <= 1.15 * oracle_cost,
            "seed {seed}: cost {cost:.3} vs {oracle_cost:.3}"
        );
        assert!(
            good >= 0.98 * oracle_good,
            "seed {seed}: good {good:.3} vs {oracle_good:.3}"
        );
        // The cheap candidate just above the floor carries its task; where none clears, the
        // best (the cheap one) does, not the dearest.
        assert!(
            share(&picks[0], 0) >= 0.8,
            "seed {seed}: task 0 on c1 {:.2}",
            share(&picks[0], 0)
        );
        assert!(
            share(&picks[5], 0) >= 0.8,
            "seed {seed}: task 5 on c1 {:.2}",
            share(&picks[5], 0)
        );
        assert!(
            share(&picks[5], 3) <= 0.05,
            "seed {seed}: task 5 on c15 {:.2}",
            share(&picks[5], 3)
        );
    }
}

/// The first request of `picks` from which `who` takes at least 80% of the next 50: when a
/// change was found and acted on.
fn found_at(picks: &[usize], who: usize) -> Option<usize> {
    (0..picks.len().saturating_sub(50)).find(|&k| share(&picks[k..k + 50], who) >= 0.8)
}

#[test]
fn a_drop_and_an_improvement_are_found_within_about_a_thousand_requests() {
    let floor = RouterPolicy::default().floor;
    let mut within = 0;
    for seed in 1..=8 {
        let mut q = table();
        let mut r = router();
        let mut rng = StdRng::seed_from_u64(seed);
        run(&mut r, &q, &mut rng, 3_000);
        // Task 1's choice (2.5x) drops below the floor; on task 3, the 6x candidate (cheaper
        // than the choice, 15x, and rejected at 0.70) improves past it.
        q[1][1] = 0.60;
        q[3][2] = 0.93;
        assert_eq!((oracle(&q[1], floor), oracle(&q[3], floor)), (2, 2));
        let (_, picks) = run(&mut r, &q, &mut rng, 3_000);
        let left = share(&picks[1][600..1_000], 1);
        let found = found_at(&picks[3], 2);
        eprintln!(
            "seed {seed}: task 1 on c2.5 over requests 600-1000 after the change {left:.2}; the improvement on task 3 acted on from request {found:?}; c6 over 2000-3000 {:.2}",
            share(&picks[3][2_000..], 2)
        );
        assert!(left <= 0.1, "seed {seed}: the drop on task 1 was not found");
        // A rejected candidate is seen only through looks, at a share of the task's requests
        // that follows its chance to overturn the rejection (a few percent at 0.70 against a
        // floor of 0.8): docs/routing.md derives the time it takes.
        let at = found.unwrap_or(usize::MAX);
        assert!(
            at <= 1_250,
            "seed {seed}: the improvement was found at {found:?}"
        );
        within += usize::from(at <= 1_000);
        assert!(
            share(&picks[3][2_000..], 2) >= 0.8,
            "seed {seed}: the improvement was not kept"
        );
    }
    assert!(
        within >= 6,
        "found within 1,000 requests on {within} of 8 seeds"
    );
}

/// A GSM8K-like task: one task, a weak candidate right 64% of the time and a strong one 92%
/// at six times its price, a floor of 0.8 (the strong one is the choice in hindsight).
fn gsm8k_like(policy: &RouterPolicy, seed: u64, n: usize, change_at: Option<usize>) -> Vec<usize> {
    let names = vec![Arc::from("weak"), Arc::from("strong")];
    let mut r = Router::new("auto", names, policy.clone());
    let offers = [offer(PRICES[0]), offer(PRICES[2])];
    let mut rng = StdRng::seed_from_u64(seed);
    let mut q = [0.64, 0.92];
    (0..n)
        .map(|k| {
            if Some(k) == change_at {
                q[0] = 0.92;
            }
            let c = r.choose(Some("gsm8k"), &ASK, &offers);
            let w = c.winner();
            let ok = rng.random_bool(q[w]);
            r.observe(&c.task, w, f64::from(u8::from(ok)), None);
            w
        })
        .collect()
}

#[test]
fn on_a_task_with_a_clear_winner_the_loser_is_left_alone_once_settled() {
    let policy = RouterPolicy::default();
    for seed in 1..=8 {
        let picks = gsm8k_like(&policy, seed, 1_319, None);
        let settled = 1.0 - share(&picks[300..], 0);
        let whole = 1.0 - share(&picks, 0);
        let picks = gsm8k_like(&policy, seed, 4_000, Some(1_000));
        let found = found_at(&picks[1_000..], 0);
        eprintln!(
            "seed {seed}: strong share {whole:.3} over 1,319 requests, {settled:.3} after the 300th; the weak one improving to 0.92 is acted on {found:?} requests after"
        );
        // In hindsight every request goes to the strong one: within a point of that once the
        // task is settled.
        assert!(
            settled >= 0.99,
            "seed {seed}: strong share {settled:.3} once settled"
        );
    }
}
