//! A chat-completions answer written as a Messages answer: reasoning as a thinking block,
//! text, tool calls as `tool_use` blocks, the finish reason as a stop reason, usage with the
//! prompt cache's reads and writes apart from the uncached input.

use serde_json::{Value, json};
use sluice_core::{ErrorKind, GatewayError};

/// A chat `finish_reason` as a Messages `stop_reason`.
pub fn stop_reason(finish: &str) -> &'static str {
    match finish {
        "length" => "max_tokens",
        "tool_calls" | "function_call" => "tool_use",
        "content_filter" => "refusal",
        _ => "end_turn",
    }
}

/// A message id in Messages' form: the upstream's, prefixed `msg_` unless it already is.
pub fn message_id(id: &str) -> String {
    if id.starts_with("msg_") {
        id.to_string()
    } else {
        format!("msg_{id}")
    }
}

/// Chat usage (`prompt_tokens` counting every input token) as Messages usage
/// (`input_tokens` counting only the uncached ones).
pub fn usage(u: Option<&Value>) -> Value {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let u = u.unwrap_or(&Value::Null);
    let details = u.get("prompt_tokens_details");
    let read = n(details.and_then(|d| d.get("cached_tokens")));
    let written = n(details.and_then(|d| d.get("cache_write_tokens")));
    let input = n(u.get("prompt_tokens"))
        .saturating_sub(read)
        .saturating_sub(written);
    json!({
        "input_tokens": input,
        "output_tokens": n(u.get("completion_tokens")),
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": written,
    })
}

/// Writes the chat-completions answer `body` as a Messages answer.
pub fn from_chat(body: &[u8]) -> Result<Vec<u8>, GatewayError> {
    let (chat, choice) = crate::json::chat_answer(body)?;
    let message = choice.get("message").unwrap_or(&Value::Null);
    let mut content = Vec::new();
    if let Some(thought) = message
        .get("reasoning_content")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    {
        content.push(json!({"type": "thinking", "thinking": thought, "signature": ""}));
    }
    if let Some(text) = message
        .get("content")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    {
        content.push(json!({"type": "text", "text": text}));
    }
    for (call_id, name, args) in crate::json::tool_calls(message) {
        let input: Value = if args.trim().is_empty() {
            json!({})
        } else {
            serde_json::from_str(args).map_err(|e| {
                GatewayError::new(
                    ErrorKind::UpstreamProtocol,
                    format!("the upstream's tool call arguments are not JSON: {e}"),
                )
            })?
        };
        content.push(json!({
            "type": "tool_use",
            "id": call_id,
            "name": name,
            "input": input,
        }));
    }
    let id = chat.get("id").and_then(Value::as_str).unwrap_or_default();
    let out = json!({
        "id": message_id(id),
        "type": "message",
        "role": "assistant",
        "model": chat.get("model").cloned().unwrap_or(Value::from("")),
        "content": content,
        "stop_reason": choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(stop_reason),
        "stop_sequence": null,
        "usage": usage(chat.get("usage")),
    });
    crate::json::write(&out)
}
