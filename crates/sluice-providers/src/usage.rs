//! Reads token usage out of the usage objects each provider family sends.

use serde::Deserialize;
use serde_json::{Value, json};
use sluice_core::Usage;

#[derive(Debug, Default, Deserialize)]
struct OpenAiDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
    #[serde(default)]
    cache_write_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
struct OpenAiOutputDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

/// The union of the usage fields OpenAI-compatible providers send.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct OpenAiUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    /// OpenAI, GLM, vLLM.
    #[serde(default)]
    prompt_tokens_details: Option<OpenAiDetails>,
    /// OpenAI and DeepSeek's reasoning models.
    #[serde(default)]
    completion_tokens_details: Option<OpenAiOutputDetails>,
    /// DeepSeek.
    #[serde(default)]
    prompt_cache_hit_tokens: Option<u64>,
    /// DeepSeek.
    #[serde(default)]
    prompt_cache_miss_tokens: Option<u64>,
    /// Kimi (Moonshot) reports cache hits at the top level.
    #[serde(default)]
    cached_tokens: Option<u64>,
}

impl OpenAiUsage {
    pub(crate) fn normalise(&self) -> Usage {
        let details = self.prompt_tokens_details.as_ref();
        let cached = details
            .and_then(|d| d.cached_tokens)
            .or(self.prompt_cache_hit_tokens)
            .or(self.cached_tokens)
            .unwrap_or(0);
        let prompt = self.prompt_tokens.unwrap_or_else(|| {
            self.prompt_cache_hit_tokens
                .unwrap_or(0)
                .saturating_add(self.prompt_cache_miss_tokens.unwrap_or(0))
        });
        Usage {
            prompt_tokens: prompt,
            completion_tokens: self.completion_tokens.unwrap_or(0),
            cached_tokens: cached,
            cache_write_tokens: details.and_then(|d| d.cache_write_tokens).unwrap_or(0),
            reasoning_tokens: self
                .completion_tokens_details
                .as_ref()
                .and_then(|d| d.reasoning_tokens)
                .unwrap_or(0),
            cache_write_long_tokens: 0,
        }
    }
}

/// Usage from an OpenAI-shaped `usage` value; `None` when absent or null.
pub fn from_openai(usage: &Value) -> Option<Usage> {
    if usage.is_null() {
        return None;
    }
    OpenAiUsage::deserialize(usage).ok().map(|u| u.normalise())
}

/// Usage from an OpenAI-shaped `usage` object's JSON text; `None` when `null` or not such
/// an object.
pub fn from_openai_text(usage: &str) -> Option<Usage> {
    serde_json::from_str::<Option<OpenAiUsage>>(usage)
        .ok()
        .flatten()
        .map(|u| u.normalise())
}

/// Anthropic's usage object. `input_tokens` excludes cache reads and writes.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct AnthropicUsage {
    /// Uncached input tokens.
    #[serde(default)]
    pub input_tokens: Option<u64>,
    /// Output tokens (cumulative in stream deltas).
    #[serde(default)]
    pub output_tokens: Option<u64>,
    /// Input tokens written to the cache.
    #[serde(default)]
    pub cache_creation_input_tokens: Option<u64>,
    /// Input tokens read from the cache.
    #[serde(default)]
    pub cache_read_input_tokens: Option<u64>,
    /// The cache writes by time to live.
    #[serde(default)]
    pub cache_creation: Option<CacheCreation>,
}

/// Anthropic's `usage.cache_creation`: the cache writes by time to live.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct CacheCreation {
    /// Written to be kept 5 minutes.
    #[serde(default)]
    pub ephemeral_5m_input_tokens: Option<u64>,
    /// Written to be kept an hour.
    #[serde(default)]
    pub ephemeral_1h_input_tokens: Option<u64>,
}

impl AnthropicUsage {
    /// Overlays the fields `later` sets (stream deltas update some fields, not all).
    pub fn merge(&mut self, later: &AnthropicUsage) {
        let pick = |a: &mut Option<u64>, b: Option<u64>| {
            if b.is_some() {
                *a = b;
            }
        };
        pick(&mut self.input_tokens, later.input_tokens);
        pick(&mut self.output_tokens, later.output_tokens);
        pick(
            &mut self.cache_creation_input_tokens,
            later.cache_creation_input_tokens,
        );
        pick(
            &mut self.cache_read_input_tokens,
            later.cache_read_input_tokens,
        );
        if later.cache_creation.is_some() {
            self.cache_creation = later.cache_creation;
        }
    }

    /// Normalised usage: prompt tokens include cache reads and writes.
    pub fn normalise(&self) -> Usage {
        let read = self.cache_read_input_tokens.unwrap_or(0);
        let write = self.cache_creation_input_tokens.unwrap_or(0);
        Usage {
            prompt_tokens: self
                .input_tokens
                .unwrap_or(0)
                .saturating_add(read)
                .saturating_add(write),
            completion_tokens: self.output_tokens.unwrap_or(0),
            cached_tokens: read,
            cache_write_tokens: write,
            reasoning_tokens: 0,
            cache_write_long_tokens: self
                .cache_creation
                .and_then(|c| c.ephemeral_1h_input_tokens)
                .unwrap_or(0)
                .min(write),
        }
    }
}

/// Gemini's `usageMetadata`. `promptTokenCount` includes the cached tokens; thoughts are
/// counted apart from the answer's tokens and billed as output.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GeminiUsage {
    /// Input tokens, cached ones included.
    #[serde(default)]
    pub prompt_token_count: Option<u64>,
    /// The answer's tokens, thoughts apart.
    #[serde(default)]
    pub candidates_token_count: Option<u64>,
    /// Input tokens served from a cache (implicit or explicit).
    #[serde(default)]
    pub cached_content_token_count: Option<u64>,
    /// Tokens the model spent thinking.
    #[serde(default)]
    pub thoughts_token_count: Option<u64>,
    /// Input tokens of tool results the model read (search, code execution).
    #[serde(default)]
    pub tool_use_prompt_token_count: Option<u64>,
}

impl GeminiUsage {
    /// Normalised usage: thoughts are output, and reasoning.
    pub fn normalise(&self) -> Usage {
        let thoughts = self.thoughts_token_count.unwrap_or(0);
        let prompt = self
            .prompt_token_count
            .unwrap_or(0)
            .saturating_add(self.tool_use_prompt_token_count.unwrap_or(0));
        Usage {
            prompt_tokens: prompt,
            completion_tokens: self
                .candidates_token_count
                .unwrap_or(0)
                .saturating_add(thoughts),
            cached_tokens: self.cached_content_token_count.unwrap_or(0).min(prompt),
            cache_write_tokens: 0,
            reasoning_tokens: thoughts,
            cache_write_long_tokens: 0,
        }
    }
}

/// Bedrock Converse's `usage`. `inputTokens` excludes cache reads and writes.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BedrockUsage {
    /// Uncached input tokens.
    #[serde(default)]
    pub input_tokens: Option<u64>,
    /// Output tokens.
    #[serde(default)]
    pub output_tokens: Option<u64>,
    /// Input tokens read from the prompt cache.
    #[serde(default)]
    pub cache_read_input_tokens: Option<u64>,
    /// Input tokens written to the prompt cache.
    #[serde(default)]
    pub cache_write_input_tokens: Option<u64>,
}

impl BedrockUsage {
    /// Normalised usage: prompt tokens include cache reads and writes.
    pub fn normalise(&self) -> Usage {
        let read = self.cache_read_input_tokens.unwrap_or(0);
        let write = self.cache_write_input_tokens.unwrap_or(0);
        Usage {
            prompt_tokens: self
                .input_tokens
                .unwrap_or(0)
                .saturating_add(read)
                .saturating_add(write),
            completion_tokens: self.output_tokens.unwrap_or(0),
            cached_tokens: read,
            cache_write_tokens: write,
            reasoning_tokens: 0,
            cache_write_long_tokens: 0,
        }
    }
}

/// Renders usage the way OpenAI's chat completions do, cache fields included.
pub fn to_openai_json(u: &Usage) -> Value {
    json!({
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.total_tokens(),
        "prompt_tokens_details": {
            "cached_tokens": u.cached_tokens,
            "cache_write_tokens": u.cache_write_tokens,
        },
        "completion_tokens_details": {
            "reasoning_tokens": u.reasoning_tokens,
        },
    })
}

#[cfg(test)]
mod tests;
