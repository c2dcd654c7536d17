//! `[cache]` as it is written: the exact answer cache, and the semantic cache's settings (read
//! into `sluice-cache`'s own type); and `[prefixes]`, the prefix watch; their defaults.

use std::time::Duration;

use serde::Deserialize;

/// `[cache]`: the exact answer cache. A complete answer is kept under its request (tenant,
/// model group and every field but `stream` and `stream_options`) and served again to the
/// same request until it expires.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[serde(default)]
pub struct CacheConfig {
    /// Whether answers are cached (off by default).
    pub enabled: bool,
    /// How long an answer is served after it was stored.
    #[serde(with = "humantime_serde")]
    pub ttl: Duration,
    /// The most the cached answers may hold, in bytes of answer body; the least used go
    /// first.
    pub max_bytes: u64,
    /// `[cache.semantic]`: answers served again to questions that mean the same.
    pub semantic: SemanticParams,
}

/// `[prefixes]`: watching whether requests that should share a cached prompt prefix do.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[serde(default)]
pub struct PrefixesConfig {
    /// The share of requests whose stable prefix (tools, system prompt) is compared with
    /// their tenant and group's recent ones (0: none).
    pub watch: f64,
}

impl Default for PrefixesConfig {
    fn default() -> Self {
        Self { watch: 0.01 }
    }
}

pub use sluice_cache::semantic::{
    DEFAULT_CACHE_BYTES, DEFAULT_VERIFY_BUDGET, EmbeddingsParams, SemanticGroupParams,
    SemanticMode, SemanticParams,
};

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            ttl: Duration::from_secs(3600),
            max_bytes: DEFAULT_CACHE_BYTES,
            semantic: SemanticParams::default(),
        }
    }
}
