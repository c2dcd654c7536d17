//! What answers are kept to be served again: the exact answer cache (the same request from
//! the same tenant) and the semantic cache (a question that means the same), with the
//! embedder that turns questions into vectors and the hits remembered for feedback.

use std::sync::Arc;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use sluice_cache::AnswerCache;
use sluice_cache::semantic::SemanticCache;
use sluice_embed::Embedder;

/// The caches, each when on.
#[derive(Debug, Default)]
pub struct Caches {
    /// The exact answer cache.
    pub(crate) exact: Option<AnswerCache>,
    /// The semantic cache and its embedder.
    pub(crate) semantic: Option<Arc<Semantic>>,
}

/// The semantic cache and the embedder that turns questions into vectors.
#[derive(Debug)]
pub struct Semantic {
    /// The entries and their policy.
    pub cache: SemanticCache,
    /// The embedder.
    pub embedder: Arc<Embedder>,
    /// The verified mode's coins (seeded: a run repeats).
    pub coins: Mutex<StdRng>,
    /// Answers served by meaning, by request id, for feedback: (tenant, partition, entry,
    /// similarity).
    pub served: moka::sync::Cache<sluice_core::RequestId, ServedHit>,
}

/// A semantic hit remembered for feedback.
#[derive(Clone, Debug)]
pub struct ServedHit {
    /// The model group.
    pub group: Arc<str>,
    /// The tenant it was served to.
    pub tenant: Option<Arc<str>>,
    /// The entry's partition.
    pub partition: u64,
    /// The entry.
    pub entry: u64,
    /// The similarity it was served at.
    pub similarity: f64,
}

/// Semantic hits remembered for feedback.
pub const HITS_KEPT: u64 = 100_000;
