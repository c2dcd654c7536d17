//! What each upstream model can take and do: its context window, its longest answer, and
//! its capabilities (tools, images, JSON output, reasoning). Shipped for the models sluice
//! names, as their providers published them; every field can be overridden per model in
//! `[catalog.MODEL]`. Routing reads it to keep a prompt off a model it does not fit.

use serde::Serialize;

/// What one model can take and do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ModelInfo {
    /// Tokens of prompt and answer together.
    pub context_window: u64,
    /// The longest answer, in tokens.
    pub max_output: u64,
    /// Calls tools (functions).
    pub tools: bool,
    /// Reads images.
    pub vision: bool,
    /// Answers in JSON on request (`response_format`).
    pub json: bool,
    /// Reasons before answering (reasoning tokens, billed as output).
    pub reasoning: bool,
}

impl ModelInfo {
    /// Whether a prompt of `prompt` tokens and an answer of up to `output` tokens fit.
    pub fn fits(&self, prompt: u64, output: u64) -> bool {
        prompt.saturating_add(output) <= self.context_window
    }
}

/// One shipped entry: name, context window, longest answer, tools, vision, JSON, reasoning.
type Entry = (&'static str, u64, u64, bool, bool, bool, bool);

/// The shipped entries, as each provider's model pages gave them (check them against your
/// account's; override in `[catalog.MODEL]`).
pub(crate) const DEFAULTS: &[Entry] = &[
    // OpenAI
    ("gpt-4.1", 1_047_576, 32_768, true, true, true, false),
    ("gpt-4.1-mini", 1_047_576, 32_768, true, true, true, false),
    ("gpt-4o", 128_000, 16_384, true, true, true, false),
    ("gpt-4o-mini", 128_000, 16_384, true, true, true, false),
    // Anthropic
    ("claude-opus-4-1", 200_000, 32_000, true, true, false, true),
    (
        "claude-sonnet-4-5",
        200_000,
        64_000,
        true,
        true,
        false,
        true,
    ),
    ("claude-haiku-4-5", 200_000, 64_000, true, true, false, true),
    // DeepSeek
    ("deepseek-chat", 128_000, 8_192, true, false, true, false),
    (
        "deepseek-reasoner",
        128_000,
        65_536,
        false,
        false,
        true,
        true,
    ),
    // Zhipu GLM
    ("glm-4.5", 128_000, 98_304, true, false, true, true),
    ("glm-4.5-air", 128_000, 98_304, true, false, true, true),
    ("glm-4.6", 200_000, 131_072, true, false, true, true),
    // The newer three, as the price table of the `litellm` 1.110.2 package on PyPI gives
    // them (its source: docs.bigmodel.cn/cn/guide/start/pricing).
    ("glm-5.3", 1_000_000, 128_000, true, false, true, true),
    ("glm-5.3-flashx", 1_000_000, 128_000, true, true, true, true),
    ("glm-5.3-flash", 1_000_000, 128_000, true, true, true, true),
    // Moonshot Kimi
    (
        "kimi-k2-0905-preview",
        262_144,
        16_384,
        true,
        false,
        true,
        false,
    ),
    (
        "moonshot-v1-128k",
        131_072,
        16_384,
        true,
        false,
        true,
        false,
    ),
    ("moonshot-v1-32k", 32_768, 16_384, true, false, true, false),
    // The newer two, from the same package (platform.kimi.ai/docs/pricing).
    ("kimi-k3", 1_048_576, 1_048_576, true, true, true, true),
    ("kimi-k2.6", 262_144, 262_144, true, true, true, true),
    // MiniMax
    ("MiniMax-M3", 1_000_000, 128_000, true, true, false, true),
    ("MiniMax-M2", 204_800, 131_072, true, false, false, true),
    (
        "MiniMax-Text-01",
        1_000_192,
        40_000,
        true,
        false,
        false,
        false,
    ),
    // Tencent Hunyuan; hy4 from the same package (tencentcloud.com/document/product/1300/78937).
    ("hy4", 960_000, 64_000, true, true, true, true),
    (
        "hunyuan-turbos-latest",
        32_000,
        16_000,
        true,
        false,
        true,
        false,
    ),
    (
        "hunyuan-t1-latest",
        96_000,
        64_000,
        false,
        false,
        false,
        true,
    ),
    // AWS Bedrock model ids, from the same package; JSON answers off: sluice's Converse
    // adapter refuses `response_format`, which Converse has no field for.
    (
        "amazon.nova-pro-v1:0",
        300_000,
        10_000,
        true,
        true,
        false,
        false,
    ),
    (
        "amazon.nova-lite-v1:0",
        300_000,
        10_000,
        true,
        true,
        false,
        false,
    ),
    (
        "amazon.nova-micro-v1:0",
        128_000,
        10_000,
        true,
        false,
        false,
        false,
    ),
    (
        "anthropic.claude-sonnet-4-5-20250929-v1:0",
        200_000,
        64_000,
        true,
        true,
        false,
        true,
    ),
    (
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        200_000,
        64_000,
        true,
        true,
        false,
        true,
    ),
    (
        "anthropic.claude-haiku-4-5-20251001-v1:0",
        200_000,
        64_000,
        true,
        true,
        false,
        true,
    ),
    // Google Gemini (ai.google.dev/gemini-api/docs/models), from the same package.
    ("gemini-2.5-pro", 1_048_576, 65_536, true, true, true, true),
    (
        "gemini-2.5-flash",
        1_048_576,
        65_536,
        true,
        true,
        true,
        true,
    ),
    (
        "gemini-2.5-flash-lite",
        1_048_576,
        65_536,
        true,
        true,
        true,
        true,
    ),
    (
        "gemini-3-flash-preview",
        1_048_576,
        65_536,
        true,
        true,
        true,
        true,
    ),
    (
        "gemini-3.1-pro-preview",
        1_048_576,
        65_536,
        true,
        true,
        true,
        true,
    ),
];

/// The shipped entries as (name, info).
pub(crate) fn shipped() -> impl Iterator<Item = (&'static str, ModelInfo)> {
    DEFAULTS.iter().map(
        |&(name, context_window, max_output, tools, vision, json, reasoning)| {
            (
                name,
                ModelInfo {
                    context_window,
                    max_output,
                    tools,
                    vision,
                    json,
                    reasoning,
                },
            )
        },
    )
}

/// A partial override of a model's entry (`[catalog.MODEL]`): each field given replaces the
/// shipped one; a model sluice does not ship must give `context_window` and `max_output`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InfoOverride {
    /// Tokens of prompt and answer together.
    pub context_window: Option<u64>,
    /// The longest answer, in tokens.
    pub max_output: Option<u64>,
    /// Calls tools.
    pub tools: Option<bool>,
    /// Reads images.
    pub vision: Option<bool>,
    /// Answers in JSON on request.
    pub json: Option<bool>,
    /// Reasons before answering.
    pub reasoning: Option<bool>,
}

impl InfoOverride {
    /// `base` with these fields replaced; `None` when there is no base and the sizes are
    /// not both given.
    pub fn apply(&self, base: Option<ModelInfo>) -> Option<ModelInfo> {
        let base = match base {
            Some(b) => b,
            None => ModelInfo {
                context_window: self.context_window?,
                max_output: self.max_output?,
                ..ModelInfo::default()
            },
        };
        Some(ModelInfo {
            context_window: self.context_window.unwrap_or(base.context_window),
            max_output: self.max_output.unwrap_or(base.max_output),
            tools: self.tools.unwrap_or(base.tools),
            vision: self.vision.unwrap_or(base.vision),
            json: self.json.unwrap_or(base.json),
            reasoning: self.reasoning.unwrap_or(base.reasoning),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_provider_ships_entries_that_make_sense() {
        let all: Vec<(&str, ModelInfo)> = shipped().collect();
        for prefix in [
            "gpt-",
            "claude-",
            "deepseek-",
            "glm-",
            "kimi-",
            "MiniMax-",
            "hunyuan-",
        ] {
            assert!(all.iter().any(|(n, _)| n.starts_with(prefix)), "{prefix}");
        }
        for (name, m) in &all {
            assert!(m.context_window >= 32_000, "{name}");
            assert!(
                m.max_output > 0 && m.max_output <= m.context_window,
                "{name}"
            );
        }
    }

    #[test]
    fn an_override_replaces_only_what_it_names() {
        let base = shipped()
            .find(|(n, _)| *n == "deepseek-chat")
            .map(|(_, m)| m);
        let o = InfoOverride {
            context_window: Some(64_000),
            vision: Some(true),
            ..InfoOverride::default()
        };
        let m = o.apply(base).unwrap();
        assert_eq!(
            (m.context_window, m.max_output, m.vision, m.tools),
            (64_000, 8_192, true, true)
        );
        // A model sluice does not ship needs both sizes.
        assert_eq!(o.apply(None), None);
        let full = InfoOverride {
            max_output: Some(4_096),
            ..o
        };
        assert_eq!(full.apply(None).unwrap().context_window, 64_000);
        assert!(m.fits(60_000, 4_000) && !m.fits(60_000, 4_001));
    }
}
