//! A chat-completions answer written as a Responses object: the text as a `message` output
//! item, each tool call as a `function_call` item, a cut answer as `incomplete`, usage with
//! cached input and reasoning output.

use serde_json::{Value, json};
use sluice_core::GatewayError;

/// Seconds since the epoch.
pub(crate) fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The response's id from the upstream's: `resp_` and its id.
pub fn response_id(id: &str) -> String {
    format!("resp_{id}")
}

/// Chat usage as Responses usage.
pub fn usage(u: Option<&Value>) -> Value {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let u = u.unwrap_or(&Value::Null);
    let (input, output) = (n(u.get("prompt_tokens")), n(u.get("completion_tokens")));
    json!({
        "input_tokens": input,
        "input_tokens_details": {
            "cached_tokens": n(u.get("prompt_tokens_details").and_then(|d| d.get("cached_tokens"))),
        },
        "output_tokens": output,
        "output_tokens_details": {
            "reasoning_tokens": n(u.get("completion_tokens_details").and_then(|d| d.get("reasoning_tokens"))),
        },
        "total_tokens": input.saturating_add(output),
    })
}

/// The status a finish reason gives, and why it is incomplete.
pub fn status(finish: Option<&str>) -> (&'static str, Value) {
    match finish {
        Some("length") => ("incomplete", json!({"reason": "max_output_tokens"})),
        Some("content_filter") => ("incomplete", json!({"reason": "content_filter"})),
        _ => ("completed", Value::Null),
    }
}

/// A `message` output item holding `text`.
pub fn message_item(id: &str, text: &str, status: &str) -> Value {
    json!({"type": "message", "id": id, "status": status, "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

/// A `function_call` output item.
pub fn call_item(call_id: &str, name: &str, arguments: &str, status: &str) -> Value {
    json!({"type": "function_call", "id": format!("fc_{call_id}"), "call_id": call_id,
        "name": name, "arguments": arguments, "status": status})
}

/// The response object around `output`.
pub fn response(
    id: &str,
    model: &Value,
    created: u64,
    status: &str,
    incomplete: Value,
    output: Vec<Value>,
    usage: Value,
) -> Value {
    json!({
        "id": id, "object": "response", "created_at": created, "status": status,
        "model": model, "output": output, "usage": usage,
        "error": null, "incomplete_details": incomplete, "instructions": null,
        "metadata": {}, "parallel_tool_calls": true, "temperature": null, "top_p": null,
        "tool_choice": "auto", "tools": [], "text": {"format": {"type": "text"}},
        "truncation": "disabled", "store": false, "previous_response_id": null,
    })
}

/// Writes the chat-completions answer `body` as a Responses object.
pub fn from_chat(body: &[u8]) -> Result<Vec<u8>, GatewayError> {
    let (chat, choice) = crate::json::chat_answer(body)?;
    let message = choice.get("message").unwrap_or(&Value::Null);
    let id = chat.get("id").and_then(Value::as_str).unwrap_or_default();
    let mut output = Vec::new();
    if let Some(text) = message
        .get("content")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    {
        output.push(message_item(&format!("msg_{id}"), text, "completed"));
    }
    for (call_id, name, arguments) in crate::json::tool_calls(message) {
        output.push(call_item(call_id, name, arguments, "completed"));
    }
    let (status, incomplete) = status(choice.get("finish_reason").and_then(Value::as_str));
    let created = chat
        .get("created")
        .and_then(Value::as_u64)
        .unwrap_or_else(now_secs);
    let out = response(
        &response_id(id),
        chat.get("model").unwrap_or(&Value::Null),
        created,
        status,
        incomplete,
        output,
        usage(chat.get("usage")),
    );
    crate::json::write(&out)
}
