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

fn offers() -> Vec<Offer> {
    PRICES
        .iter()
        .map(|p| Offer {
            price: Some(TokenPrice {
                input: p / 4.0,
                cached_input: p / 40.0,
                output: *p,
            }),
            ttfb_p95: None,
            available: true,
        })
        .collect()
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

#[test]
fn a_drop_is_found_within_a_thousand_requests_and_an_improvement_within_three_thousand() {
    let floor = RouterPolicy::default().floor;
    for seed in 1..=4 {
        let mut q = table();
        let mut r = router();
        let mut rng = StdRng::seed_from_u64(seed);
        run(&mut r, &q, &mut rng, 3_000);
        // Task 1's choice (2.5x) drops below the floor; on task 3, the 6x candidate (cheaper
        // than the choice, 15x) improves past it.
        q[1][1] = 0.60;
        q[3][2] = 0.93;
        assert_eq!((oracle(&q[1], floor), oracle(&q[3], floor)), (2, 2));
        let (_, picks) = run(&mut r, &q, &mut rng, 3_000);
        let late = |t: usize, who: usize, from: usize| share(&picks[t][from..from + 400], who);
        eprintln!(
            "seed {seed}: task 1 on c2.5 over requests 600-1000 after the change {:.2}; task 3 on c6 over 600-1000 {:.2}, 2600-3000 {:.2}",
            late(1, 1, 600),
            late(3, 2, 600),
            late(3, 2, 2_600),
        );
        eprintln!(
            "seed {seed}: task 3's share on c6 by 200 requests after the change {:?}",
            (0..15)
                .map(|k| (share(&picks[3][k * 200..k * 200 + 200], 2) * 100.0).round())
                .collect::<Vec<_>>()
        );
        // The drop is found within 1,000 requests of the task: the candidate is left.
        assert!(
            late(1, 1, 600) <= 0.1,
            "seed {seed}: the drop on task 1 was not found"
        );
        // The improvement of a candidate that does not carry the task is seen only through
        // revisits: within 1,000 requests on three of these seeds, 1,800 on the fourth. The
        // bound: telling 0.93 from 0.70 takes about 24 of its answers, and at a revisit share
        // of 0.05 over three rejected candidates it gets one in 60 of the task's requests
        // (about 1,440 requests shared evenly); a share of 0.1 finds it within 1,000 on every
        // seed here, at 0.980-0.986x the oracle's good answers (docs/routing.md, "The automatic
        // router").
        assert!(
            late(3, 2, 2_600) >= 0.8,
            "seed {seed}: the improvement on task 3 was not found"
        );
    }
}

#[test]
fn with_twice_the_revisits_every_change_is_found_within_a_thousand_requests_at_the_same_bill() {
    // The setting that buys faster discovery (docs/routing.md, "The automatic router"): the whole
    // acceptance at once, on every seed.
    let policy = RouterPolicy {
        revisit: 0.1,
        ..RouterPolicy::default()
    };
    let (oracle_cost, oracle_good) = oracle_rates(&table(), policy.floor);
    for seed in 1..=4 {
        let mut q = table();
        let mut r = router_with(policy.clone());
        let mut rng = StdRng::seed_from_u64(seed);
        run(&mut r, &q, &mut rng, 2_000);
        let ((cost, good, reqs), _) = run(&mut r, &q, &mut rng, 6_000);
        let (cost, good) = (cost / reqs, good / reqs);
        eprintln!(
            "seed {seed}, revisit 0.1: cost {:.3}x the oracle's, good answers {:.3}x",
            cost / oracle_cost,
            good / oracle_good
        );
        assert!(cost <= 1.15 * oracle_cost, "seed {seed}: cost {cost:.3}");
        assert!(good >= 0.98 * oracle_good, "seed {seed}: good {good:.3}");
        q[1][1] = 0.60;
        q[3][2] = 0.93;
        let (_, picks) = run(&mut r, &q, &mut rng, 1_000);
        // Found within 1,000 requests: carried (or left) over the last hundred of them.
        let late = |t: usize, who: usize| share(&picks[t][900..1_000], who);
        eprintln!(
            "seed {seed}, revisit 0.1: requests 900-1000 after the change: task 1 on c2.5 {:.2}, task 3 on c6 {:.2}",
            late(1, 1),
            late(3, 2)
        );
        assert!(late(1, 1) <= 0.1, "seed {seed}: the drop was not found");
        assert!(
            late(3, 2) >= 0.8,
            "seed {seed}: the improvement was not found"
        );
    }
}
