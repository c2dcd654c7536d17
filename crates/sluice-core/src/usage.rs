//! Token usage of one call, including the prompt tokens a provider served from its cache.

use serde::{Deserialize, Serialize};

/// Tokens one call consumed, normalised across providers.
///
/// `prompt_tokens` counts every input token, cached or not (OpenAI's meaning). `cached_tokens`
/// is the part read from the provider's prompt cache, `cache_write_tokens` the part written to it
/// (Anthropic's cache creation; OpenAI's newest models report it too).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// All input tokens, cache reads and writes included.
    pub prompt_tokens: u64,
    /// Output tokens.
    pub completion_tokens: u64,
    /// Input tokens served from the provider's prompt cache.
    pub cached_tokens: u64,
    /// Input tokens written into the provider's prompt cache.
    pub cache_write_tokens: u64,
    /// The part of `completion_tokens` a reasoning model spent thinking (billed as output).
    #[serde(default)]
    pub reasoning_tokens: u64,
    /// The part of `cache_write_tokens` written to be kept an hour (Anthropic's 1-hour time
    /// to live, priced above the 5-minute write).
    #[serde(default)]
    pub cache_write_long_tokens: u64,
}

impl Usage {
    /// Input plus output tokens (saturating: an upstream may report anything).
    pub fn total_tokens(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }

    /// The usage of two calls together (progressive loading's rounds, billed as one call),
    /// saturating.
    pub fn plus(&self, o: &Usage) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens.saturating_add(o.prompt_tokens),
            completion_tokens: self.completion_tokens.saturating_add(o.completion_tokens),
            cached_tokens: self.cached_tokens.saturating_add(o.cached_tokens),
            cache_write_tokens: self.cache_write_tokens.saturating_add(o.cache_write_tokens),
            reasoning_tokens: self.reasoning_tokens.saturating_add(o.reasoning_tokens),
            cache_write_long_tokens: self
                .cache_write_long_tokens
                .saturating_add(o.cache_write_long_tokens),
        }
    }

    /// Input tokens billed at the full, uncached price.
    pub fn uncached_prompt_tokens(&self) -> u64 {
        self.prompt_tokens
            .saturating_sub(self.cached_tokens)
            .saturating_sub(self.cache_write_tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_saturate_whatever_an_upstream_reports() {
        let huge = Usage {
            prompt_tokens: u64::MAX,
            completion_tokens: 5,
            ..Usage::default()
        };
        assert_eq!(huge.total_tokens(), u64::MAX);
        assert_eq!(huge.plus(&huge).prompt_tokens, u64::MAX);
    }

    #[test]
    fn totals_and_uncached_part() {
        let u = Usage {
            prompt_tokens: 1000,
            completion_tokens: 50,
            cached_tokens: 800,
            cache_write_tokens: 100,
            reasoning_tokens: 0,
            cache_write_long_tokens: 0,
        };
        assert_eq!(u.total_tokens(), 1050);
        assert_eq!(u.uncached_prompt_tokens(), 100);
        let two = u.plus(&u);
        assert_eq!((two.prompt_tokens, two.cached_tokens), (2000, 1600));
        assert_eq!(two.total_tokens(), 2100);
    }

    #[test]
    fn uncached_never_underflows() {
        let u = Usage {
            prompt_tokens: 10,
            cached_tokens: 50,
            ..Usage::default()
        };
        assert_eq!(u.uncached_prompt_tokens(), 0);
    }
}
