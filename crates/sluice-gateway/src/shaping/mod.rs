//! How prompts are shaped before they leave: per group, normalisation, compression and
//! progressive loading (`sluice-context`), the provider prompt-cache keys handed out lately,
//! and the watch that samples requests for prefix churn.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use parking_lot::Mutex;
use sluice_context::churn::Watch;

/// The gateway's tokenizer, as compression and progressive loading count with it: budgets
/// in the tokens a provider bills, in every script.
#[derive(Clone, Debug)]
pub struct Counter(pub sluice_economy::estimate::Tokenizer);

impl sluice_context::count::Count for Counter {
    fn tokens(&self, text: &str) -> u64 {
        self.0.tokens(text)
    }

    fn prompt(&self, request: &sluice_core::ChatRequest) -> u64 {
        self.0.prompt_tokens(request)
    }
}

/// Shaping's settings and state.
#[derive(Debug)]
pub struct Shaping {
    /// Counts tokens for compression and progressive loading.
    pub(crate) counter: Counter,
    /// Groups whose prompts are shaped, and how.
    pub(crate) shapes: HashMap<Arc<str>, sluice_context::Shaping>,
    /// Per group deriving prompt-cache keys: the keys handed out lately.
    pub(crate) cache_keys: HashMap<Arc<str>, Mutex<sluice_context::cache_key::Keys>>,
    /// Whether requests that should share a cached prefix do, when watched.
    pub(crate) prefixes: Option<PrefixWatch>,
}

/// The watch, and which requests it samples.
#[derive(Debug)]
pub struct PrefixWatch {
    /// One request in this many is sampled.
    pub(crate) every: u64,
    /// Requests seen.
    pub(crate) seen: AtomicU64,
    /// The share sampled, as configured.
    pub share: f64,
    /// What the samples showed.
    pub watch: Mutex<Watch>,
}

impl PrefixWatch {
    /// Samples `share` of requests.
    pub fn new(share: f64) -> Self {
        let every = if share > 0.0 {
            (1.0 / share.min(1.0)).round().max(1.0) as u64
        } else {
            u64::MAX
        };
        Self {
            every,
            seen: AtomicU64::new(0),
            share,
            watch: Mutex::new(Watch::new()),
        }
    }
}
