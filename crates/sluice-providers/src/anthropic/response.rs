//! Anthropic Messages answer → chat-completions answer.

use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};
use sluice_core::Usage;

use crate::unix_now;
use crate::usage::{AnthropicUsage, to_openai_json};

#[derive(Deserialize)]
struct Message {
    id: String,
    model: String,
    #[serde(default)]
    content: Vec<Value>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: AnthropicUsage,
}

/// Maps a Messages `stop_reason` to a chat-completions `finish_reason`.
pub(crate) fn finish_reason(stop: &str) -> &'static str {
    match stop {
        "max_tokens" | "model_context_window_exceeded" => "length",
        "tool_use" => "tool_calls",
        "refusal" => "content_filter",
        _ => "stop",
    }
}

/// Translates a complete Messages answer; returns the OpenAI body and the usage.
pub fn translate_response(raw: &[u8]) -> Result<(Bytes, Usage), serde_json::Error> {
    let msg: Message = serde_json::from_slice(raw)?;
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut tool_calls = Vec::new();
    for block in &msg.content {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(block.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("thinking") => {
                reasoning.push_str(block.get("thinking").and_then(Value::as_str).unwrap_or(""));
            }
            Some("tool_use") => tool_calls.push(json!({
                "id": block.get("id").cloned().unwrap_or(Value::Null),
                "type": "function",
                "function": {
                    "name": block.get("name").cloned().unwrap_or(Value::Null),
                    "arguments": block.get("input").map(Value::to_string).unwrap_or_else(|| "{}".into()),
                },
            })),
            _ => {}
        }
    }
    let mut message = json!({ "role": "assistant", "content": if text.is_empty() && !tool_calls.is_empty() { Value::Null } else { Value::from(text) } });
    if let Some(obj) = message.as_object_mut() {
        if !tool_calls.is_empty() {
            obj.insert("tool_calls".into(), Value::Array(tool_calls));
        }
        if !reasoning.is_empty() {
            obj.insert("reasoning_content".into(), Value::from(reasoning));
        }
    }
    let usage = msg.usage.normalise();
    let body = json!({
        "id": msg.id,
        "object": "chat.completion",
        "created": unix_now(),
        "model": msg.model,
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": msg.stop_reason.as_deref().map(finish_reason),
        }],
        "usage": to_openai_json(&usage),
    });
    Ok((Bytes::from(body.to_string()), usage))
}
