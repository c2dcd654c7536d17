//! `[cache]` as it is written: the exact answer cache, the semantic cache with its modes,
//! embeddings and per-group settings; and `[prefixes]`, the prefix watch; their defaults.

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
    pub semantic: SemanticCacheConfig,
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

/// How semantic hits are decided.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SemanticMode {
    /// One threshold for every entry.
    Static,
    /// Each entry learns its own, from verification: a sampled share of would-be hits is
    /// also asked upstream and the answers compared.
    Verified,
}

/// `[cache.semantic]`: the semantic cache (off by default). Only the newest user message is
/// matched by meaning; everything else of the request must be identical.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[serde(default)]
pub struct SemanticCacheConfig {
    /// Whether answers are cached by meaning.
    pub enabled: bool,
    /// `static` (served from `threshold`) or `verified` (each entry and each group learn a
    /// threshold curve, and a hit is served only where it is right with a probability of at
    /// least `1 - max_error`).
    pub mode: SemanticMode,
    /// The cosine similarity from which a stored answer is served (static mode).
    pub threshold: f64,
    /// The share of would-be hits also asked upstream, to measure the error (static mode;
    /// the verified mode samples by its own rule).
    pub verify_share: f64,
    /// The largest share of served answers that may be wrong (verified mode).
    pub max_error: f64,
    /// Below this similarity a question is a miss without asking (verified mode).
    pub min_similarity: f64,
    /// The share of a group's would-be hits that verifications may spend, beyond a burst of
    /// 20 (verified mode; a would-be hit the budget cannot pay for goes upstream as a miss).
    pub verify_budget: f64,
    /// Requests with a hotter `temperature` are not served from it (unset counts as 1).
    pub temperature_ceiling: f64,
    /// A newest user message longer than this many characters is not matched (a document
    /// costs more to embed than it could save).
    pub max_question_chars: usize,
    /// How long an answer is served after it was stored.
    #[serde(with = "humantime_serde")]
    pub ttl: Duration,
    /// What its entries may weigh together (answers, vectors, bookkeeping).
    pub max_bytes: u64,
    /// The embedding model's folder (relative to the config file's), as
    /// `scripts/install-embedder` fills it.
    pub model: String,
    /// An OpenAI-compatible embeddings upstream to embed with instead of the model.
    pub embeddings: Option<SemanticEmbeddingsConfig>,
    /// `[cache.semantic.groups.NAME]`: a model group's own settings.
    pub groups: std::collections::BTreeMap<String, SemanticGroupConfig>,
}

/// `[cache.semantic.embeddings]`: questions embedded by an OpenAI-compatible `/embeddings`
/// upstream (OpenAI, vLLM, TEI, Ollama) named in `[providers]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SemanticEmbeddingsConfig {
    /// The `[providers.NAME]` entry (of kind `openai`) whose base URL and key it uses.
    pub provider: String,
    /// The embedding model asked for.
    pub model: String,
    /// Vector length asked for, for models that can shorten theirs.
    #[serde(default)]
    pub dimensions: Option<u32>,
    /// How long a lookup waits for the vector before the request goes on uncached.
    #[serde(
        with = "humantime_serde",
        default = "SemanticEmbeddingsConfig::timeout"
    )]
    pub timeout: Duration,
}

impl SemanticEmbeddingsConfig {
    /// The default wait for a vector: 1 s.
    pub fn timeout() -> Duration {
        Duration::from_secs(1)
    }
}

/// `[cache.semantic.groups.NAME]`: one model group's semantic cache, where it differs.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SemanticGroupConfig {
    /// `false`: the group's requests are never cached by meaning.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Its static threshold.
    #[serde(default)]
    pub threshold: Option<f64>,
    /// Its maximum error rate (verified mode).
    #[serde(default)]
    pub max_error: Option<f64>,
    /// Its verification budget (verified mode).
    #[serde(default)]
    pub verify_budget: Option<f64>,
}

impl Default for SemanticCacheConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            mode: SemanticMode::Static,
            threshold: 0.9,
            verify_share: 0.0,
            max_error: 0.02,
            min_similarity: 0.6,
            verify_budget: DEFAULT_VERIFY_BUDGET,
            temperature_ceiling: 1.0,
            max_question_chars: 2000,
            ttl: Duration::from_secs(3600),
            max_bytes: DEFAULT_CACHE_BYTES,
            model: "models/static-64".into(),
            embeddings: None,
            groups: std::collections::BTreeMap::new(),
        }
    }
}

/// The verified mode's default verification budget: a quarter of would-be hits.
pub const DEFAULT_VERIFY_BUDGET: f64 = 0.25;

/// Default size of the answer cache: 64 MiB.
pub const DEFAULT_CACHE_BYTES: u64 = 64 * 1024 * 1024;

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            ttl: Duration::from_secs(3600),
            max_bytes: DEFAULT_CACHE_BYTES,
            semantic: SemanticCacheConfig::default(),
        }
    }
}
