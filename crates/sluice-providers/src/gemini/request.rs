//! Chat-completions request → Gemini `generateContent` request: system messages to
//! `systemInstruction`, turns to `contents` of `parts` (text, images, function calls and
//! their responses), tools to `functionDeclarations`, sampling to `generationConfig`.

use serde_json::{Map, Value, json};
use sluice_core::{ChatRequest, ErrorKind, GatewayError};

/// OpenAI fields with no `generateContent` equivalent, dropped rather than sent to fail
/// (Google's API refuses a field it does not know).
const DROPPED: &[&str] = &[
    "model",
    "messages",
    "stream",
    "stream_options",
    "max_tokens",
    "max_completion_tokens",
    "logit_bias",
    "logprobs",
    "top_logprobs",
    "parallel_tool_calls",
    "store",
    "metadata",
    "modalities",
    "prediction",
    "audio",
    "service_tier",
    "user",
    "prompt_cache_key",
    "safety_identifier",
];

/// `generateContent` fields a client may send as they are (Gemini's own options).
const NATIVE: &[&str] = &["safetySettings", "cachedContent", "labels"];

/// Where a tool call carries the signature Gemini gave its function call (the form Google's
/// own OpenAI-compatible endpoint uses), sent back with the call on the next turn.
pub(crate) const SIGNATURE: &str = "/extra_content/google/thought_signature";

fn bad(param: String, message: String) -> GatewayError {
    GatewayError::new(ErrorKind::InvalidRequest, message).with_param(param)
}

/// Translates `req`. Fields Gemini understands are mapped, OpenAI-only ones dropped, Gemini's
/// own (`safetySettings`, `cachedContent`, `labels`, a `generationConfig` of its own) kept;
/// any other field is refused, named.
pub fn translate_request(req: &ChatRequest) -> Result<Value, GatewayError> {
    let body = req.to_map();
    let mut out = Map::new();
    let (system, contents) = translate_messages(&body)?;
    if !system.is_empty() {
        out.insert("systemInstruction".into(), json!({ "parts": system }));
    }
    out.insert("contents".into(), Value::Array(contents));
    let mut config = match body.get("generationConfig") {
        Some(Value::Object(c)) => c.clone(),
        Some(_) => {
            return Err(bad(
                "generationConfig".into(),
                "generationConfig must be an object".into(),
            ));
        }
        None => Map::new(),
    };
    if let Some(max) = req.max_tokens() {
        config.insert("maxOutputTokens".into(), Value::from(max));
    }
    for (k, v) in &body {
        let k = k.as_str();
        if v.is_null() {
            // An unset option, as some clients write it.
            continue;
        }
        match k {
            "tools" => {
                out.insert("tools".into(), translate_tools(v)?);
            }
            "tool_choice" => {
                out.insert("toolConfig".into(), translate_tool_choice(v)?);
            }
            "response_format" => response_format(v, &mut config)?,
            "reasoning_effort" => {
                config.insert("thinkingConfig".into(), thinking(v)?);
            }
            "generationConfig" => {}
            _ if DROPPED.contains(&k) => {}
            _ if NATIVE.contains(&k) => {
                out.insert(k.into(), v.clone());
            }
            _ => {
                if let Some((name, value)) = sampling(k, v)? {
                    config.insert(name.into(), value);
                } else {
                    return Err(bad(
                        k.into(),
                        format!("`{k}` has no equivalent in Gemini's generateContent"),
                    ));
                }
            }
        }
    }
    if !config.is_empty() {
        out.insert("generationConfig".into(), Value::Object(config));
    }
    Ok(Value::Object(out))
}

/// A sampling field as `generationConfig` names it, if it is one.
fn sampling(k: &str, v: &Value) -> Result<Option<(&'static str, Value)>, GatewayError> {
    let name = match k {
        "temperature" => "temperature",
        "top_p" => "topP",
        "top_k" => "topK",
        "n" => "candidateCount",
        "seed" => "seed",
        "presence_penalty" => "presencePenalty",
        "frequency_penalty" => "frequencyPenalty",
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
            return Ok(Some(("stopSequences", Value::Array(seqs))));
        }
        _ => return Ok(None),
    };
    Ok(Some((name, v.clone())))
}

/// `reasoning_effort` as a thinking budget, in tokens (the budgets Google gives the efforts
/// in its own OpenAI-compatible API).
fn thinking(v: &Value) -> Result<Value, GatewayError> {
    let budget = match v.as_str() {
        Some("none" | "minimal") => 0,
        Some("low") => 1024,
        Some("medium") => 8192,
        Some("high") => 24_576,
        _ => {
            return Err(bad(
                "reasoning_effort".into(),
                "reasoning_effort must be none, minimal, low, medium or high".into(),
            ));
        }
    };
    Ok(json!({ "thinkingBudget": budget }))
}

/// `response_format` as `responseMimeType` and `responseJsonSchema`.
fn response_format(v: &Value, config: &mut Map<String, Value>) -> Result<(), GatewayError> {
    match v.get("type").and_then(Value::as_str) {
        Some("text") | None => {}
        Some("json_object") => {
            config.insert("responseMimeType".into(), Value::from("application/json"));
        }
        Some("json_schema") => {
            let schema = v.pointer("/json_schema/schema").ok_or_else(|| {
                bad(
                    "response_format.json_schema.schema".into(),
                    "a json_schema response format needs its schema".into(),
                )
            })?;
            config.insert("responseMimeType".into(), Value::from("application/json"));
            config.insert("responseJsonSchema".into(), schema.clone());
        }
        Some(other) => {
            return Err(bad(
                "response_format.type".into(),
                format!("response format `{other}` cannot be sent to a Gemini upstream"),
            ));
        }
    }
    Ok(())
}

/// System messages as `systemInstruction` parts; the rest as alternating `user` and `model`
/// turns (consecutive turns of one role merged).
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
        let (turn, parts) = match role {
            "system" | "developer" => {
                system.extend(parts_of(content, i)?);
                continue;
            }
            "user" => ("user", parts_of(content, i)?),
            "assistant" => ("model", model_parts(m, content, i)?),
            "tool" | "function" => ("user", vec![function_response(msgs, m, content, i)?]),
            other => {
                return Err(bad(
                    format!("messages[{i}].role"),
                    format!("role `{other}` cannot be sent to a Gemini upstream"),
                ));
            }
        };
        if parts.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((r, p)) if *r == turn => p.extend(parts),
            _ => turns.push((turn, parts)),
        }
    }
    let contents = turns
        .into_iter()
        .map(|(role, parts)| json!({ "role": role, "parts": parts }))
        .collect();
    Ok((system, contents))
}

fn parts_of(content: &Value, i: usize) -> Result<Vec<Value>, GatewayError> {
    match content {
        Value::Null => Ok(Vec::new()),
        Value::String(s) if s.is_empty() => Ok(Vec::new()),
        Value::String(s) => Ok(vec![json!({ "text": s })]),
        Value::Array(parts) => parts
            .iter()
            .enumerate()
            .map(|(j, p)| part(p, i, j))
            .collect(),
        _ => Err(bad(
            format!("messages[{i}].content"),
            "content must be a string or an array of parts".into(),
        )),
    }
}

fn part(p: &Value, i: usize, j: usize) -> Result<Value, GatewayError> {
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
                    "image_url must be a base64 data URL, or an http(s) or gs:// URL ending in \
                     .png, .jpg, .jpeg, .webp, .gif or .pdf"
                        .into(),
                )
            })
        }
        other => Err(bad(
            format!("messages[{i}].content[{j}].type"),
            format!("content part type `{other}` cannot be sent to a Gemini upstream"),
        )),
    }
}

/// An image as `inlineData` (a data URL) or `fileData` (a URL whose type its extension says:
/// Gemini wants the type named).
fn image(url: &str) -> Option<Value> {
    if let Some(rest) = url.strip_prefix("data:") {
        let (meta, data) = rest.split_once(',')?;
        let mime = meta.strip_suffix(";base64")?;
        return Some(json!({ "inlineData": { "mimeType": mime, "data": data } }));
    }
    if !["http://", "https://", "gs://"]
        .iter()
        .any(|s| url.starts_with(s))
    {
        return None;
    }
    let path = url.split(['?', '#']).next().unwrap_or(url);
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase())?;
    let mime = match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "webp" => "image/webp",
        "gif" => "image/gif",
        "pdf" => "application/pdf",
        _ => return None,
    };
    Some(json!({ "fileData": { "mimeType": mime, "fileUri": url } }))
}

/// An assistant turn: its text, then a `functionCall` part for each tool call (with the
/// signature Gemini gave it, when the client kept it).
fn model_parts(m: &Value, content: &Value, i: usize) -> Result<Vec<Value>, GatewayError> {
    let mut parts = parts_of(content, i)?;
    let calls = m.get("tool_calls").and_then(Value::as_array);
    for (j, call) in calls.into_iter().flatten().enumerate() {
        let f = call.get("function").unwrap_or(&Value::Null);
        let name = f.get("name").and_then(Value::as_str).ok_or_else(|| {
            bad(
                format!("messages[{i}].tool_calls[{j}].function.name"),
                "a tool call needs its function's name".into(),
            )
        })?;
        let args = f.get("arguments").and_then(Value::as_str).unwrap_or("{}");
        let args: Value = if args.trim().is_empty() {
            json!({})
        } else {
            serde_json::from_str(args).map_err(|e| {
                bad(
                    format!("messages[{i}].tool_calls[{j}].function.arguments"),
                    format!("tool call arguments are not valid JSON: {e}"),
                )
            })?
        };
        let mut part = json!({ "functionCall": { "name": name, "args": args } });
        if let (Some(sig), Some(obj)) = (call.pointer(SIGNATURE), part.as_object_mut()) {
            obj.insert("thoughtSignature".into(), sig.clone());
        }
        parts.push(part);
    }
    Ok(parts)
}

/// A tool message as a `functionResponse` part: Gemini names the function, not the call, so
/// the name is found in the assistant turn that made the call.
fn function_response(
    msgs: &[Value],
    m: &Value,
    content: &Value,
    i: usize,
) -> Result<Value, GatewayError> {
    let missing = || {
        bad(
            format!("messages[{i}].tool_call_id"),
            "a tool message needs the tool_call_id of an earlier assistant tool call".into(),
        )
    };
    let id = m
        .get("tool_call_id")
        .and_then(Value::as_str)
        .ok_or_else(missing)?;
    let name = msgs[..i]
        .iter()
        .rev()
        .filter_map(|earlier| earlier.get("tool_calls").and_then(Value::as_array))
        .flatten()
        .find(|c| c.get("id").and_then(Value::as_str) == Some(id))
        .and_then(|c| c.pointer("/function/name"))
        .cloned()
        .ok_or_else(missing)?;
    let text = match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    };
    // Gemini wants an object: a JSON object answer as it is, anything else under `content`.
    let response = match serde_json::from_str::<Value>(&text) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({ "content": text }),
    };
    Ok(json!({ "functionResponse": { "name": name, "response": response } }))
}

fn translate_tools(v: &Value) -> Result<Value, GatewayError> {
    let Some(tools) = v.as_array() else {
        return Err(bad("tools".into(), "tools must be an array".into()));
    };
    let mut declarations = Vec::with_capacity(tools.len());
    let mut native = Vec::new();
    for (i, t) in tools.iter().enumerate() {
        let Some(f) = t.get("function") else {
            // Gemini's own tools (`googleSearch`, `codeExecution`) pass through.
            native.push(t.clone());
            continue;
        };
        let name = f.get("name").cloned().ok_or_else(|| {
            bad(
                format!("tools[{i}].function.name"),
                "a tool needs a name".into(),
            )
        })?;
        let mut d = Map::new();
        d.insert("name".into(), name);
        if let Some(desc) = f.get("description") {
            d.insert("description".into(), desc.clone());
        }
        if let Some(p) = f.get("parameters") {
            // JSON Schema as written (`parameters` takes only OpenAPI's subset).
            d.insert("parametersJsonSchema".into(), p.clone());
        }
        declarations.push(Value::Object(d));
    }
    let mut out = Vec::new();
    if !declarations.is_empty() {
        out.push(json!({ "functionDeclarations": declarations }));
    }
    out.extend(native);
    Ok(Value::Array(out))
}

fn translate_tool_choice(v: &Value) -> Result<Value, GatewayError> {
    let config = match v {
        Value::String(s) => match s.as_str() {
            "auto" => json!({ "mode": "AUTO" }),
            "required" => json!({ "mode": "ANY" }),
            "none" => json!({ "mode": "NONE" }),
            other => {
                return Err(bad(
                    "tool_choice".into(),
                    format!("tool_choice `{other}` is not auto, required or none"),
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
            json!({ "mode": "ANY", "allowedFunctionNames": [name] })
        }
        _ => {
            return Err(bad(
                "tool_choice".into(),
                "tool_choice must be a string or an object".into(),
            ));
        }
    };
    Ok(json!({ "functionCallingConfig": config }))
}
