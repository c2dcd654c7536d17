//! The semantic cache's decisions: which stored answer a question may be served, by meaning.
//!
//! An entry is found only inside its *partition*: a digest of everything that must match
//! exactly (tenant, model group, system prompt, tools, sampling settings, the earlier turns
//! of the conversation byte for byte), computed by the glue; only the newest user message is
//! matched by meaning, as a unit vector from the embedder. Among the partition's live
//! entries the most similar one whose [`guard::Facts`] agree with the question's (same
//! numbers, negations and entities) is the candidate; then the mode decides:
//!
//! - static: served when its similarity reaches the threshold;
//! - verified (after vCache): each entry and each route learn a threshold curve
//!   ([`verified`]); a would-be hit is served where the curve says it is right with a
//!   probability of at least `1 - delta`, sent upstream (verified) where the evidence cannot
//!   tell yet, within the route's verification budget, and a miss where it never could be
//!   served; what verification finds teaches the entry and the route.
//!
//! The index is an exact scan of the partition (`partition.rs`: deterministic, its result the
//! exact one, and at 64 dimensions faster than a graph index at the sizes one partition
//! reaches), bounded in bytes (the oldest go first) and by a time to live on the gateway's
//! clock.

pub mod agree;
pub mod cache;
pub mod entries;
pub mod estimate;
pub mod guard;
mod params;
mod partition;
pub mod question;
pub mod verified;
pub mod wording;

#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use hashbrown::HashMap;
use tokio::time::Instant;

pub use cache::SemanticCache;
pub use entries::{SemanticEntries, Verdict};
pub use estimate::ErrorEstimate;
pub use guard::{Facts, Mismatch};
pub use params::{
    DEFAULT_CACHE_BYTES, DEFAULT_VERIFY_BUDGET, EmbeddingsParams, SemanticGroupParams,
    SemanticMode, SemanticParams,
};
use partition::Partition;
pub use partition::{Quantised, cosine, quantise};
pub use question::{Ineligible, Limits, Pending, Question};
pub use verified::{Decision, Threshold};

/// How a route's semantic hits are decided.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    /// Served at this cosine similarity or above.
    Static {
        /// The threshold.
        threshold: f64,
        /// The share of would-be hits verified anyway, to measure the error.
        audit: f64,
    },
    /// Entries and routes learn threshold curves; a hit is served only where it is right with
    /// a probability of at least `1 - delta`.
    Verified {
        /// The largest share of the route's served answers that may be wrong.
        delta: f64,
        /// Below this similarity a question is a miss without asking (nothing to learn).
        floor: f64,
        /// The share of would-be hits verifications may spend (beyond a small burst).
        budget: f64,
    },
}

/// The cache's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Policy {
    /// How hits are decided.
    pub mode: Mode,
    /// How long an entry lives.
    pub ttl: Duration,
    /// What all entries may weigh together (answers, vectors and bookkeeping).
    pub max_bytes: usize,
}

/// Bytes an entry weighs beyond its answer and vector (its facts and bookkeeping).
const ENTRY_OVERHEAD: usize = 256;

/// One stored answer.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Its id (for the record and for verification's verdict).
    pub id: u64,
    /// What its question says beyond its meaning.
    pub facts: Facts,
    /// The complete answer's body.
    pub answer: Bytes,
    /// When it was stored.
    pub stored_at: Instant,
    /// What the answer cost when it was bought, in micro-units.
    pub cost_micros: u64,
    /// Its own threshold, in the verified mode.
    pub threshold: Threshold,
    weight: usize,
}

/// What a lookup found.
#[derive(Clone, Debug, PartialEq)]
pub enum Lookup {
    /// Nothing to serve; `refused`: the most similar entry's question differed in a number,
    /// negation or entity (counted: the guards at work).
    Miss {
        /// Why the nearest entry was passed over, if it was.
        refused: Option<Mismatch>,
        /// The best similarity seen (of an entry the guards allowed).
        best: Option<f64>,
    },
    /// Serve entry `id`'s answer.
    Hit {
        /// The entry.
        id: u64,
        /// Its similarity to the question.
        similarity: f64,
    },
    /// Would be a hit, but ask the upstream too and compare (the verified mode's rule, or
    /// the static mode's audit), serving the upstream's answer.
    Verify {
        /// The entry.
        id: u64,
        /// Its similarity to the question.
        similarity: f64,
        /// The probability with which this would-be hit was verified.
        p: f64,
    },
    /// Would be verified, but the route's verification budget is spent: neither served nor
    /// verified, the question goes upstream as a miss.
    Unverified {
        /// The entry.
        id: u64,
        /// Its similarity to the question.
        similarity: f64,
    },
}

/// The entries, by partition.
#[derive(Debug)]
pub struct Index {
    policy: Policy,
    partitions: HashMap<u64, Partition>,
    /// (partition, id) in the order stored: the oldest first out.
    order: VecDeque<(u64, u64)>,
    bytes: usize,
    next_id: u64,
}

impl Index {
    /// An empty index.
    pub fn new(policy: Policy) -> Self {
        Self::with_first_id(policy, 1)
    }

    /// An empty index whose entries' ids count from `first` (instances that share entries
    /// count from their own bases, so that an id names one entry across all of them).
    pub fn with_first_id(policy: Policy, first: u64) -> Self {
        Self {
            policy,
            partitions: HashMap::new(),
            order: VecDeque::new(),
            bytes: 0,
            next_id: first,
        }
    }

    /// Its policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Bounds what its entries weigh to `max_bytes` (the oldest leave at the next insert).
    pub fn set_max_bytes(&mut self, max_bytes: usize) {
        self.policy.max_bytes = max_bytes;
    }

    /// Entries held (expired ones not yet dropped included).
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// What the entries weigh.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    fn live(&self, e: &Entry, now: Instant) -> bool {
        now.saturating_duration_since(e.stored_at) < self.policy.ttl
    }

    /// Decides for a question in `partition` with unit vector `v` and `facts`, at `now`,
    /// under `mode` (its route's; verified: with the route's `pooled` curve); `u` is a
    /// uniform draw in `[0, 1)` (the coin that samples verifications).
    #[allow(clippy::too_many_arguments)]
    pub fn lookup(
        &self,
        partition: u64,
        v: &[f32],
        facts: &Facts,
        now: Instant,
        u: f64,
        mode: Mode,
        pooled: &Threshold,
    ) -> Lookup {
        let Some(part) = self.partitions.get(&partition) else {
            return Lookup::Miss {
                refused: None,
                best: None,
            };
        };
        if v.len() != part.dim {
            return Lookup::Miss {
                refused: None,
                best: None,
            };
        }
        let found = part.scan(v, facts, now, |e, now| self.live(e, now));
        let (nearest, allowed) = (found.nearest, found.allowed);
        let refused = match (nearest, allowed) {
            (Some((_, n)), Some((_, a))) if n.id == a.id => None,
            (Some((_, n)), _) => facts.allowed(&n.facts).err(),
            (None, _) => None,
        };
        let Some((s, e)) = allowed else {
            return Lookup::Miss {
                refused,
                best: None,
            };
        };
        let miss = Lookup::Miss {
            refused,
            best: Some(s),
        };
        let p = match mode {
            Mode::Static { threshold, .. }
            | Mode::Verified {
                floor: threshold, ..
            } if s < threshold => {
                return miss;
            }
            Mode::Static { audit, .. } => audit,
            Mode::Verified { delta, .. } => match e.threshold.decide_within(pooled, s, delta) {
                Decision::Serve => verified::AUDIT,
                Decision::Verify => 1.0,
                Decision::Hopeless => return miss,
            },
        };
        if u < p {
            Lookup::Verify {
                id: e.id,
                similarity: s,
                p,
            }
        } else {
            Lookup::Hit {
                id: e.id,
                similarity: s,
            }
        }
    }

    /// Entry `id`, if it is held.
    pub fn get(&self, partition: u64, id: u64) -> Option<&Entry> {
        self.partitions.get(&partition)?.get(id)
    }

    /// Stores an answer; returns its id. The oldest entries (and the expired) leave until
    /// everything fits; an answer heavier than the whole cache is not stored (`None`).
    pub fn insert(
        &mut self,
        partition: u64,
        vector: Vec<f32>,
        facts: Facts,
        answer: Bytes,
        cost_micros: u64,
        now: Instant,
    ) -> Option<u64> {
        let id = self.next_id;
        self.next_id += 1;
        self.insert_as(id, partition, vector, facts, answer, cost_micros, now)
            .then_some(id)
    }

    /// Stores an answer under `id` (an entry another instance stored, as it named it), as
    /// [`Index::insert`] does; whether it was kept.
    #[allow(clippy::too_many_arguments)]
    pub fn insert_as(
        &mut self,
        id: u64,
        partition: u64,
        vector: Vec<f32>,
        facts: Facts,
        answer: Bytes,
        cost_micros: u64,
        stored_at: Instant,
    ) -> bool {
        // The vector twice: its floats and its bytes.
        let weight = answer.len() + vector.len() * 5 + ENTRY_OVERHEAD;
        if weight > self.policy.max_bytes || self.get(partition, id).is_some() {
            return false;
        }
        let now = stored_at;
        self.sweep(now);
        while self.bytes + weight > self.policy.max_bytes {
            if !self.evict_oldest() {
                break;
            }
        }
        let part = self.partitions.entry(partition).or_default();
        if part.entries.is_empty() {
            part.dim = vector.len();
        } else if part.dim != vector.len() {
            return false; // another embedder's vector: never comparable
        }
        part.push(
            &vector,
            Entry {
                id,
                facts,
                answer,
                stored_at: now,
                cost_micros,
                threshold: Threshold::default(),
                weight,
            },
        );
        self.order.push_back((partition, id));
        self.bytes += weight;
        true
    }

    /// Learns what verification found: entry `id`'s answer was `right` (or not) for a
    /// question at `similarity`.
    pub fn observe(&mut self, partition: u64, id: u64, similarity: f64, right: bool) {
        if let Some(e) = self
            .partitions
            .get_mut(&partition)
            .and_then(|p| p.get_mut(id))
        {
            e.threshold.observe(similarity, right);
        }
    }

    /// Drops the expired entries at the front (entries expire in the order they were stored).
    pub fn sweep(&mut self, now: Instant) {
        while let Some(&(p, id)) = self.order.front() {
            let expired = self.get(p, id).is_none_or(|e| !self.live(e, now));
            if !expired || !self.evict_oldest() {
                break;
            }
        }
    }

    fn evict_oldest(&mut self) -> bool {
        let Some((p, id)) = self.order.pop_front() else {
            return false;
        };
        if let Some(part) = self.partitions.get_mut(&p) {
            if let Some(e) = part.remove(id) {
                self.bytes -= e.weight;
            }
            if part.entries.is_empty() {
                self.partitions.remove(&p);
            }
        }
        true
    }

    /// Empties it.
    pub fn purge(&mut self) {
        self.partitions.clear();
        self.order.clear();
        self.bytes = 0;
    }
}
