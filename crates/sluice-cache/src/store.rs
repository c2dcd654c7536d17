//! Where exact answers are kept: the [`AnswerStore`] trait the cache reads and writes them
//! through, and [`Answers`], the store a cache holds. In one process that is
//! [`LocalAnswers`] (moka, weighed by bytes, least used out first); several instances keep
//! one store between them by another implementation (in `sluice-cluster`), held the same
//! way, the cache and the walk unchanged. Every implementation passes the same conformance
//! suite (its `conformance` module, with the `conformance` feature).
//!
//! Whether an answer is still fresh is the cache's decision, on the gateway's clock; a store
//! only keeps and forgets. Reading may wait for a store; writing never makes a call wait (a
//! store elsewhere writes in the background).

use std::sync::Arc;
use std::time::Duration;

use sluice_core::reply::{Reply, now};

use crate::{Key, Stored};

/// What an entry costs beyond its body, in the local store's weighing: the key, its cost and
/// time, and moka's own bookkeeping.
const ENTRY_OVERHEAD: usize = 256;

/// Complete answers by request digest.
pub trait AnswerStore: Send + Sync {
    /// The answer kept under `key`, fresh or not.
    fn get<'a>(&'a self, key: &'a Key) -> Reply<'a, Option<Arc<Stored>>>;
    /// Keeps `answer` under `key`.
    fn put(&self, key: Key, answer: Arc<Stored>);
    /// Forgets `key`'s answer.
    fn remove(&self, key: &Key);
    /// Answers kept now and what they weigh.
    fn size(&self) -> (u64, u64);
    /// Forgets every answer.
    fn purge(&self);
}

/// Answers kept in this process, weighed by their bodies' bytes.
pub struct LocalAnswers {
    entries: moka::sync::Cache<Key, Arc<Stored>>,
}

impl LocalAnswers {
    /// A store of at most `max_bytes`, freeing memory `ttl` after an answer was kept (on the
    /// wall clock; freshness is decided by the cache).
    pub fn new(ttl: Duration, max_bytes: u64) -> Self {
        let entries = moka::sync::Cache::builder()
            .max_capacity(max_bytes)
            .weigher(|_: &Key, v: &Arc<Stored>| {
                u32::try_from(v.body.len() + ENTRY_OVERHEAD).unwrap_or(u32::MAX)
            })
            .time_to_live(ttl)
            .build();
        Self { entries }
    }
}

impl AnswerStore for LocalAnswers {
    fn get<'a>(&'a self, key: &'a Key) -> Reply<'a, Option<Arc<Stored>>> {
        now(self.entries.get(key))
    }

    fn put(&self, key: Key, answer: Arc<Stored>) {
        self.entries.insert(key, answer);
    }

    fn remove(&self, key: &Key) {
        self.entries.invalidate(key);
    }

    fn size(&self) -> (u64, u64) {
        self.entries.run_pending_tasks();
        (self.entries.entry_count(), self.entries.weighted_size())
    }

    fn purge(&self) {
        self.entries.invalidate_all();
        self.entries.run_pending_tasks();
    }
}

/// The store a cache holds: in this process, or kept by several instances together.
pub type Answers = Arc<dyn AnswerStore>;
