//! What `[providers.NAME]` with `kind = "openai"` says beyond where the upstream is.

/// An OpenAI-compatible provider's own settings (every field optional).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(default)]
pub struct OpenAiParams {
    /// The upstream serves OpenAI's Responses API (`/responses`), so a Responses client's
    /// request goes to it as it came. Off unless `true` (most OpenAI-compatible servers serve
    /// chat completions only, and get it translated).
    pub responses: bool,
}
