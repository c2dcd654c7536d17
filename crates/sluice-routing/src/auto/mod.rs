//! The automatic router: a model name whose group is chosen per request among candidate
//! groups, by what has been learnt of each for the request's task. Its whole decision lives
//! here, as state (a Beta posterior of a good answer per task and candidate, the output
//! length and cached share seen, an exploration budget, a seeded random source) and pure
//! functions of it and the facts the walk hands over (each candidate's expected cost inputs,
//! its observed first-byte P95, whether it can take the call, the time left).
//!
//! The rule: the cheapest candidate whose lower credible bound clears the quality floor and
//! whose P95 first byte fits the deadline; when none clears it, the dearest. A
//! bounded share of requests is explored by Thompson sampling: one draw from each
//! posterior, and the cheapest whose draw clears the floor, so a new or recovered candidate
//! gets tried and a settled one rarely is. Evidence fades (an observation of a candidate keeps
//! `1 - 1/memory` of what was known of it, and a quarter as much fades from the task's other
//! candidates), so a candidate that got worse is left, and one left long ago is tried again.

mod belief;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use hashbrown::HashMap;
use rand::SeedableRng;
use rand::rngs::StdRng;

pub use belief::{Belief, Mean, PRIOR, normal_quantile};

/// The task of requests that declare none.
pub const NO_TASK: &str = "default";

/// The task that requests beyond [`RouterPolicy::max_tasks`] distinct tasks share.
pub const OTHER_TASK: &str = "other";

/// Output tokens expected of a call before any answer for its task was seen and the request
/// sets no `max_tokens`.
pub const DEFAULT_OUTPUT: f64 = 256.0;

/// How many times slower the candidates not chosen for an observation of a task forget
/// (their evidence is old, not contradicted): slow enough that a candidate known bad is not
/// retried at every turn, fast enough that one left long ago is tried again.
pub const OTHERS_FORGET_SLOWER: f64 = 10.0;

/// How a router trades quality, cost and exploration.
#[derive(Clone, Debug, PartialEq)]
pub struct RouterPolicy {
    /// The probability of a good answer a candidate must be believed to clear.
    pub floor: f64,
    /// The credibility of the lower bound that must clear it (0.8: the bound 0.84 standard
    /// deviations below the mean).
    pub confidence: f64,
    /// The share of each task's requests that may be explored (a budget, like the hedges').
    pub explore: f64,
    /// Explorations a task may save up and spend at once (a new task starts with them).
    pub explore_burst: f64,
    /// Observations of a task after which old evidence weighs `1/e` (the forgetting).
    pub memory: f64,
    /// What a second of observed P95 first byte is worth, in USD a call (0: cost only).
    pub latency_weight: f64,
    /// Distinct tasks learnt separately; the rest share [`OTHER_TASK`].
    pub max_tasks: usize,
}

impl Default for RouterPolicy {
    fn default() -> Self {
        Self {
            floor: 0.8,
            confidence: 0.8,
            explore: 0.15,
            explore_burst: 20.0,
            memory: 200.0,
            latency_weight: 0.0,
            max_tasks: 256,
        }
    }
}

impl RouterPolicy {
    /// The share of old evidence each observation keeps.
    fn keep(&self) -> f64 {
        1.0 - 1.0 / self.memory.max(1.0)
    }
}

/// What the router knows of one candidate for one task.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Arm {
    /// The posterior of a good answer.
    pub belief: Belief,
    /// Output tokens of its answers.
    pub output: Mean,
    /// The share of the prompt its provider served from cache.
    pub cached: Mean,
    /// Requests it was chosen for.
    pub picks: u64,
    /// Of them, chosen by exploration.
    pub explored: u64,
}

/// What the walk knows of a candidate for this request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Offer {
    /// USD per prompt token at full price, per cached prompt token, per output token; `None`
    /// when its model has no price (it is then never the cheapest).
    pub price: Option<TokenPrice>,
    /// Its deployments' best observed first-byte P95, once observed.
    pub ttfb_p95: Option<Duration>,
    /// Some deployment could take the call now (a breaker closed, not paused, room left).
    pub available: bool,
}

/// Per-token prices in USD.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenPrice {
    /// A prompt token at full price.
    pub input: f64,
    /// A prompt token read from the provider's cache.
    pub cached_input: f64,
    /// An output token.
    pub output: f64,
}

/// The request's side of the facts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ask {
    /// Its prompt's tokens (the estimate).
    pub prompt_tokens: u64,
    /// Its `max_tokens`, if set.
    pub max_tokens: Option<u64>,
    /// The time left before its deadline, if it has one.
    pub time_left: Option<Duration>,
}

/// Why the winner won.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// The cheapest whose lower bound clears the floor and that fits the deadline.
    Cheapest,
    /// Chosen by exploration (Thompson sampling) over the one above.
    Explore,
    /// None clears the floor (yet, or any more): the dearest, on the view that price
    /// follows quality; its evidence then lets exploration find a cheaper one that clears.
    NoneClears,
}

impl Why {
    /// The label in `x-sluice-route`, the record and metrics.
    pub fn label(self) -> &'static str {
        match self {
            Self::Cheapest => "cheapest_clearing_floor",
            Self::Explore => "explore",
            Self::NoneClears => "none_clears_floor",
        }
    }
}

/// The router's view of one candidate for one request (the call record's type, so the
/// walk records it as decided).
pub use sluice_core::CandidateEstimate as Estimate;

/// What the router decided for one request.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    /// The task it was decided for (as learnt: [`NO_TASK`] or [`OTHER_TASK`] included).
    pub task: Arc<str>,
    /// Candidates by index, the winner first, then the others in the order to fall back to.
    pub order: Vec<usize>,
    /// Why the winner won.
    pub why: Why,
    /// Every candidate's estimate, in candidate order.
    pub estimates: Vec<Estimate>,
}

impl Choice {
    /// The winner's index.
    pub fn winner(&self) -> usize {
        self.order.first().copied().unwrap_or(0)
    }
}

/// One (task, candidate) as stored across restarts.
#[derive(Clone, Debug, PartialEq)]
pub struct Stored {
    /// The task.
    pub task: String,
    /// The candidate group.
    pub group: String,
    /// The posterior.
    pub belief: Belief,
    /// Mean output tokens, if seen.
    pub output: Option<f64>,
    /// Mean cached share, if seen.
    pub cached: Option<f64>,
}

/// A router's state.
#[derive(Debug)]
pub struct Router {
    /// The name clients send as `model`.
    pub name: Arc<str>,
    /// The candidate groups, in configured order.
    pub candidates: Vec<Arc<str>>,
    /// Its policy.
    pub policy: RouterPolicy,
    z: f64,
    tasks: HashMap<Arc<str>, Vec<Arm>>,
    /// Each task's exploration budget: explorations it may spend now.
    budgets: HashMap<Arc<str>, f64>,
    /// Counts what it learnt (observations, restores), so a saver knows when to save.
    version: u64,
    rng: StdRng,
}

impl Router {
    /// A router over `candidates` that knows nothing yet; `seed` seeds its draws.
    pub fn new(name: &str, candidates: Vec<Arc<str>>, policy: RouterPolicy, seed: u64) -> Self {
        Self {
            name: Arc::from(name),
            z: normal_quantile(policy.confidence),
            budgets: HashMap::new(),
            version: 0,
            candidates,
            policy,
            tasks: HashMap::new(),
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// The task as learnt: `task`, [`NO_TASK`] for none, [`OTHER_TASK`] once
    /// [`RouterPolicy::max_tasks`] others are known.
    pub fn task_key(&self, task: Option<&str>) -> Arc<str> {
        let t = task.unwrap_or(NO_TASK);
        match self.tasks.get_key_value(t) {
            Some((k, _)) => k.clone(),
            None if self.tasks.len() >= self.policy.max_tasks => Arc::from(OTHER_TASK),
            None => Arc::from(t),
        }
    }

    fn arms(&mut self, task: &Arc<str>) -> &mut Vec<Arm> {
        let n = self.candidates.len();
        self.tasks
            .entry(task.clone())
            .or_insert_with(|| vec![Arm::default(); n])
    }

    /// What is known of `task` (candidate order), if anything.
    pub fn task(&self, task: &str) -> Option<&[Arm]> {
        self.tasks.get(task).map(Vec::as_slice)
    }

    /// Every task learnt, sorted by name.
    pub fn tasks(&self) -> Vec<(Arc<str>, Vec<Arm>)> {
        let mut all: Vec<_> = self
            .tasks
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// How much it has learnt: a count that grows with each observation.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The lower credible bound of `b` under this router's confidence.
    pub fn lower(&self, b: &Belief) -> f64 {
        b.lower(self.z)
    }

    /// Chooses a candidate for a request of `task` with `offers` (candidate order).
    pub fn choose(&mut self, task: Option<&str>, ask: &Ask, offers: &[Offer]) -> Choice {
        let task = self.task_key(task);
        let arms = self.arms(&task).clone();
        let estimates: Vec<Estimate> = self
            .candidates
            .iter()
            .zip(&arms)
            .zip(offers)
            .map(|((group, arm), offer)| Estimate {
                group: group.clone(),
                mean: arm.belief.mean(),
                lower: arm.belief.lower(self.z),
                cost: offer
                    .price
                    .map(|p| expected_cost(&p, arm, &arms, ask) + self.latency_cost(offer)),
                fits: match (ask.time_left, offer.ttfb_p95) {
                    (Some(left), Some(p95)) => p95 <= left,
                    _ => true,
                },
                available: offer.available,
            })
            .collect();
        // The candidates it may take: available and fitting the deadline, else available,
        // else all (the walk then answers with the group's own error).
        let pool: Vec<usize> = {
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
        };
        let floor = self.policy.floor;
        let (exploit, mut why) = match cheapest(&pool, &estimates, |i| estimates[i].lower >= floor)
        {
            Some(i) => (i, Why::Cheapest),
            None => (dearest(&pool, &estimates), Why::NoneClears),
        };
        let mut winner = exploit;
        let cap = if self.policy.explore > 0.0 {
            self.policy.explore_burst.max(1.0)
        } else {
            0.0
        };
        // A task new to the router starts with its whole burst: it has everything to learn.
        let budget = self.budgets.entry(task.clone()).or_insert(cap);
        *budget = (*budget + self.policy.explore).min(cap);
        if *budget >= 1.0 && pool.len() > 1 {
            let draws: Vec<f64> = arms
                .iter()
                .map(|a| a.belief.sample(&mut self.rng))
                .collect();
            let pick = cheapest(&pool, &estimates, |i| draws[i] >= floor)
                .unwrap_or_else(|| best(&pool, &estimates, |i| draws[i]));
            if pick != exploit {
                if let Some(b) = self.budgets.get_mut(&task) {
                    *b -= 1.0;
                }
                winner = pick;
                why = Why::Explore;
            }
        }
        let arm = &mut self.arms(&task)[winner];
        arm.picks += 1;
        if why == Why::Explore {
            arm.explored += 1;
        }
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
        Choice {
            task,
            order,
            why,
            estimates,
        }
    }

    fn latency_cost(&self, offer: &Offer) -> f64 {
        match offer.ttfb_p95 {
            Some(p95) if self.policy.latency_weight > 0.0 => {
                self.policy.latency_weight * p95.as_secs_f64()
            }
            _ => 0.0,
        }
    }

    /// Learns that `candidate`'s answer for `task` scored `score` in `[0, 1]`; every
    /// candidate of the task forgets a little first. `replaces`: the score this answer
    /// already counted (implicitly), now replaced.
    pub fn observe(
        &mut self,
        task: &Arc<str>,
        candidate: usize,
        score: f64,
        replaces: Option<f64>,
    ) {
        let keep = self.policy.keep();
        let keep_other = 1.0 - (1.0 - keep) / OTHERS_FORGET_SLOWER;
        self.version += 1;
        let arms = self.arms(task);
        let Some(_) = arms.get(candidate) else {
            return;
        };
        match replaces {
            Some(old) => arms[candidate].belief.remove(old),
            None => {
                for (i, a) in arms.iter_mut().enumerate() {
                    a.belief
                        .decay(if i == candidate { keep } else { keep_other });
                }
            }
        }
        arms[candidate].belief.add(score.clamp(0.0, 1.0));
    }

    /// Learns the output length and cached share of `candidate`'s answer for `task`.
    pub fn observe_usage(&mut self, task: &Arc<str>, candidate: usize, output: u64, cached: f64) {
        let keep = 1.0 - 1.0 / self.policy.memory.clamp(1.0, 50.0);
        self.version += 1;
        if let Some(arm) = self.arms(task).get_mut(candidate) {
            arm.output.add(output as f64, keep);
            arm.cached.add(cached.clamp(0.0, 1.0), keep);
        }
    }

    /// Everything learnt, to store.
    pub fn export(&self) -> Vec<Stored> {
        let mut out = Vec::new();
        for (task, arms) in self.tasks() {
            for (group, arm) in self.candidates.iter().zip(&arms) {
                out.push(Stored {
                    task: task.to_string(),
                    group: group.to_string(),
                    belief: arm.belief,
                    output: arm.output.get(),
                    cached: arm.cached.get(),
                });
            }
        }
        out
    }

    /// Takes back what was stored; entries of groups no longer candidates are left out.
    /// Returns how many were taken.
    pub fn restore(&mut self, stored: &[Stored]) -> usize {
        let mut taken = 0;
        for s in stored {
            let Some(i) = self.candidates.iter().position(|c| **c == *s.group) else {
                continue;
            };
            let task = self.task_key(Some(&s.task));
            let arm = &mut self.arms(&task)[i];
            arm.belief = Belief {
                alpha: s.belief.alpha.max(PRIOR),
                beta: s.belief.beta.max(PRIOR),
            };
            arm.output = Mean::of(s.output);
            arm.cached = Mean::of(s.cached);
            taken += 1;
        }
        taken
    }
}

/// Expected USD of a call: prompt tokens at the price of their expected cached share, plus
/// the output length seen for this task and candidate (else the mean of the task's other
/// candidates, else `max_tokens`, else [`DEFAULT_OUTPUT`]).
fn expected_cost(p: &TokenPrice, arm: &Arm, arms: &[Arm], ask: &Ask) -> f64 {
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

fn cost_order(a: Option<f64>, b: Option<f64>) -> std::cmp::Ordering {
    match (a, b) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    }
}

/// The cheapest of `pool` that passes `ok` (ties: the first).
fn cheapest(pool: &[usize], e: &[Estimate], ok: impl Fn(usize) -> bool) -> Option<usize> {
    pool.iter()
        .copied()
        .filter(|&i| ok(i))
        .min_by(|&a, &b| cost_order(e[a].cost, e[b].cost))
}

/// The dearest of `pool` (an unpriced one counts as dearer than any priced).
fn dearest(pool: &[usize], e: &[Estimate]) -> usize {
    pool.iter()
        .copied()
        .max_by(|&a, &b| cost_order(e[a].cost, e[b].cost))
        .unwrap_or(0)
}

/// The one of `pool` with the highest `score`, ties to the dearest.
fn best(pool: &[usize], e: &[Estimate], score: impl Fn(usize) -> f64) -> usize {
    pool.iter()
        .copied()
        .max_by(|&a, &b| {
            score(a)
                .total_cmp(&score(b))
                .then_with(|| cost_order(e[a].cost, e[b].cost))
        })
        .unwrap_or(0)
}
