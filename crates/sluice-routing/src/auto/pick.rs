//! The router's arithmetic over candidates: what a call is expected to cost, and which of a
//! pool is cheapest, or believed best.

use super::{Arm, Ask, DEFAULT_OUTPUT, Estimate, TokenPrice};

/// Expected USD of a call: prompt tokens at the price of their expected cached share, plus
/// the output length seen for this task and candidate (else the mean of the task's other
/// candidates, else `max_tokens`, else [`DEFAULT_OUTPUT`]).
pub(super) fn expected_cost(p: &TokenPrice, arm: &Arm, arms: &[Arm], ask: &Ask) -> f64 {
    let output = arm.output.get().unwrap_or_else(|| {
        let seen: Vec<f64> = arms.iter().filter_map(|a| a.output.get()).collect();
        if seen.is_empty() {
            ask.max_tokens.map_or(DEFAULT_OUTPUT, |m| m as f64)
        } else {
            seen.iter().sum::<f64>() / seen.len() as f64
        }
    });
    let cached = arm.cached.get().unwrap_or(0.0);
    let prompt = ask.prompt_tokens as f64;
    prompt * ((1.0 - cached) * p.input + cached * p.cached_input) + output * p.output
}

/// Cheaper first; an unpriced cost after every priced one.
pub(super) fn cost_order(a: Option<f64>, b: Option<f64>) -> std::cmp::Ordering {
    match (a, b) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    }
}

/// The cheapest of `pool` that passes `ok` (ties: the first).
pub(super) fn cheapest(
    pool: &[usize],
    e: &[Estimate],
    ok: impl Fn(usize) -> bool,
) -> Option<usize> {
    pool.iter()
        .copied()
        .filter(|&i| ok(i))
        .min_by(|&a, &b| cost_order(e[a].cost, e[b].cost))
}

/// The one of `pool` with the best expected quality; of equals, the dearest (with nothing
/// learnt of any, price is the only sign of quality there is).
pub(super) fn best_expected(pool: &[usize], e: &[Estimate]) -> usize {
    pool.iter()
        .copied()
        .max_by(|&a, &b| {
            e[a].mean
                .total_cmp(&e[b].mean)
                .then_with(|| cost_order(e[a].cost, e[b].cost))
        })
        .unwrap_or(0)
}

/// What a call is worth at expected quality `q` when a good answer is worth `worth`, less its
/// `cost` (an unpriced one is worth nothing to the budget mode).
pub(super) fn net_value(worth: f64, q: f64, cost: Option<f64>) -> f64 {
    cost.map_or(f64::NEG_INFINITY, |c| worth * q - c)
}

/// The one of `pool` with the highest `score` (ties: the first).
pub(super) fn best_by(pool: &[usize], score: impl Fn(usize) -> f64) -> usize {
    pool.iter()
        .copied()
        .max_by(|&a, &b| {
            score(a)
                .total_cmp(&score(b))
                .then(std::cmp::Ordering::Greater)
        })
        .unwrap_or(0)
}

/// The candidates a request may take: available and fitting the deadline, else available,
/// else all (the walk then answers with the group's own error).
pub(super) fn pool(estimates: &[Estimate]) -> Vec<usize> {
    let fit: Vec<usize> = (0..estimates.len())
        .filter(|&i| estimates[i].available && estimates[i].fits)
        .collect();
    if !fit.is_empty() {
        fit
    } else {
        let up: Vec<usize> = (0..estimates.len())
            .filter(|&i| estimates[i].available)
            .collect();
        if up.is_empty() {
            (0..estimates.len()).collect()
        } else {
            up
        }
    }
}

/// The order to fall back in: the winner first, then those that clear the floor by cost,
/// then the others by belief.
pub(super) fn fallback_order(estimates: &[Estimate], winner: usize, floor: f64) -> Vec<usize> {
    // The rest, to fall back to: those that clear the floor by cost, then the others by
    // belief; the winner first.
    let mut rest: Vec<usize> = (0..estimates.len()).filter(|&i| i != winner).collect();
    rest.sort_by(|&a, &b| {
        let (ea, eb) = (&estimates[a], &estimates[b]);
        let (ca, cb) = (ea.lower >= floor, eb.lower >= floor);
        cb.cmp(&ca).then_with(|| {
            if ca {
                cost_order(ea.cost, eb.cost)
            } else {
                eb.mean.total_cmp(&ea.mean)
            }
        })
    });
    let mut order = vec![winner];
    order.extend(rest);
    order
}
