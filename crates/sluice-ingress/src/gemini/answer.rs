//! A chat-completions answer written as a `generateContent` answer: each choice a candidate
//! (reasoning as a thought part, text, tool calls as `functionCall` parts with their
//! signatures), the finish reason as Gemini's, usage as `usageMetadata`.

use serde::Deserialize;
use serde_json::{Value, json};
use sluice_core::{ErrorKind, GatewayError};

/// A chat `finish_reason` as a Gemini `finishReason`.
pub fn finish_reason(finish: &str) -> &'static str {
    match finish {
        "length" => "MAX_TOKENS",
        "content_filter" => "SAFETY",
        _ => "STOP",
    }
}

/// A chat answer's usage, as far as `usageMetadata` reports it.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
pub(crate) struct ChatUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Clone, Copy, Debug, Default, Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: u64,
}

#[derive(Clone, Copy, Debug, Default, Deserialize)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: u64,
}

/// Chat usage as `usageMetadata` (thoughts counted apart from the answer's tokens).
pub(crate) fn usage_metadata(u: Option<ChatUsage>) -> Value {
    let u = u.unwrap_or_default();
    let thoughts = u
        .completion_tokens_details
        .map_or(0, |d| d.reasoning_tokens)
        .min(u.completion_tokens);
    let mut v = json!({
        "promptTokenCount": u.prompt_tokens,
        "candidatesTokenCount": u.completion_tokens - thoughts,
        "totalTokenCount": u.prompt_tokens.saturating_add(u.completion_tokens),
    });
    let cached = u.prompt_tokens_details.map_or(0, |d| d.cached_tokens);
    if cached > 0 {
        v["cachedContentTokenCount"] = Value::from(cached);
    }
    if thoughts > 0 {
        v["thoughtsTokenCount"] = Value::from(thoughts);
    }
    v
}

/// A chat tool call as a `functionCall` part (its arguments parsed; its signature kept).
pub(crate) fn function_call(call: &Value) -> Result<Value, GatewayError> {
    let f = call.get("function").unwrap_or(&Value::Null);
    let args = f.get("arguments").and_then(Value::as_str).unwrap_or("{}");
    let args: Value = if args.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str(args).map_err(|e| {
            GatewayError::new(
                ErrorKind::UpstreamProtocol,
                format!("the upstream's tool call arguments are not JSON: {e}"),
            )
        })?
    };
    let mut fc = json!({"name": f.get("name").cloned().unwrap_or(Value::from("")), "args": args});
    if let Some(id) = call.get("id").filter(|v| v.is_string()) {
        fc["id"] = id.clone();
    }
    let mut part = json!({"functionCall": fc});
    if let Some(sig) = call.pointer("/extra_content/google/thought_signature") {
        part["thoughtSignature"] = sig.clone();
    }
    Ok(part)
}

/// One choice as a candidate.
fn candidate(i: usize, choice: &Value) -> Result<Value, GatewayError> {
    let m = choice.get("message").unwrap_or(&Value::Null);
    let mut parts = Vec::new();
    if let Some(t) = m
        .get("reasoning_content")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    {
        parts.push(json!({"text": t, "thought": true}));
    }
    if let Some(t) = m.get("content").and_then(Value::as_str) {
        parts.push(json!({"text": t}));
    }
    for call in m
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        parts.push(function_call(call)?);
    }
    let mut c = json!({"content": {"role": "model", "parts": parts}, "index": i});
    if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
        c["finishReason"] = Value::from(finish_reason(f));
    }
    Ok(c)
}

/// Writes the chat-completions answer `body` as a `generateContent` answer.
pub fn from_chat(body: &[u8]) -> Result<Vec<u8>, GatewayError> {
    let (chat, _) = crate::json::chat_answer(body)?;
    let candidates = chat
        .get("choices")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| candidate(i, c))
        .collect::<Result<Vec<_>, _>>()?;
    let usage = chat
        .get("usage")
        .and_then(|u| ChatUsage::deserialize(u).ok());
    let out = json!({
        "candidates": candidates,
        "usageMetadata": usage_metadata(usage),
        "modelVersion": chat.get("model").cloned().unwrap_or(Value::from("")),
        "responseId": chat.get("id").cloned().unwrap_or(Value::from("")),
    });
    crate::json::write(&out)
}
