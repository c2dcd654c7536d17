//! The automatic router: a model name whose group is chosen per request among candidate
//! groups, by what has been learnt of each for the request's task. Its whole decision lives
//! here, as state (a Beta posterior of a good answer per task and candidate, the output
//! length and cached share seen, an exploration budget, a seeded random source) and pure
//! functions of it and the facts the walk hands over (each candidate's expected cost inputs,
//! its observed first-byte P95, whether it can take the call, the time left).
//!
//! The rule: the cheapest candidate whose lower credible bound clears the quality floor and
//! whose P95 first byte fits the deadline; when none clears it, the one with the best
//! expected quality (the dearest of equals: with nothing learnt, price is the only sign of
//! quality). Exploration is optimistic and bounded by a share of each task's requests: a
//! candidate cheaper than the choice whose upper credible bound still clears the floor (one
//! not yet decided either way) is tried, the cheapest first, until it is decided; when none
//! clears, one whose upper bound beats the choice's mean. A candidate already rejected is
//! looked at again in proportion to its chance to overturn the rejection (`revisit.rs`): one
//! rejected on decisive evidence rarely, one near the line or whose evidence has faded more,
//! and one believed over the line again is explored like a new one. Each
//! candidate keeps a short-memory belief beside its long one; when the two disagree beyond
//! chance, the long one is replaced (a change found in tens of observations, not hundreds).
//! Evidence also fades (an observation of a candidate keeps `1 - 1/memory` of what was known
//! of it, and a tenth as much fades from the task's other candidates).

mod belief;
#[cfg(test)]
mod budget_mix;
mod choose;
#[cfg(test)]
mod mixes;
#[cfg(test)]
mod modes;
mod params;
mod pick;
mod revisit;
mod store;
#[cfg(test)]
mod tests;
pub mod told;

use std::sync::Arc;
use std::time::Duration;

use hashbrown::HashMap;

pub use belief::{Belief, Mean, PRIOR, normal_quantile};
pub use params::RouterParams;
pub use told::{RouterLog, Told};

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
    /// The share of each task's requests a rejected candidate may draw when its chance to
    /// overturn the rejection is 1: each draws its chance times this, all of a task's together
    /// at most this (so an improvement is seen, and one rejected on decisive evidence is left
    /// nearly alone).
    pub revisit: f64,
    /// The budget mode: what a good answer is worth, in USD (`None`: the floor mode). Each
    /// request goes where the worth of its expected quality less its expected cost is
    /// largest, so dearer candidates are spent on the tasks where they gain most per dollar.
    pub good_answer_value: Option<f64>,
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
            revisit: 0.2,
            good_answer_value: None,
        }
    }
}

impl RouterPolicy {
    /// The defaults of the floor mode (`None`) or of the budget mode, a good answer worth
    /// `good_answer_value`. The budget mode ranks each task by the difference of two
    /// candidates' qualities per dollar, which takes longer evidence to know than whether one
    /// quality clears a floor (memory 1,000, not 200); and each revisit spends the candidate
    /// the ranking turned down where it gains least, straight off the budget (revisit 0.02,
    /// not 0.2), each look at it weighed by its chance to be the better value. Measured in
    /// `budget_mix.rs`: it closes 80% of the quality gap at 1.03-1.07x the optimum's strong
    /// share.
    pub fn for_mode(good_answer_value: Option<f64>) -> Self {
        match good_answer_value {
            None => Self::default(),
            Some(worth) => Self {
                good_answer_value: Some(worth),
                memory: 1_000.0,
                revisit: 0.02,
                ..Self::default()
            },
        }
    }

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
    /// The posterior with a short memory ([`RECENT_MEMORY`] observations): the detector of
    /// changes.
    pub recent: Belief,
    /// Changes found (the long belief replaced by the short one).
    pub changes: u64,
    /// Its evidence once reached [`DECIDED_AFTER`]: from then on it is looked at again only
    /// by its chance to overturn the choice, never by the optimistic exploration of the new.
    pub settled: bool,
}

/// Standard deviations above the mean of a candidate's optimistic bound: a candidate is
/// undecided while the floor is within it (the prior's bound clears any floor, so a new
/// candidate is always tried).
const OPTIMISM_Z: f64 = 2.0;
/// Evidence (observations, faded) that decides a candidate either way for exploration: one
/// within the router's precision of the floor is not explored for ever (the revisits and the
/// fading of old evidence look at it again).
const DECIDED_AFTER: f64 = 40.0;
/// Observations the short-memory belief of a candidate keeps.
pub const RECENT_MEMORY: f64 = 20.0;
/// Standard deviations between the short and the long belief's means that make a change.
const CHANGE_Z: f64 = 3.0;
/// Observations the short belief needs before it may replace the long one.
const CHANGE_MIN: f64 = 8.0;

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
    /// Chosen by exploration over the one above: a cheaper candidate not yet decided (or,
    /// when none clears, the most hopeful).
    Explore,
    /// None clears the floor (yet, or any more): the one with the best expected quality
    /// (the dearest of equals).
    NoneClears,
    /// A cheaper candidate already rejected, checked again.
    Revisit,
    /// The budget mode: the best value (a good answer's worth times its expected quality,
    /// less its expected cost).
    BestValue,
}

impl Why {
    /// The label in `x-sluice-route`, the record and metrics.
    pub fn label(self) -> &'static str {
        match self {
            Self::Cheapest => "cheapest_clearing_floor",
            Self::Explore => "explore",
            Self::NoneClears => "none_clears_floor",
            Self::Revisit => "revisit",
            Self::BestValue => "best_value",
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

/// What a task may spend on learning now.
#[derive(Clone, Debug, Default)]
struct Credit {
    /// Explorations it may make.
    explore: f64,
    /// Each candidate's credit toward being looked at again (revisits; the budget mode's
    /// explorations too).
    owed: Vec<f64>,
    /// The candidate that last carried the task by clearing the floor.
    incumbent: Option<usize>,
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
    /// Each task's exploration and revisit credits.
    budgets: HashMap<Arc<str>, Credit>,
    /// Counts what it learnt (observations, restores), so a saver knows when to save.
    version: u64,
}

impl Router {
    /// A router over `candidates` that knows nothing yet.
    pub fn new(name: &str, candidates: Vec<Arc<str>>, policy: RouterPolicy) -> Self {
        Self {
            name: Arc::from(name),
            z: normal_quantile(policy.confidence),
            budgets: HashMap::new(),
            version: 0,
            candidates,
            policy,
            tasks: HashMap::new(),
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
        let incumbent = self.budgets.get(task).and_then(|c| c.incumbent);
        let (z, floor) = (self.z, self.policy.floor);
        let arms = self.arms(task);
        let Some(_) = arms.get(candidate) else {
            return;
        };
        let score = score.clamp(0.0, 1.0);
        match replaces {
            Some(old) => {
                arms[candidate].belief.remove(old);
                arms[candidate].recent.remove(old);
            }
            None => {
                for (i, a) in arms.iter_mut().enumerate() {
                    a.belief
                        .decay(if i == candidate { keep } else { keep_other });
                }
                arms[candidate].recent.decay(1.0 - 1.0 / RECENT_MEMORY);
            }
        }
        let arm = &mut arms[candidate];
        arm.belief.add(score);
        arm.recent.add(score);
        arm.settled |= arm.belief.evidence() >= DECIDED_AFTER;
        // A change: the recent answers are unlikely under the long belief; or a candidate
        // that does not carry the task (revisited) credibly clears the floor on its recent
        // answers alone, whatever its old evidence says.
        let (l, r) = (arm.belief, arm.recent);
        let apart = (l.mean() - r.mean()).abs();
        let risen = incumbent != Some(candidate) && r.lower(z) >= floor && l.lower(z) < floor;
        if r.evidence() >= CHANGE_MIN
            && (risen || apart > CHANGE_Z * (l.variance() + r.variance()).sqrt())
        {
            arm.belief = r;
            arm.changes += 1;
        }
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
}
