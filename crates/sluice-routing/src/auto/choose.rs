//! The router's choice for one request: each candidate's estimate, the candidates it may
//! take, the one that clears the floor cheapest (or the best value), exploration of those
//! not yet decided, revisits of those rejected, and the order to fall back in.

use std::sync::Arc;

use super::pick::{
    best_by, best_expected, cheapest, cost_order, expected_cost, fallback_order, net_value, pool,
};
use super::revisit::{Passed, accrue, overturn};
use super::{Arm, Ask, Choice, Credit, DECIDED_AFTER, Estimate, OPTIMISM_Z, Offer, Router, Why};

/// What one request's choice saw: its task, each candidate's arm and estimate, the pool it
/// may take from and the candidate the rule chose.
#[derive(Clone, Copy)]
struct Seen<'a> {
    task: &'a Arc<str>,
    arms: &'a [Arm],
    e: &'a [Estimate],
    pool: &'a [usize],
    exploit: usize,
}

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
        let (exploit, why) = match (worth, clearing, incumbent) {
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
        credit.owed.resize(arms.len(), 0.0);
        credit.incumbent = (why == Why::Cheapest).then_some(exploit);
        credit.explore = (credit.explore + self.policy.explore).min(cap);
        let seen = Seen {
            task: &task,
            arms: &arms,
            e: &estimates,
            pool: &pool,
            exploit,
        };
        let look = match worth {
            Some(worth) => self.priced_look(&seen, worth),
            None => self.floor_look(&seen, why),
        };
        let (winner, why) = look.unwrap_or((exploit, why));
        self.chosen(task, winner, why, estimates, floor)
    }

    /// The floor mode's learning for one request, if it takes the request from `exploit`:
    /// exploration of a cheaper candidate not yet decided (the cheapest first, from the
    /// task's burst), else a look at one rejected, by its chance to clear the floor (to
    /// beat the choice, when none clears).
    fn floor_look(&mut self, seen: &Seen<'_>, why: Why) -> Option<(usize, Why)> {
        let (task, arms, e, pool) = (seen.task, seen.arms, seen.e, seen.pool);
        let exploit = seen.exploit;
        let none_clears = why == Why::NoneClears;
        let line = if none_clears {
            e[exploit].mean
        } else {
            self.policy.floor
        };
        let upper = |i: usize| arms[i].belief.upper(OPTIMISM_Z);
        let below = |i: usize| {
            i != exploit && (none_clears || cost_order(e[i].cost, e[exploit].cost).is_lt())
        };
        // Decided: its evidence reached DECIDED_AFTER, or its optimistic bound fell below the
        // line however little it holds.
        let settled: Vec<bool> = (0..arms.len())
            .map(|i| arms[i].settled || (pool.contains(&i) && below(i) && upper(i) < line))
            .collect();
        for (arm, &s) in self.arms(task).iter_mut().zip(&settled) {
            arm.settled = s;
        }
        // Open: undecided and might clear; or decided, but believed over the line on evidence
        // that does not yet credibly clear it (a change its looks found, confirmed at the
        // exploration's pace).
        let open: Vec<usize> = pool
            .iter()
            .copied()
            .filter(|&i| {
                below(i)
                    && upper(i) >= line
                    && (!settled[i] || arms[i].belief.mean().max(arms[i].recent.mean()) >= line)
            })
            .collect();
        let passed: Vec<Passed> = pool
            .iter()
            .copied()
            .filter(|&i| below(i) && !open.contains(&i))
            .map(|i| Passed {
                index: i,
                chance: overturn(&arms[i].belief, line),
                share: self.policy.revisit,
            })
            .collect();
        // `choose` made the task's credit before asking.
        let credit = self.budgets.get_mut(task)?;
        let again = accrue(&mut credit.owed, &passed, self.policy.revisit);
        // Of the open: the cheapest, when a cheaper one might replace the choice; the most
        // hopeful, when none clears.
        let try_first = if none_clears {
            open.iter()
                .copied()
                .max_by(|&a, &b| upper(a).total_cmp(&upper(b)))
        } else {
            cheapest(&open, e, |_| true)
        };
        if credit.explore >= 1.0
            && let Some(i) = try_first
        {
            credit.explore -= 1.0;
            refund(&mut credit.owed, again);
            return Some((i, Why::Explore));
        }
        again.map(|i| (i, Why::Revisit))
    }

    /// The budget mode's learning for one request, if it takes the request from `exploit`:
    /// exploration of a candidate not yet decided whose optimistic value beats the choice's
    /// (the best such first, from the task's burst), else a look at one decided, by its
    /// chance to be the better value (its quality above the choice's by more than the
    /// difference in cost buys at `worth` a good answer).
    fn priced_look(&mut self, seen: &Seen<'_>, worth: f64) -> Option<(usize, Why)> {
        let (task, arms, e, pool) = (seen.task, seen.arms, seen.e, seen.pool);
        let exploit = seen.exploit;
        let value = |i: usize, q: f64| net_value(worth, q, e[i].cost);
        let here = value(exploit, e[exploit].mean);
        let open: Vec<usize> = pool
            .iter()
            .copied()
            .filter(|&i| i != exploit && arms[i].belief.evidence() < DECIDED_AFTER)
            .filter(|&i| value(i, arms[i].belief.upper(OPTIMISM_Z)) > here)
            .collect();
        let q = e[exploit].mean;
        let passed: Vec<Passed> = pool
            .iter()
            .copied()
            .filter(|&i| i != exploit && !open.contains(&i))
            .filter_map(|i| {
                let gap = e[i].cost? - e[exploit].cost?;
                Some(Passed {
                    index: i,
                    chance: overturn(&arms[i].belief, q + gap / worth),
                    share: self.policy.revisit,
                })
            })
            .collect();
        // `choose` made the task's credit before asking.
        let credit = self.budgets.get_mut(task)?;
        let again = accrue(&mut credit.owed, &passed, self.policy.revisit);
        if credit.explore >= 1.0 && !open.is_empty() {
            credit.explore -= 1.0;
            refund(&mut credit.owed, again);
            let i = best_by(&open, |i| value(i, arms[i].belief.upper(OPTIMISM_Z)));
            return Some((i, Why::Explore));
        }
        again.map(|i| (i, Why::Revisit))
    }

    /// The choice of `winner` for `why`, counted in its arm, with the order to fall back in.
    fn chosen(
        &mut self,
        task: Arc<str>,
        winner: usize,
        why: Why,
        estimates: Vec<Estimate>,
        floor: f64,
    ) -> Choice {
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

/// Gives back the look `again` took when an exploration took the request instead: it falls
/// due again at the next request.
fn refund(owed: &mut [f64], again: Option<usize>) {
    if let Some(o) = again.and_then(|i| owed.get_mut(i)) {
        *o += 1.0;
    }
}
