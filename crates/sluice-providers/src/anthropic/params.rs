//! What `[providers.NAME]` with `kind = "anthropic"` says beyond where the upstream is: the
//! API version, the `max_tokens` Anthropic requires, and the prompt-cache breakpoints placed
//! for clients that mark none.

use super::{CacheTtl, DEFAULT_CACHE_MIN_TOKENS, DEFAULT_MAX_TOKENS, DEFAULT_VERSION};

/// An Anthropic provider's own settings (every field optional).
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(default)]
pub struct AnthropicParams {
    /// The `anthropic-version` header.
    pub anthropic_version: String,
    /// `max_tokens` sent when the client gave none (Anthropic requires one).
    pub default_max_tokens: u32,
    /// Mark prompt-cache breakpoints for clients that mark none (the end of the system
    /// prompt and of the conversation so far). On unless `false`.
    pub cache_breakpoints: bool,
    /// The shortest prefix, in tokens, worth a breakpoint (the model's minimum cacheable
    /// length: 1,024 for Sonnet, up to 4,096 for some models).
    pub cache_min_tokens: u64,
    /// How long placed breakpoints keep their prefix: `"auto"` (1 hour for a prefix
    /// typically reused 5 to 60 minutes apart, else 5 minutes), `"5m"` or `"1h"`.
    pub cache_ttl: CacheTtl,
}

impl Default for AnthropicParams {
    fn default() -> Self {
        Self {
            anthropic_version: DEFAULT_VERSION.into(),
            default_max_tokens: DEFAULT_MAX_TOKENS,
            cache_breakpoints: true,
            cache_min_tokens: DEFAULT_CACHE_MIN_TOKENS,
            cache_ttl: CacheTtl::Auto,
        }
    }
}

impl AnthropicParams {
    /// What is wrong with it, if anything: (field, message).
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if self.default_max_tokens == 0 {
            out.push(("default_max_tokens", "must be at least 1".into()));
        }
        if self.anthropic_version.trim().is_empty() {
            out.push(("anthropic_version", "must not be empty".into()));
        }
        out
    }
}
