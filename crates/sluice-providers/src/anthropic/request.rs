//! Chat-completions request → Anthropic Messages request.

use serde_json::{Map, Value, json};
use sluice_core::{ChatRequest, ErrorKind, GatewayError};

/// OpenAI fields that have no Messages equivalent and are dropped rather than sent to fail.
const DROPPED: &[&str] = &[
    "n",
    "presence_penalty",
    "frequency_penalty",
    "logprobs",
    "top_logprobs",
    "logit_bias",
    "seed",
    "response_format",
    "parallel_tool_calls",
    "stream_options",
    "store",
    "modalities",
    "prediction",
    "audio",
    "reasoning_effort",
    "service_tier",
];

fn bad(param: String, message: String) -> GatewayError {
    GatewayError::new(ErrorKind::InvalidRequest, message).with_param(param)
}

/// Translates `req` for `model`. Fields Messages understands are mapped; OpenAI-only fields
/// are dropped; anything else (provider-specific options such as `thinking` or `top_k`) is
/// forwarded untouched.
pub fn translate_request(
    req: &ChatRequest,
    model: &str,
    default_max_tokens: u32,
) -> Result<Value, GatewayError> {
    let mut out = Map::new();
    out.insert("model".into(), Value::from(model));
    let body = req.to_map();
    let (system, messages) = translate_messages(&body)?;
    if !system.is_empty() {
        out.insert("system".into(), Value::Array(system));
    }
    out.insert("messages".into(), Value::Array(messages));
    let max = req.max_tokens().unwrap_or(u64::from(default_max_tokens));
    out.insert("max_tokens".into(), Value::from(max));
    for (k, v) in &body {
        match k.as_str() {
            "model" | "messages" | "max_tokens" | "max_completion_tokens" => {}
            "stream" => {
                out.insert("stream".into(), Value::Bool(req.stream));
            }
            "stop" => {
                let seqs = match v {
                    Value::String(s) => vec![Value::from(s.as_str())],
                    Value::Array(a) => a.clone(),
                    _ => Vec::new(),
                };
                if !seqs.is_empty() {
                    out.insert("stop_sequences".into(), Value::Array(seqs));
                }
            }
            "tools" => {
                out.insert("tools".into(), translate_tools(v)?);
            }
            "tool_choice" => {
                if let Some(choice) = translate_tool_choice(v) {
                    out.insert("tool_choice".into(), choice);
                }
            }
            "user" => {
                out.insert("metadata".into(), json!({ "user_id": v }));
            }
            k if DROPPED.contains(&k) => {}
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(Value::Object(out))
}

/// Splits system messages out and turns the rest into alternating user/assistant turns.
fn translate_messages(body: &Map<String, Value>) -> Result<(Vec<Value>, Vec<Value>), GatewayError> {
    let empty = Vec::new();
    let msgs = body
        .get("messages")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let mut system = Vec::new();
    let mut turns: Vec<(String, Vec<Value>)> = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
        let content = m.get("content").unwrap_or(&Value::Null);
        let (turn_role, blocks) = match role {
            "system" | "developer" => {
                system.extend(content_blocks(content, i)?);
                continue;
            }
            "user" => ("user", content_blocks(content, i)?),
            "assistant" => ("assistant", assistant_blocks(m, content, i)?),
            "tool" | "function" => ("user", vec![tool_result(m, content, i)?]),
            other => {
                return Err(bad(
                    format!("messages[{i}].role"),
                    format!("role `{other}` cannot be sent to an Anthropic upstream"),
                ));
            }
        };
        if blocks.is_empty() {
            continue;
        }
        // Messages wants strictly alternating roles: merge consecutive turns of one role.
        match turns.last_mut() {
            Some((r, b)) if r == turn_role => b.extend(blocks),
            _ => turns.push((turn_role.to_string(), blocks)),
        }
    }
    let messages = turns
        .into_iter()
        .map(|(role, content)| json!({ "role": role, "content": content }))
        .collect();
    Ok((system, messages))
}

fn content_blocks(content: &Value, i: usize) -> Result<Vec<Value>, GatewayError> {
    match content {
        Value::Null => Ok(Vec::new()),
        Value::String(s) if s.is_empty() => Ok(Vec::new()),
        Value::String(s) => Ok(vec![json!({ "type": "text", "text": s })]),
        Value::Array(parts) => parts
            .iter()
            .enumerate()
            .map(|(j, p)| content_part(p, i, j))
            .collect(),
        _ => Err(bad(
            format!("messages[{i}].content"),
            "content must be a string or an array of parts".into(),
        )),
    }
}

fn content_part(p: &Value, i: usize, j: usize) -> Result<Value, GatewayError> {
    let kind = p.get("type").and_then(Value::as_str).unwrap_or_default();
    let mut block = match kind {
        "text" => {
            json!({ "type": "text", "text": p.get("text").cloned().unwrap_or(Value::from("")) })
        }
        "image_url" => {
            let url = p
                .get("image_url")
                .and_then(|u| u.get("url").or(Some(u)))
                .and_then(Value::as_str)
                .unwrap_or_default();
            image_block(url).ok_or_else(|| {
                bad(
                    format!("messages[{i}].content[{j}].image_url"),
                    "image_url must be an http(s) URL or a base64 data URL".into(),
                )
            })?
        }
        other => {
            return Err(bad(
                format!("messages[{i}].content[{j}].type"),
                format!("content part type `{other}` cannot be sent to an Anthropic upstream"),
            ));
        }
    };
    // Carry prompt-cache breakpoints through (clients may mark parts for caching).
    if let (Some(cc), Some(obj)) = (p.get("cache_control"), block.as_object_mut()) {
        obj.insert("cache_control".into(), cc.clone());
    }
    Ok(block)
}

fn image_block(url: &str) -> Option<Value> {
    if let Some(rest) = url.strip_prefix("data:") {
        let (meta, data) = rest.split_once(',')?;
        let media_type = meta.strip_suffix(";base64")?;
        return Some(json!({
            "type": "image",
            "source": { "type": "base64", "media_type": media_type, "data": data }
        }));
    }
    if url.starts_with("http://") || url.starts_with("https://") {
        return Some(json!({ "type": "image", "source": { "type": "url", "url": url } }));
    }
    None
}

fn assistant_blocks(m: &Value, content: &Value, i: usize) -> Result<Vec<Value>, GatewayError> {
    let mut blocks = content_blocks(content, i)?;
    let calls = m.get("tool_calls").and_then(Value::as_array);
    for (j, call) in calls.into_iter().flatten().enumerate() {
        let f = call.get("function").unwrap_or(&Value::Null);
        let args = f.get("arguments").and_then(Value::as_str).unwrap_or("{}");
        let input: Value = if args.trim().is_empty() {
            json!({})
        } else {
            serde_json::from_str(args).map_err(|e| {
                bad(
                    format!("messages[{i}].tool_calls[{j}].function.arguments"),
                    format!("tool call arguments are not valid JSON: {e}"),
                )
            })?
        };
        blocks.push(json!({
            "type": "tool_use",
            "id": call.get("id").cloned().unwrap_or(Value::from(format!("call_{i}_{j}"))),
            "name": f.get("name").cloned().unwrap_or(Value::from("")),
            "input": input,
        }));
    }
    Ok(blocks)
}

fn tool_result(m: &Value, content: &Value, i: usize) -> Result<Value, GatewayError> {
    let id = m
        .get("tool_call_id")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            bad(
                format!("messages[{i}].tool_call_id"),
                "a tool message needs tool_call_id".into(),
            )
        })?;
    let content = match content {
        Value::String(s) => Value::from(s.as_str()),
        other => Value::Array(content_blocks(other, i)?),
    };
    Ok(json!({ "type": "tool_result", "tool_use_id": id, "content": content }))
}

fn translate_tools(v: &Value) -> Result<Value, GatewayError> {
    let Some(tools) = v.as_array() else {
        return Err(bad("tools".into(), "tools must be an array".into()));
    };
    let mut out = Vec::with_capacity(tools.len());
    for (i, t) in tools.iter().enumerate() {
        let Some(f) = t.get("function") else {
            // Anthropic-native tool definitions (server tools) pass through.
            out.push(t.clone());
            continue;
        };
        let name = f.get("name").cloned().ok_or_else(|| {
            bad(
                format!("tools[{i}].function.name"),
                "a tool needs a name".into(),
            )
        })?;
        let mut tool = json!({
            "name": name,
            "input_schema": f.get("parameters").cloned().unwrap_or(json!({"type": "object"})),
        });
        if let (Some(d), Some(obj)) = (f.get("description"), tool.as_object_mut()) {
            obj.insert("description".into(), d.clone());
        }
        out.push(tool);
    }
    Ok(Value::Array(out))
}

fn translate_tool_choice(v: &Value) -> Option<Value> {
    match v {
        Value::String(s) => match s.as_str() {
            "auto" => Some(json!({"type": "auto"})),
            "required" => Some(json!({"type": "any"})),
            "none" => Some(json!({"type": "none"})),
            _ => None,
        },
        Value::Object(o) => {
            let name = o.get("function").and_then(|f| f.get("name"))?;
            Some(json!({"type": "tool", "name": name}))
        }
        _ => None,
    }
}
