//! The semantic cache as the gateway holds it: the index behind a lock, with the hottest
//! sampling it serves.

use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::time::Instant;

use super::{Index, Lookup, Policy, Question};
use crate::Stored;

/// The semantic cache.
#[derive(Debug)]
pub struct SemanticCache {
    index: Mutex<Index>,
    ceiling: f64,
}

impl SemanticCache {
    /// An empty cache under `policy`, serving requests up to `temperature` `ceiling`.
    pub fn new(policy: Policy, ceiling: f64) -> Self {
        Self {
            index: Mutex::new(Index::new(policy)),
            ceiling,
        }
    }

    /// The hottest `temperature` it serves.
    pub fn ceiling(&self) -> f64 {
        self.ceiling
    }

    /// Its policy.
    pub fn policy(&self) -> Policy {
        *self.index.lock().policy()
    }

    /// Decides for `q` with vector `v` at `now` (`u`: the verified mode's coin).
    pub fn lookup(&self, q: &Question, v: &[f32], now: Instant, u: f64) -> Lookup {
        self.index.lock().lookup(q.partition, v, &q.facts, now, u)
    }

    /// Entry `id` of `partition`'s answer, as the exact cache stores one.
    pub fn answer(&self, partition: u64, id: u64) -> Option<Arc<Stored>> {
        let ix = self.index.lock();
        let e = ix.get(partition, id)?;
        Some(Arc::new(Stored {
            body: e.answer.clone(),
            cost_micros: e.cost_micros,
            stored_at: e.stored_at,
        }))
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
        self.index
            .lock()
            .insert(q.partition, v, q.facts.clone(), body, cost_micros, now)
    }

    /// Learns that entry `id`'s answer was `right` (or not) at `similarity`.
    pub fn observe(&self, partition: u64, id: u64, similarity: f64, right: bool) {
        self.index.lock().observe(partition, id, similarity, right);
    }

    /// (entries, bytes) held.
    pub fn size(&self) -> (u64, u64) {
        let ix = self.index.lock();
        (ix.len() as u64, ix.bytes() as u64)
    }

    /// Empties it; returns how many entries it held.
    pub fn purge(&self) -> u64 {
        let mut ix = self.index.lock();
        let n = ix.len() as u64;
        ix.purge();
        n
    }
}
