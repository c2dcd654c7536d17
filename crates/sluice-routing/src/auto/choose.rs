//! The router's choice for one request: each candidate's estimate, the candidates it may
//! take, the one that clears the floor cheapest (or the best value), exploration of those
//! not yet decided, revisits of those rejected, and the order to fall back in.

use super::pick::{
    best_by, best_expected, cheapest, cost_order, expected_cost, fallback_order, net_value, pool,
};
use super::{Arm, Ask, Choice, Credit, DECIDED_AFTER, Estimate, OPTIMISM_Z, Offer, Router, Why};

impl Router {
    /// Chooses a candidate for a request of `task` with `offers` (candidate order).
    pub fn choose(&mut self, task: Option<&str>, ask: &Ask, offers: &[Offer]) -> Choice {
        let task = self.task_key(task);
        let arms = self.arms(&task).clone();
        let estimates = self.estimates(&arms, offers, ask);
        // The candidates it may take: available and fitting the deadline, else available,
        // else all (the walk then answers with the group's own error).
        let pool = pool(&estimates);
        let floor = self.policy.floor;
        // The candidate that carried the task keeps it while it is still believed to clear
        // (its mean, not its bound: a candidate a little above the floor would otherwise
        // flip in and out with the noise of its evidence), unless a cheaper one clears.
        let incumbent = self
            .budgets
            .get(&task)
            .and_then(|c| c.incumbent)
            .filter(|&i| pool.contains(&i) && estimates[i].mean >= floor);
        let clearing = cheapest(&pool, &estimates, |i| estimates[i].lower >= floor);
        // In the budget mode, a good answer is worth `v`: the best value wins.
        let worth = self.policy.good_answer_value;
        let value = |i: usize, q: f64| net_value(worth.unwrap_or(0.0), q, estimates[i].cost);
        let (exploit, mut why) = match (worth, clearing, incumbent) {
            (Some(_), _, _) => (
                best_by(&pool, |i| value(i, estimates[i].mean)),
                Why::BestValue,
            ),
            (None, Some(c), Some(i))
                if cost_order(estimates[i].cost, estimates[c].cost).is_lt() =>
            {
                (i, Why::Cheapest)
            }
            (None, None, Some(i)) => (i, Why::Cheapest),
            (None, Some(c), _) => (c, Why::Cheapest),
            (None, None, None) => (best_expected(&pool, &estimates), Why::NoneClears),
        };
        let mut winner = exploit;
        let upper: Vec<f64> = arms.iter().map(|a| a.belief.upper(OPTIMISM_Z)).collect();
        let cheaper = |i: usize| {
            i != exploit && cost_order(estimates[i].cost, estimates[exploit].cost).is_lt()
        };
        // Not decided: might clear the floor (or, when none clears, beat the choice), on
        // less evidence than decides it.
        let open: Vec<usize> = pool
            .iter()
            .copied()
            .filter(|&i| arms[i].belief.evidence() < DECIDED_AFTER)
            .filter(|&i| match why {
                Why::NoneClears => i != exploit && upper[i] > estimates[exploit].mean,
                Why::BestValue => {
                    i != exploit && value(i, upper[i]) > value(exploit, estimates[exploit].mean)
                }
                _ => cheaper(i) && upper[i] >= floor,
            })
            .collect();
        let cap = if self.policy.explore > 0.0 {
            self.policy.explore_burst.max(1.0)
        } else {
            0.0
        };
        // A task new to the router starts with its whole burst: it has everything to learn.
        let credit = self.budgets.entry(task.clone()).or_insert(Credit {
            explore: cap,
            ..Credit::default()
        });
        credit.incumbent = (why == Why::Cheapest).then_some(exploit);
        credit.explore = (credit.explore + self.policy.explore).min(cap);
        credit.revisit = (credit.revisit + self.policy.revisit).min(1.0);
        // Of the open: the cheapest, when a cheaper one might replace the choice; the most
        // hopeful, when none clears.
        let try_first = if why == Why::NoneClears {
            open.iter()
                .copied()
                .max_by(|&a, &b| upper[a].total_cmp(&upper[b]))
        } else if why == Why::BestValue {
            (!open.is_empty()).then(|| best_by(&open, |i| value(i, upper[i])))
        } else {
            cheapest(&open, &estimates, |_| true)
        };
        if credit.explore >= 1.0
            && let Some(i) = try_first
        {
            credit.explore -= 1.0;
            winner = i;
            why = Why::Explore;
        } else if credit.revisit >= 1.0 {
            // Rejected: cheaper than the choice (any other, when none clears), not open.
            let rejected: Vec<usize> = pool
                .iter()
                .copied()
                .filter(|&i| {
                    i != exploit
                        && !open.contains(&i)
                        && (matches!(why, Why::NoneClears | Why::BestValue) || cheaper(i))
                })
                .collect();
            if let Some(i) = revisit(&rejected, credit, &arms) {
                winner = i;
                why = Why::Revisit;
            }
        }
        let arm = &mut self.arms(&task)[winner];
        arm.picks += 1;
        if matches!(why, Why::Explore | Why::Revisit) {
            arm.explored += 1;
        }
        let order = fallback_order(&estimates, winner, floor);
        Choice {
            task,
            order,
            why,
            estimates,
        }
    }

    /// Each candidate's estimate for `ask`: belief, bound, expected cost, whether it fits the
    /// time left and is available.
    fn estimates(&self, arms: &[Arm], offers: &[Offer], ask: &Ask) -> Vec<Estimate> {
        self.candidates
            .iter()
            .zip(arms)
            .zip(offers)
            .map(|((group, arm), offer)| Estimate {
                group: group.clone(),
                mean: arm.belief.mean(),
                lower: arm.belief.lower(self.z),
                cost: offer
                    .price
                    .map(|p| expected_cost(&p, arm, arms, ask) + self.latency_cost(offer)),
                fits: match (ask.time_left, offer.ttfb_p95) {
                    (Some(left), Some(p95)) => p95 <= left,
                    _ => true,
                },
                available: offer.available,
            })
            .collect()
    }
}

/// Of the `rejected` candidates, the one to revisit, when any and the credit allows: the most
/// hopeful on its recent answers (one that got better draws the revisits that confirm it);
/// of equals, in turn.
fn revisit(rejected: &[usize], credit: &mut Credit, arms: &[Arm]) -> Option<usize> {
    if rejected.is_empty() {
        return None;
    }
    credit.revisit -= 1.0;
    let turn = credit.turn;
    credit.turn += 1;
    let hope = |i: usize| arms[i].recent.upper(OPTIMISM_Z);
    (0..rejected.len())
        .map(|k| rejected[(turn + k) % rejected.len()])
        .max_by(|&a, &b| {
            hope(a)
                .total_cmp(&hope(b))
                .then(std::cmp::Ordering::Greater)
        })
}
