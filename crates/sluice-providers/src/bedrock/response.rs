//! Bedrock Converse answer → chat-completions answer: text, reasoning and `toolUse` blocks,
//! the stop reason as a finish reason, usage with the prompt cache's reads and writes.

use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};
use sluice_core::{ErrorKind, GatewayError, Usage};

use crate::unix_now;
use crate::usage::{BedrockUsage, to_openai_json};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Answer {
    output: Output,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: BedrockUsage,
}

#[derive(Deserialize)]
struct Output {
    message: Message,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    content: Vec<Value>,
}

/// A Converse `stopReason` as a chat-completions `finish_reason`.
pub(crate) fn finish_reason(stop: &str) -> &'static str {
    match stop {
        "max_tokens" | "model_context_window_exceeded" => "length",
        "tool_use" => "tool_calls",
        "guardrail_intervened" | "content_filtered" => "content_filter",
        _ => "stop",
    }
}

/// The malformed-answer error of `upstream`.
pub(crate) fn unreadable(upstream: &str, e: impl std::fmt::Display) -> GatewayError {
    GatewayError::new(
        ErrorKind::UpstreamProtocol,
        format!("upstream {upstream} answered an unreadable Converse answer: {e}"),
    )
}

/// Translates a complete Converse answer of `upstream` for `model`; returns the OpenAI body
/// and the usage.
pub fn translate_response(
    raw: &[u8],
    upstream: &str,
    model: &str,
) -> Result<(Bytes, Usage), GatewayError> {
    let answer: Answer = serde_json::from_slice(raw).map_err(|e| unreadable(upstream, e))?;
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut tool_calls = Vec::new();
    for block in &answer.output.message.content {
        if let Some(t) = block.get("text").and_then(Value::as_str) {
            text.push_str(t);
        } else if let Some(t) = block
            .pointer("/reasoningContent/reasoningText/text")
            .and_then(Value::as_str)
        {
            reasoning.push_str(t);
        } else if let Some(u) = block.get("toolUse") {
            tool_calls.push(json!({
                "id": u.get("toolUseId").cloned().unwrap_or(Value::Null),
                "type": "function",
                "function": {
                    "name": u.get("name").cloned().unwrap_or(Value::Null),
                    "arguments": u.get("input").map_or_else(|| "{}".to_string(), Value::to_string),
                },
            }));
        }
    }
    let content = if text.is_empty() && !tool_calls.is_empty() {
        Value::Null
    } else {
        Value::from(text)
    };
    let mut message = json!({ "role": "assistant", "content": content });
    if !tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(tool_calls);
    }
    if !reasoning.is_empty() {
        message["reasoning_content"] = Value::from(reasoning);
    }
    let usage = answer.usage.normalise();
    let body = json!({
        "id": format!("chatcmpl-bedrock-{}", unix_now()),
        "object": "chat.completion",
        "created": unix_now(),
        "model": model,
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": answer.stop_reason.as_deref().map(finish_reason),
        }],
        "usage": to_openai_json(&usage),
    });
    Ok((Bytes::from(body.to_string()), usage))
}
