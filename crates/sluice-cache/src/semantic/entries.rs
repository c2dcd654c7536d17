//! Where the semantic cache's entries are kept: the [`SemanticEntries`] trait the cache reads
//! and writes them through. One process keeps an [`Index`] under a lock; several instances
//! keep one set of entries between them by another implementation (a replica in each
//! process fed from a shared log suits it: lookups are many and must not wait, inserts are
//! few), the cache and the walk unchanged.

use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::time::Instant;

use super::{Facts, Index, Lookup, Mode, Policy, Threshold};
use crate::Stored;

/// What a verification on another instance found: a route's would-be hit at `similarity`
/// was `right` (or not).
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The route (model group) it verified.
    pub route: Arc<str>,
    /// The similarity of the question to the entry's.
    pub similarity: f64,
    /// Whether the entry's answer was right.
    pub right: bool,
}

/// The entries of a semantic cache: questions' vectors, their answers, and what each entry
/// learnt of its threshold.
pub trait SemanticEntries: Send + Sync + std::fmt::Debug {
    /// The policy the entries are kept and matched under.
    fn policy(&self) -> Policy;
    /// Bounds the entries to `max_bytes` from now on.
    fn set_max_bytes(&self, max_bytes: usize);
    /// Decides for a question of `partition` with vector `v` and `facts` at `now` (`u`: the
    /// coin that samples verifications), under `mode` (verified: with its route's `pooled`
    /// curve).
    #[allow(clippy::too_many_arguments)]
    fn lookup(
        &self,
        partition: u64,
        v: &[f32],
        facts: &Facts,
        now: Instant,
        u: f64,
        mode: Mode,
        pooled: &Threshold,
    ) -> Lookup;
    /// Entry `id` of `partition`'s answer, as the exact cache stores one.
    fn answer(&self, partition: u64, id: u64) -> Option<Arc<Stored>>;
    /// Stores `answer` to a question of `partition` (vector `v`, `facts`), bought for
    /// `cost_micros` at `now`; the new entry's id, unless it could not be kept.
    fn insert(
        &self,
        partition: u64,
        v: Vec<f32>,
        facts: Facts,
        answer: Bytes,
        cost_micros: u64,
        now: Instant,
    ) -> Option<u64>;
    /// Learns that entry `id`'s answer was `right` (or not) at `similarity`; when it was a
    /// verification of `route`'s, other instances' pooled curves for it learn it too.
    fn observe(&self, partition: u64, id: u64, route: Option<&str>, similarity: f64, right: bool);
    /// What other instances' verifications found since the last call, for the routes'
    /// pooled curves (none where the entries are this process's alone).
    fn learnt_elsewhere(&self) -> Vec<Verdict> {
        Vec::new()
    }
    /// (entries, bytes) held.
    fn size(&self) -> (u64, u64);
    /// Forgets every entry; returns how many there were.
    fn purge(&self) -> u64;
}

impl SemanticEntries for Mutex<Index> {
    fn policy(&self) -> Policy {
        *self.lock().policy()
    }

    fn set_max_bytes(&self, max_bytes: usize) {
        self.lock().set_max_bytes(max_bytes);
    }

    #[allow(clippy::too_many_arguments)]
    fn lookup(
        &self,
        partition: u64,
        v: &[f32],
        facts: &Facts,
        now: Instant,
        u: f64,
        mode: Mode,
        pooled: &Threshold,
    ) -> Lookup {
        self.lock()
            .lookup(partition, v, facts, now, u, mode, pooled)
    }

    fn answer(&self, partition: u64, id: u64) -> Option<Arc<Stored>> {
        let ix = self.lock();
        let e = ix.get(partition, id)?;
        Some(Arc::new(Stored {
            body: e.answer.clone(),
            cost_micros: e.cost_micros,
            stored_at: e.stored_at,
        }))
    }

    fn insert(
        &self,
        partition: u64,
        v: Vec<f32>,
        facts: Facts,
        answer: Bytes,
        cost_micros: u64,
        now: Instant,
    ) -> Option<u64> {
        self.lock()
            .insert(partition, v, facts, answer, cost_micros, now)
    }

    fn observe(&self, partition: u64, id: u64, _route: Option<&str>, similarity: f64, right: bool) {
        self.lock().observe(partition, id, similarity, right);
    }

    fn size(&self) -> (u64, u64) {
        let ix = self.lock();
        (ix.len() as u64, ix.bytes() as u64)
    }

    fn purge(&self) -> u64 {
        let mut ix = self.lock();
        let n = ix.len() as u64;
        ix.purge();
        n
    }
}
