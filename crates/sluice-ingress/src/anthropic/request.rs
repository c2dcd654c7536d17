//! A Messages request checked by Messages' own rules and written as a chat-completions
//! request: system to a system message, content blocks to parts, `tool_use` to tool calls,
//! `tool_result` to tool messages, tools and `tool_choice` to functions.

use serde_json::{Map, Value, json};
use sluice_core::GatewayError;

use crate::json::{bad, read_object, write};

mod tools;

use tools::{check_thinking, tool_choice, tools};

/// Messages fields with no chat-completions meaning: checked where Messages checks them,
/// then left out (an OpenAI-compatible upstream would refuse them).
const NOT_TRANSLATED: &[&str] = &[
    "top_k",
    "thinking",
    "service_tier",
    "container",
    "mcp_servers",
    "context_management",
];

/// Reads a Messages request body and writes it as a chat-completions body. Every refusal
/// names the field at fault; fields Messages does not define are forwarded unchanged.
pub fn to_chat(raw: &[u8]) -> Result<Vec<u8>, GatewayError> {
    write(&Value::Object(translate(&read_object(raw)?)?))
}

fn translate(body: &Map<String, Value>) -> Result<Map<String, Value>, GatewayError> {
    let mut out = Map::new();
    match body.get("model") {
        Some(Value::String(m)) if !m.is_empty() => {
            out.insert("model".into(), Value::from(m.as_str()));
        }
        None => return Err(bad("model", "model: Field required")),
        Some(_) => return Err(bad("model", "model: must be a non-empty string")),
    }
    let mut messages = Vec::new();
    if let Some(system) = body.get("system") {
        messages.push(json!({"role": "system", "content": system_content(system)?}));
    }
    match body.get("messages") {
        Some(Value::Array(list)) if !list.is_empty() => turns(list, &mut messages)?,
        Some(Value::Array(_)) => {
            return Err(bad(
                "messages",
                "messages: at least one message is required",
            ));
        }
        None => return Err(bad("messages", "messages: Field required")),
        Some(_) => return Err(bad("messages", "messages: must be an array")),
    }
    out.insert("messages".into(), Value::Array(messages));
    match body.get("max_tokens") {
        Some(v) if v.as_u64().is_some_and(|n| n >= 1) => {
            out.insert("max_tokens".into(), v.clone());
        }
        None => return Err(bad("max_tokens", "max_tokens: Field required")),
        Some(_) => {
            return Err(bad(
                "max_tokens",
                "max_tokens: must be an integer of at least 1",
            ));
        }
    }
    let stream = match body.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(bad("stream", "stream: must be a boolean")),
    };
    if stream {
        out.insert("stream".into(), Value::Bool(true));
        // The usage chunk is what `message_delta` reports at the end.
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    for (key, value) in body {
        match key.as_str() {
            "model" | "messages" | "max_tokens" | "stream" | "system" => {}
            "temperature" | "top_p" => {
                // Anthropic's range for both, narrower than OpenAI's for temperature.
                match value.as_f64() {
                    None => return Err(bad(key.as_str(), format!("{key}: must be a number"))),
                    Some(v) if !(0.0..=1.0).contains(&v) => {
                        return Err(bad(
                            key.as_str(),
                            format!("{key}: must be between 0 and 1, got {v}"),
                        ));
                    }
                    Some(_) => {}
                }
                out.insert(key.clone(), value.clone());
            }
            "top_k" if !value.is_u64() => {
                return Err(bad("top_k", "top_k: must be a non-negative integer"));
            }
            "stop_sequences" => {
                let fine = value
                    .as_array()
                    .is_some_and(|a| a.iter().all(Value::is_string));
                if !fine {
                    return Err(bad(
                        "stop_sequences",
                        "stop_sequences: must be an array of strings",
                    ));
                }
                out.insert("stop".into(), value.clone());
            }
            "metadata" => {
                let Value::Object(m) = value else {
                    return Err(bad("metadata", "metadata: must be an object"));
                };
                match m.get("user_id") {
                    None | Some(Value::Null) => {}
                    Some(Value::String(u)) => {
                        out.insert("user".into(), Value::from(u.as_str()));
                    }
                    Some(_) => {
                        return Err(bad(
                            "metadata.user_id",
                            "metadata.user_id: must be a string",
                        ));
                    }
                }
            }
            "tools" => {
                out.insert("tools".into(), tools(value)?);
            }
            "tool_choice" => tool_choice(value, &mut out)?,
            "thinking" => check_thinking(value)?,
            k if NOT_TRANSLATED.contains(&k) => {}
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    Ok(out)
}

/// `system` as a string, or text blocks (their `cache_control` kept).
fn system_content(system: &Value) -> Result<Value, GatewayError> {
    match system {
        Value::String(s) => Ok(Value::from(s.as_str())),
        Value::Array(blocks) => {
            let mut parts = Vec::with_capacity(blocks.len());
            for (j, b) in blocks.iter().enumerate() {
                let at = format!("system[{j}]");
                if b.get("type").and_then(Value::as_str) != Some("text") {
                    return Err(bad(
                        format!("{at}.type"),
                        format!("{at}.type: system blocks must be `text`"),
                    ));
                }
                parts.push(text_part(b, &at)?);
            }
            Ok(Value::Array(parts))
        }
        _ => Err(bad(
            "system",
            "system: must be a string or an array of text blocks",
        )),
    }
}

fn text_part(block: &Value, at: &str) -> Result<Value, GatewayError> {
    let Some(text) = block.get("text").and_then(Value::as_str) else {
        return Err(bad(
            format!("{at}.text"),
            format!("{at}.text: Field required (a string)"),
        ));
    };
    let mut part = json!({"type": "text", "text": text});
    keep_cache_control(block, &mut part);
    Ok(part)
}

/// Carries a prompt-cache breakpoint onto the part (the Anthropic adapter sends it on).
fn keep_cache_control(block: &Value, part: &mut Value) {
    if let (Some(cc), Some(obj)) = (block.get("cache_control"), part.as_object_mut()) {
        obj.insert("cache_control".into(), cc.clone());
    }
}

/// The conversation: each Messages turn as one or more chat messages.
fn turns(list: &[Value], out: &mut Vec<Value>) -> Result<(), GatewayError> {
    // The tool calls of the last assistant turn: a `tool_result` must answer one of them.
    let mut open_calls: Vec<String> = Vec::new();
    for (i, m) in list.iter().enumerate() {
        let at = format!("messages[{i}]");
        let Value::Object(m) = m else {
            return Err(bad(at.clone(), format!("{at}: must be an object")));
        };
        let role = match m.get("role") {
            Some(Value::String(r)) if r == "user" || r == "assistant" => r.as_str(),
            None => {
                return Err(bad(
                    format!("{at}.role"),
                    format!("{at}.role: Field required"),
                ));
            }
            Some(other) => {
                return Err(bad(
                    format!("{at}.role"),
                    format!("{at}.role: must be `user` or `assistant`, not {other}"),
                ));
            }
        };
        let Some(content) = m.get("content") else {
            return Err(bad(
                format!("{at}.content"),
                format!("{at}.content: Field required"),
            ));
        };
        if role == "assistant" {
            open_calls = assistant(content, &at, out)?;
        } else {
            user(content, &at, &open_calls, out)?;
            open_calls.clear();
        }
    }
    Ok(())
}

fn blocks<'a>(content: &'a Value, at: &str) -> Result<&'a [Value], GatewayError> {
    content.as_array().map(Vec::as_slice).ok_or_else(|| {
        bad(
            format!("{at}.content"),
            format!("{at}.content: must be a string or an array of content blocks"),
        )
    })
}

fn block_type<'a>(b: &'a Value, at: &str) -> Result<&'a str, GatewayError> {
    b.get("type").and_then(Value::as_str).ok_or_else(|| {
        bad(
            format!("{at}.type"),
            format!("{at}.type: Field required (a string)"),
        )
    })
}

/// An assistant turn: text, tool calls; thinking blocks are checked and left out (a
/// chat-completions history has no place for them). Returns the ids of its tool calls.
fn assistant(content: &Value, at: &str, out: &mut Vec<Value>) -> Result<Vec<String>, GatewayError> {
    if let Value::String(s) = content {
        out.push(json!({"role": "assistant", "content": s}));
        return Ok(Vec::new());
    }
    let mut parts = Vec::new();
    let mut calls = Vec::new();
    let mut ids = Vec::new();
    for (j, b) in blocks(content, at)?.iter().enumerate() {
        let at = format!("{at}.content[{j}]");
        match block_type(b, &at)? {
            "text" => parts.push(text_part(b, &at)?),
            "tool_use" => {
                let id = string_field(b, "id", &at)?;
                let name = string_field(b, "name", &at)?;
                let input = match b.get("input") {
                    Some(v @ Value::Object(_)) => v.to_string(),
                    _ => {
                        return Err(bad(
                            format!("{at}.input"),
                            format!("{at}.input: must be an object"),
                        ));
                    }
                };
                ids.push(id.to_string());
                calls.push(json!({
                    "id": id, "type": "function",
                    "function": {"name": name, "arguments": input},
                }));
            }
            "thinking" => {
                string_field(b, "thinking", &at)?;
                string_field(b, "signature", &at)?;
            }
            "redacted_thinking" => {
                string_field(b, "data", &at)?;
            }
            other => return Err(not_in(other, "assistant", &at)),
        }
    }
    let mut message = json!({"role": "assistant", "content": collapse(parts)});
    if !calls.is_empty()
        && let Some(obj) = message.as_object_mut()
    {
        obj.insert("tool_calls".into(), Value::Array(calls));
    }
    out.push(message);
    Ok(ids)
}

/// A user turn: its tool results first (each a tool message, right after the tool calls
/// they answer), then its other blocks as one user message.
fn user(
    content: &Value,
    at: &str,
    open_calls: &[String],
    out: &mut Vec<Value>,
) -> Result<(), GatewayError> {
    if let Value::String(s) = content {
        out.push(json!({"role": "user", "content": s}));
        return Ok(());
    }
    let mut parts = Vec::new();
    for (j, b) in blocks(content, at)?.iter().enumerate() {
        let at = format!("{at}.content[{j}]");
        match block_type(b, &at)? {
            "text" => parts.push(text_part(b, &at)?),
            "image" => parts.push(image_part(b, &at)?),
            "document" => parts.push(document_part(b, &at)?),
            "tool_result" => {
                let id = string_field(b, "tool_use_id", &at)?;
                if !open_calls.iter().any(|c| c == id) {
                    return Err(bad(
                        format!("{at}.tool_use_id"),
                        format!(
                            "{at}.tool_use_id: `{id}` answers no `tool_use` block of the \
                             assistant turn before it"
                        ),
                    ));
                }
                let (text, images) = tool_result_content(b.get("content"), &at)?;
                out.push(json!({"role": "tool", "tool_call_id": id, "content": text}));
                parts.extend(images);
            }
            other => return Err(not_in(other, "user", &at)),
        }
    }
    if !parts.is_empty() {
        out.push(json!({"role": "user", "content": collapse(parts)}));
    }
    Ok(())
}

/// A `tool_result`'s content as the tool message's text, and its images (which a tool
/// message cannot hold) to follow in the user message.
fn tool_result_content(
    content: Option<&Value>,
    at: &str,
) -> Result<(String, Vec<Value>), GatewayError> {
    match content {
        None | Some(Value::Null) => Ok((String::new(), Vec::new())),
        Some(Value::String(s)) => Ok((s.clone(), Vec::new())),
        Some(Value::Array(list)) => {
            let (mut text, mut images) = (String::new(), Vec::new());
            for (k, b) in list.iter().enumerate() {
                let at = format!("{at}.content[{k}]");
                match block_type(b, &at)? {
                    "text" => {
                        if !text.is_empty() {
                            text.push('\n');
                        }
                        text.push_str(string_field(b, "text", &at)?);
                    }
                    "image" => images.push(image_part(b, &at)?),
                    "document" => images.push(document_part(b, &at)?),
                    other => return Err(not_in(other, "tool_result", &at)),
                }
            }
            Ok((text, images))
        }
        Some(_) => Err(bad(
            format!("{at}.content"),
            format!("{at}.content: must be a string or an array of blocks"),
        )),
    }
}

/// An `image` block as an `image_url` part (base64 sources as a data URL).
fn image_part(b: &Value, at: &str) -> Result<Value, GatewayError> {
    let url = match source(b, at)? {
        ("base64", s) => {
            let media = string_field(s, "media_type", &format!("{at}.source"))?;
            let data = string_field(s, "data", &format!("{at}.source"))?;
            format!("data:{media};base64,{data}")
        }
        ("url", s) => string_field(s, "url", &format!("{at}.source"))?.to_string(),
        (other, _) => {
            return Err(bad(
                format!("{at}.source.type"),
                format!("{at}.source.type: `{other}` is not `base64` or `url`"),
            ));
        }
    };
    let mut part = json!({"type": "image_url", "image_url": {"url": url}});
    keep_cache_control(b, &mut part);
    Ok(part)
}

/// A `document` block: a PDF as a `file` part, plain text as a text part.
fn document_part(b: &Value, at: &str) -> Result<Value, GatewayError> {
    let mut part = match source(b, at)? {
        ("base64", s) => {
            let media = string_field(s, "media_type", &format!("{at}.source"))?;
            let data = string_field(s, "data", &format!("{at}.source"))?;
            let name = b
                .get("title")
                .and_then(Value::as_str)
                .unwrap_or("document.pdf");
            json!({"type": "file", "file": {
                "filename": name, "file_data": format!("data:{media};base64,{data}")
            }})
        }
        ("text", s) => {
            let data = string_field(s, "data", &format!("{at}.source"))?;
            json!({"type": "text", "text": data})
        }
        (other, _) => {
            return Err(bad(
                format!("{at}.source.type"),
                format!(
                    "{at}.source.type: a `{other}` document cannot be translated; send it as \
                     `base64` or `text`"
                ),
            ));
        }
    };
    keep_cache_control(b, &mut part);
    Ok(part)
}

fn source<'a>(b: &'a Value, at: &str) -> Result<(&'a str, &'a Value), GatewayError> {
    let Some(s @ Value::Object(_)) = b.get("source") else {
        return Err(bad(
            format!("{at}.source"),
            format!("{at}.source: Field required (an object)"),
        ));
    };
    Ok((block_type(s, &format!("{at}.source"))?, s))
}

fn string_field<'a>(b: &'a Value, name: &str, at: &str) -> Result<&'a str, GatewayError> {
    b.get(name).and_then(Value::as_str).ok_or_else(|| {
        bad(
            format!("{at}.{name}"),
            format!("{at}.{name}: Field required (a string)"),
        )
    })
}

fn not_in(kind: &str, place: &str, at: &str) -> GatewayError {
    bad(
        format!("{at}.type"),
        format!("{at}.type: a `{kind}` block cannot stand in a {place} message"),
    )
}

/// Parts as a string when they are one plain text, else as parts.
fn collapse(mut parts: Vec<Value>) -> Value {
    let plain = parts.len() == 1
        && parts[0].get("cache_control").is_none()
        && parts[0].get("type").and_then(Value::as_str) == Some("text");
    match (plain, parts.pop()) {
        (true, Some(p)) => p.get("text").cloned().unwrap_or(Value::from("")),
        (false, Some(p)) => {
            parts.push(p);
            Value::Array(parts)
        }
        (_, None) => Value::from(""),
    }
}
