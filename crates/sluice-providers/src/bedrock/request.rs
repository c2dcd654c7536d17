//! Chat-completions request → Bedrock Converse request: system messages to `system`, turns
//! to `messages` of content blocks (text, images, `toolUse`, `toolResult`), tools to
//! `toolConfig`, sampling to `inferenceConfig`.

use serde_json::{Map, Value, json};
use sluice_core::{ChatRequest, ErrorKind, GatewayError};

/// OpenAI fields with no Converse equivalent that change nothing of the answer's meaning,
/// dropped rather than sent to fail.
const DROPPED: &[&str] = &[
    "model",
    "messages",
    "stream",
    "stream_options",
    "max_tokens",
    "max_completion_tokens",
    "logprobs",
    "top_logprobs",
    "parallel_tool_calls",
    "store",
    "metadata",
    "user",
    "service_tier",
    "prompt_cache_key",
    "safety_identifier",
];

fn bad(param: String, message: String) -> GatewayError {
    GatewayError::new(ErrorKind::InvalidRequest, message).with_param(param)
}

/// Translates `req`. Fields Converse understands are mapped; a field that would change the
/// answer and has no equivalent (`n`, `response_format`, `logit_bias`, ...) is refused, named.
pub fn translate_request(req: &ChatRequest) -> Result<Value, GatewayError> {
    let body = req.to_map();
    let mut out = Map::new();
    let (system, messages) = translate_messages(&body)?;
    if !system.is_empty() {
        out.insert("system".into(), Value::Array(system));
    }
    out.insert("messages".into(), Value::Array(messages));
    let mut inference = Map::new();
    if let Some(max) = req.max_tokens() {
        inference.insert("maxTokens".into(), Value::from(max));
    }
    let mut tools = None;
    let mut choice = None;
    for (k, v) in &body {
        let k = k.as_str();
        if v.is_null() {
            continue;
        }
        match k {
            "temperature" => {
                inference.insert("temperature".into(), v.clone());
            }
            "top_p" => {
                inference.insert("topP".into(), v.clone());
            }
            "stop" => {
                let seqs = match v {
                    Value::String(s) => vec![Value::from(s.as_str())],
                    Value::Array(a) => a.clone(),
                    _ => {
                        return Err(bad(
                            "stop".into(),
                            "stop must be a string or an array".into(),
                        ));
                    }
                };
                inference.insert("stopSequences".into(), Value::Array(seqs));
            }
            "top_k" => {
                out.insert("additionalModelRequestFields".into(), json!({ "top_k": v }));
            }
            "tools" => tools = Some(translate_tools(v)?),
            "tool_choice" => choice = translate_tool_choice(v)?,
            _ if DROPPED.contains(&k) => {}
            _ => {
                return Err(bad(
                    k.into(),
                    format!("`{k}` has no equivalent in Bedrock's Converse API"),
                ));
            }
        }
    }
    if !inference.is_empty() {
        out.insert("inferenceConfig".into(), Value::Object(inference));
    }
    if let Some(tools) = tools {
        let mut config = json!({ "tools": tools });
        if let Some(c) = choice {
            config["toolChoice"] = c;
        }
        out.insert("toolConfig".into(), config);
    }
    Ok(Value::Object(out))
}

/// System messages as `system` blocks; the rest as alternating `user` and `assistant` turns.
fn translate_messages(body: &Map<String, Value>) -> Result<(Vec<Value>, Vec<Value>), GatewayError> {
    let empty = Vec::new();
    let msgs = body
        .get("messages")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let mut system = Vec::new();
    let mut turns: Vec<(&str, Vec<Value>)> = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
        let content = m.get("content").unwrap_or(&Value::Null);
        let (turn, blocks) = match role {
            "system" | "developer" => {
                system.extend(blocks_of(content, i)?);
                continue;
            }
            "user" => ("user", blocks_of(content, i)?),
            "assistant" => ("assistant", assistant_blocks(m, content, i)?),
            "tool" | "function" => ("user", vec![tool_result(m, content, i)?]),
            other => {
                return Err(bad(
                    format!("messages[{i}].role"),
                    format!("role `{other}` cannot be sent to a Bedrock upstream"),
                ));
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((r, b)) if *r == turn => b.extend(blocks),
            _ => turns.push((turn, blocks)),
        }
    }
    let messages = turns
        .into_iter()
        .map(|(role, content)| json!({ "role": role, "content": content }))
        .collect();
    Ok((system, messages))
}

fn blocks_of(content: &Value, i: usize) -> Result<Vec<Value>, GatewayError> {
    match content {
        Value::Null => Ok(Vec::new()),
        Value::String(s) if s.is_empty() => Ok(Vec::new()),
        Value::String(s) => Ok(vec![json!({ "text": s })]),
        Value::Array(parts) => parts
            .iter()
            .enumerate()
            .map(|(j, p)| block(p, i, j))
            .collect(),
        _ => Err(bad(
            format!("messages[{i}].content"),
            "content must be a string or an array of parts".into(),
        )),
    }
}

fn block(p: &Value, i: usize, j: usize) -> Result<Value, GatewayError> {
    match p.get("type").and_then(Value::as_str).unwrap_or_default() {
        "text" => Ok(json!({ "text": p.get("text").cloned().unwrap_or(Value::from("")) })),
        "image_url" => {
            let url = p
                .get("image_url")
                .and_then(|u| u.get("url").or(Some(u)))
                .and_then(Value::as_str)
                .unwrap_or_default();
            image(url).ok_or_else(|| {
                bad(
                    format!("messages[{i}].content[{j}].image_url"),
                    "Bedrock takes images as base64 data URLs of png, jpeg, gif or webp".into(),
                )
            })
        }
        other => Err(bad(
            format!("messages[{i}].content[{j}].type"),
            format!("content part type `{other}` cannot be sent to a Bedrock upstream"),
        )),
    }
}

/// A data URL as an `image` block (Converse takes the bytes, base64 in JSON).
fn image(url: &str) -> Option<Value> {
    let (meta, data) = url.strip_prefix("data:")?.split_once(',')?;
    let format = match meta.strip_suffix(";base64")? {
        "image/png" => "png",
        "image/jpeg" | "image/jpg" => "jpeg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        _ => return None,
    };
    Some(json!({ "image": { "format": format, "source": { "bytes": data } } }))
}

fn assistant_blocks(m: &Value, content: &Value, i: usize) -> Result<Vec<Value>, GatewayError> {
    let mut blocks = blocks_of(content, i)?;
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
        blocks.push(json!({ "toolUse": {
            "toolUseId": call.get("id").cloned().unwrap_or(Value::from(format!("call_{i}_{j}"))),
            "name": f.get("name").cloned().unwrap_or(Value::from("")),
            "input": input,
        }}));
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
        Value::String(s) => vec![json!({ "text": s })],
        other => blocks_of(other, i)?,
    };
    Ok(json!({ "toolResult": { "toolUseId": id, "content": content } }))
}

fn translate_tools(v: &Value) -> Result<Value, GatewayError> {
    let Some(tools) = v.as_array() else {
        return Err(bad("tools".into(), "tools must be an array".into()));
    };
    let mut out = Vec::with_capacity(tools.len());
    for (i, t) in tools.iter().enumerate() {
        let f = t.get("function").ok_or_else(|| {
            bad(
                format!("tools[{i}]"),
                "only function tools can be sent to a Bedrock upstream".into(),
            )
        })?;
        let name = f.get("name").cloned().ok_or_else(|| {
            bad(
                format!("tools[{i}].function.name"),
                "a tool needs a name".into(),
            )
        })?;
        let mut spec = json!({
            "name": name,
            "inputSchema": { "json": f.get("parameters").cloned().unwrap_or(json!({"type": "object"})) },
        });
        if let Some(d) = f.get("description") {
            spec["description"] = d.clone();
        }
        out.push(json!({ "toolSpec": spec }));
    }
    Ok(Value::Array(out))
}

fn translate_tool_choice(v: &Value) -> Result<Option<Value>, GatewayError> {
    Ok(Some(match v {
        Value::String(s) => match s.as_str() {
            "auto" => json!({ "auto": {} }),
            "required" => json!({ "any": {} }),
            other => {
                return Err(bad(
                    "tool_choice".into(),
                    format!(
                        "tool_choice `{other}` cannot be sent to Bedrock (auto, required or a function)"
                    ),
                ));
            }
        },
        Value::Object(o) => {
            let name = o
                .get("function")
                .and_then(|f| f.get("name"))
                .ok_or_else(|| {
                    bad(
                        "tool_choice.function.name".into(),
                        "a tool choice names its function".into(),
                    )
                })?;
            json!({ "tool": { "name": name } })
        }
        _ => {
            return Err(bad(
                "tool_choice".into(),
                "tool_choice must be a string or an object".into(),
            ));
        }
    }))
}
