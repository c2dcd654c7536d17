//! The semantic cache as the gateway holds it: its entries (behind [`SemanticEntries`]), with the hottest
//! sampling it serves, each route's mode (a route may have its own threshold or error bound,
//! or none at all) and what each route learns: its running error estimate, its pooled
//! threshold curve, and its verification budget (verified mode: verifications spend at most
//! the route's share of its would-be hits, beyond a small burst; a would-be hit the budget
//! cannot pay for is neither served nor verified, but asked upstream as a miss). A route
//! that has served nothing for [`STOP_UNSERVED`] would-be hits and whose evidence says no
//! similarity can be certified under its bound ([`Threshold::cannot_certify`]) stops
//! verifying: [`TRICKLE`] of its would-be hits are still verified, to notice a change, the
//! rest are misses; a hit served (an entry that learnt on its own) or better evidence
//! resumes it.

use std::sync::Arc;

use bytes::Bytes;
use hashbrown::HashMap;
use parking_lot::Mutex;
use tokio::time::Instant;

use sluice_tail::budget::Budget;

use super::{
    ErrorEstimate, Index, Limits, Lookup, Mode, Policy, Question, SemanticEntries, Threshold,
};
use crate::Stored;

/// Verifications a route may make before its would-be hits have paid for any (its curve
/// must start somewhere), and the most it saves up.
pub const VERIFY_BURST: f64 = 20.0;

/// Would-be hits in a row without a hit served before a route that cannot certify stops
/// verifying: its entries are not learning to serve on their own either. At 100 a route
/// stops close to as early as its evidence allows ([`super::verified::STOP_AFTER`]
/// verified answers); at 50 it stopped streams whose entries were still learning (see
/// `docs/caches.md`).
pub const STOP_UNSERVED: u64 = 100;

pub use super::verified::TRICKLE;

/// What a route learns.
#[derive(Debug)]
struct RouteState {
    estimate: ErrorEstimate,
    pooled: Threshold,
    budget: Option<Budget>,
    /// Would-be hits since the last hit served.
    unserved: u64,
}

impl RouteState {
    /// Whether it has stopped verifying under `mode`.
    fn stopped(&self, mode: Mode) -> bool {
        match mode {
            Mode::Verified { delta, .. } => {
                self.unserved >= STOP_UNSERVED && self.pooled.cannot_certify(delta)
            }
            Mode::Static { .. } => false,
        }
    }
}

impl RouteState {
    fn new(mode: Mode) -> Self {
        Self {
            estimate: ErrorEstimate::default(),
            pooled: Threshold::pooled(),
            budget: match mode {
                Mode::Verified { budget, .. } => Some(Budget::new(budget, VERIFY_BURST)),
                Mode::Static { .. } => None,
            },
            unserved: 0,
        }
    }
}

/// The semantic cache.
#[derive(Debug)]
pub struct SemanticCache {
    entries: Box<dyn SemanticEntries>,
    limits: Limits,
    /// The policy's mode, for routes with none of their own.
    mode: Mode,
    /// Routes (model groups) whose mode is not the policy's; `None`: not cached by meaning.
    routes: HashMap<String, Option<Mode>>,
    learnt: Mutex<HashMap<Arc<str>, RouteState>>,
}

impl SemanticCache {
    /// An empty cache under `policy`, serving requests up to `temperature` `ceiling`, its
    /// entries kept in this process.
    pub fn new(policy: Policy, ceiling: f64) -> Self {
        Self::with_entries(Box::new(Mutex::new(Index::new(policy))), ceiling)
    }

    /// A cache over `entries` (matched under their policy), serving requests up to
    /// `temperature` `ceiling`.
    pub fn with_entries(entries: Box<dyn SemanticEntries>, ceiling: f64) -> Self {
        let policy = entries.policy();
        Self {
            entries,
            limits: Limits::new(ceiling),
            mode: policy.mode,
            routes: HashMap::new(),
            learnt: Mutex::new(HashMap::new()),
        }
    }

    /// With its entries kept by what `keep` makes of their policy (by several instances
    /// together, say), its routes' modes unchanged; entries held so far are dropped.
    pub fn kept_by(mut self, keep: impl FnOnce(Policy) -> Box<dyn SemanticEntries>) -> Self {
        self.entries = keep(self.entries.policy());
        self
    }

    /// With its entries bounded to `max_bytes` from now on (the oldest leave as others come).
    pub fn bounded(self, max_bytes: usize) -> Self {
        self.entries.set_max_bytes(max_bytes);
        self
    }

    /// With `route`'s own mode (`None`: its requests are never cached by meaning).
    pub fn with_route(mut self, route: &str, mode: Option<Mode>) -> Self {
        self.routes.insert(route.to_string(), mode);
        self
    }

    /// `route`'s mode; `None` when it is not cached by meaning.
    pub fn mode(&self, route: &str) -> Option<Mode> {
        match self.routes.get(route) {
            Some(m) => *m,
            None => Some(self.mode),
        }
    }

    /// Each route's current error estimate (the share of wrong answers among would-be hits)
    /// and the verifications it rests on, for routes that have one.
    pub fn estimates(&self) -> Vec<(Arc<str>, f64, f64)> {
        let mut v: Vec<_> = self
            .learnt
            .lock()
            .iter()
            .filter_map(|(r, l)| Some((r.clone(), l.estimate.value()?, l.estimate.evidence())))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Each route in verified mode that has learnt anything, and whether it has stopped
    /// verifying (its evidence says no similarity can be certified under its bound).
    pub fn stopped(&self) -> Vec<(Arc<str>, bool)> {
        let mut v: Vec<_> = self
            .learnt
            .lock()
            .iter()
            .filter_map(|(r, l)| match self.mode(r) {
                Some(m @ Mode::Verified { .. }) => Some((r.clone(), l.stopped(m))),
                _ => None,
            })
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// What verifying a would-be hit of `route` on entry `id` of `partition` at `similarity`
    /// (verified with probability `p`) found: taught to the entry, counted in the route's
    /// error estimate and taught to its pooled curve (and, through the entries, to other
    /// instances' curves).
    pub fn verified(
        &self,
        route: &Arc<str>,
        (partition, id): (u64, u64),
        similarity: f64,
        right: bool,
        p: f64,
    ) {
        self.entries
            .observe(partition, id, Some(route), similarity, right);
        let mode = self.mode(route).unwrap_or(self.mode);
        let mut learnt = self.learnt.lock();
        let l = learnt
            .entry(route.clone())
            .or_insert_with(|| RouteState::new(mode));
        l.estimate.verified(right, p);
        l.pooled.observe(similarity, right);
    }

    /// Teaches the routes' pooled curves what other instances' verifications found. Their
    /// error estimates stay this instance's: an estimate weighs verifications against the
    /// would-be hits it saw itself.
    fn learn_elsewhere(&self, learnt: &mut HashMap<Arc<str>, RouteState>) {
        for v in self.entries.learnt_elsewhere() {
            let mode = self.mode(&v.route).unwrap_or(self.mode);
            learnt
                .entry(v.route)
                .or_insert_with(|| RouteState::new(mode))
                .pooled
                .observe(v.similarity, v.right);
        }
    }

    /// With messages up to `max_chars` matched by meaning.
    pub fn with_max_chars(mut self, max_chars: usize) -> Self {
        self.limits.max_chars = max_chars;
        self
    }

    /// What a request must stay within to be matched.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The hottest `temperature` it serves.
    pub fn ceiling(&self) -> f64 {
        self.limits.temperature_ceiling
    }

    /// Its policy.
    pub fn policy(&self) -> Policy {
        self.entries.policy()
    }

    /// Decides for `q` of `route` (under `mode`, its [`SemanticCache::mode`]) with vector
    /// `v` at `now` (`u`: the coin that samples verifications); a would-be hit counts in
    /// the route's error estimate and pays into its verification budget, and a verification
    /// the budget cannot pay for becomes [`Lookup::Unverified`].
    pub fn lookup(
        &self,
        q: &Question,
        route: &str,
        mode: Mode,
        v: &[f32],
        now: Instant,
        u: f64,
    ) -> Lookup {
        let mut learnt = self.learnt.lock();
        self.learn_elsewhere(&mut learnt);
        let l = learnt
            .entry_ref(route)
            .or_insert_with(|| RouteState::new(mode));
        let found = self
            .entries
            .lookup(q.partition, v, &q.facts, now, u, mode, &l.pooled);
        if matches!(found, Lookup::Hit { .. } | Lookup::Verify { .. }) {
            l.estimate.would_be_hit();
            if let Some(b) = &mut l.budget {
                b.deposit();
            }
        }
        let found = match found {
            Lookup::Hit { .. } => {
                l.unserved = 0;
                found
            }
            // Stopped: only what the rule would verify (not the audit of a hit) stops; the
            // coin keeps a trickle, each verification standing for itself in the estimate.
            Lookup::Verify { id, similarity, p } if p >= 1.0 && l.stopped(mode) => {
                l.unserved += 1;
                if u < TRICKLE {
                    Lookup::Verify { id, similarity, p }
                } else {
                    Lookup::Miss {
                        refused: None,
                        best: Some(similarity),
                    }
                }
            }
            Lookup::Verify { .. } => {
                l.unserved += 1;
                found
            }
            other => other,
        };
        match found {
            Lookup::Verify { id, similarity, .. }
                if l.budget.as_mut().is_some_and(|b| !b.try_spend(now)) =>
            {
                Lookup::Unverified { id, similarity }
            }
            other => other,
        }
    }

    /// Entry `id` of `partition`'s answer, as the exact cache stores one.
    pub fn answer(&self, partition: u64, id: u64) -> Option<Arc<Stored>> {
        self.entries.answer(partition, id)
    }

    /// Stores `body`, the answer to `q` (vector `v`), bought for `cost_micros`.
    pub fn insert(
        &self,
        q: &Question,
        v: Vec<f32>,
        body: Bytes,
        cost_micros: u64,
        now: Instant,
    ) -> Option<u64> {
        self.entries
            .insert(q.partition, v, q.facts.clone(), body, cost_micros, now)
    }

    /// Learns that entry `id`'s answer was `right` (or not) at `similarity`, as a client
    /// reported of a served hit: the entry learns it, the route's pooled curve (which holds
    /// verifications, an unbiased sample of would-be hits) does not.
    pub fn observe(&self, partition: u64, id: u64, similarity: f64, right: bool) {
        self.entries.observe(partition, id, None, similarity, right);
    }

    /// (entries, bytes) held.
    pub fn size(&self) -> (u64, u64) {
        self.entries.size()
    }

    /// Empties it; returns how many entries it held.
    pub fn purge(&self) -> u64 {
        self.entries.purge()
    }
}
