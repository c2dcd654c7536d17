//! A `generateContent` request read into the internal form: `systemInstruction` as a system
//! message, `contents` as turns (a `model` turn's `functionCall` parts as tool calls, a
//! `user` turn's `functionResponse` parts as tool messages answering them), `tools` and
//! `toolConfig` as chat tools, `generationConfig` as sampling fields. Gemini's own options
//! that have no chat field (`safetySettings`, `cachedContent`, `labels`, the rest of
//! `generationConfig`) are kept for a Gemini upstream, which takes them as they came.

use serde_json::{Map, Value, json};
use sluice_core::GatewayError;

use crate::json::bad;

/// Top-level fields kept as they came for a Gemini upstream.
const KEPT: &[&str] = &["safetySettings", "cachedContent", "labels"];

/// Translates `body` (a `generateContent` request) for `model`, streamed or not.
pub fn translate(
    mut body: Map<String, Value>,
    model: &str,
    stream: bool,
) -> Result<Map<String, Value>, GatewayError> {
    let mut out = Map::new();
    out.insert("model".into(), Value::from(model));
    let mut messages = Vec::new();
    if let Some(system) = body.remove("systemInstruction") {
        let text = texts(&system, "systemInstruction")?;
        if !text.is_empty() {
            messages.push(json!({"role": "system", "content": text}));
        }
    }
    let contents = body.remove("contents").ok_or_else(|| {
        bad(
            "contents",
            "a generateContent request needs `contents`, a list of turns",
        )
    })?;
    turns(&contents, &mut messages)?;
    out.insert("messages".into(), Value::Array(messages));
    if stream {
        out.insert("stream".into(), Value::Bool(true));
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if let Some(config) = body.remove("generationConfig") {
        generation(config, &mut out)?;
    }
    if let Some(tools) = body.remove("tools") {
        out.insert("tools".into(), chat_tools(&tools)?);
    }
    if let Some(config) = body.remove("toolConfig")
        && let Some(choice) = tool_choice(&config)?
    {
        out.insert("tool_choice".into(), choice);
    }
    for (k, v) in body {
        if !KEPT.contains(&k.as_str()) {
            return Err(bad(
                k.as_str(),
                format!("`{k}` is not a field of a generateContent request sluice reads"),
            ));
        }
        out.insert(k, v);
    }
    Ok(out)
}

/// The text of a content's parts (a system instruction is text only).
fn texts(content: &Value, at: &str) -> Result<String, GatewayError> {
    let parts = content
        .get("parts")
        .and_then(Value::as_array)
        .ok_or_else(|| bad(format!("{at}.parts"), "must be a list of parts"))?;
    let mut out = String::new();
    for (j, p) in parts.iter().enumerate() {
        match p.get("text").and_then(Value::as_str) {
            Some(t) => out.push_str(t),
            None => {
                return Err(bad(
                    format!("{at}.parts[{j}]"),
                    "a system instruction's parts must be text",
                ));
            }
        }
    }
    Ok(out)
}

/// The id a model turn's `j`th function call is known by: its own, else one made from where
/// it stands (so that the response that answers it, by name, finds the same).
fn call_id(call: &Value, turn: usize, j: usize) -> String {
    call.get("id")
        .and_then(Value::as_str)
        .map_or_else(|| format!("call_{turn}_{j}"), str::to_string)
}

/// `contents` as chat messages.
fn turns(contents: &Value, out: &mut Vec<Value>) -> Result<(), GatewayError> {
    let turns = contents
        .as_array()
        .ok_or_else(|| bad("contents", "must be a list of turns"))?;
    // The calls of the last model turn not yet answered: (id, name).
    let mut open: Vec<(String, String)> = Vec::new();
    for (i, turn) in turns.iter().enumerate() {
        let at = format!("contents[{i}]");
        let parts = turn
            .get("parts")
            .and_then(Value::as_array)
            .ok_or_else(|| bad(format!("{at}.parts"), "must be a list of parts"))?;
        match turn.get("role").and_then(Value::as_str).unwrap_or("user") {
            "model" => {
                let (message, calls) = model_turn(parts, i)?;
                open = calls;
                out.push(message);
            }
            "user" | "function" => user_turn(parts, &at, &mut open, out)?,
            other => {
                return Err(bad(
                    format!("{at}.role"),
                    format!("role `{other}` is neither `user` nor `model`"),
                ));
            }
        }
    }
    Ok(())
}

/// A model turn as an assistant message, and the calls it made.
fn model_turn(parts: &[Value], i: usize) -> Result<(Value, Vec<(String, String)>), GatewayError> {
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut made = Vec::new();
    for (j, p) in parts.iter().enumerate() {
        if let Some(f) = p.get("functionCall") {
            let name = f.get("name").and_then(Value::as_str).ok_or_else(|| {
                bad(
                    format!("contents[{i}].parts[{j}].functionCall.name"),
                    "a function call names its function",
                )
            })?;
            let id = call_id(f, i, made.len());
            let args = f.get("args").cloned().unwrap_or_else(|| json!({}));
            let mut call = json!({"id": id, "type": "function",
                "function": {"name": name, "arguments": args.to_string()}});
            if let Some(sig) = p.get("thoughtSignature") {
                call["extra_content"] = json!({"google": {"thought_signature": sig}});
            }
            calls.push(call);
            made.push((id, name.to_string()));
        } else if p.get("thought").and_then(Value::as_bool) == Some(true) {
            // The model's own thoughts are not sent back.
        } else if let Some(t) = p.get("text").and_then(Value::as_str) {
            text.push_str(t);
        } else {
            return Err(bad(
                format!("contents[{i}].parts[{j}]"),
                "a model turn's part must be text or a function call",
            ));
        }
    }
    let mut message = json!({"role": "assistant", "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { Value::from(text) }});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    Ok((message, made))
}

/// A user turn: a tool message for each function response (first, answering the calls of
/// the model turn before), then a user message of its other parts.
fn user_turn(
    parts: &[Value],
    at: &str,
    open: &mut Vec<(String, String)>,
    out: &mut Vec<Value>,
) -> Result<(), GatewayError> {
    let mut content = Vec::new();
    for (j, p) in parts.iter().enumerate() {
        let here = format!("{at}.parts[{j}]");
        if let Some(r) = p.get("functionResponse") {
            let name = r.get("name").and_then(Value::as_str).unwrap_or_default();
            let by_id = r.get("id").and_then(Value::as_str);
            let k = open
                .iter()
                .position(|(id, n)| by_id.map_or(n == name, |want| id == want))
                .ok_or_else(|| {
                    bad(
                        format!("{here}.functionResponse"),
                        format!("answers no function call `{name}` of the model turn before it"),
                    )
                })?;
            let (id, _) = open.remove(k);
            let response = r.get("response").cloned().unwrap_or_else(|| json!({}));
            out.push(json!({"role": "tool", "tool_call_id": id, "content": response.to_string()}));
        } else if let Some(t) = p.get("text").and_then(Value::as_str) {
            content.push(json!({"type": "text", "text": t}));
        } else if let Some(url) = media(p, &here)? {
            content.push(json!({"type": "image_url", "image_url": {"url": url}}));
        } else {
            return Err(bad(
                here,
                "a user turn's part must be text, an image or a function response",
            ));
        }
    }
    if !content.is_empty() {
        let content = match content.as_slice() {
            [one] if one.get("type") == Some(&Value::from("text")) => one["text"].clone(),
            _ => Value::Array(content),
        };
        out.push(json!({"role": "user", "content": content}));
    }
    Ok(())
}

/// An image part (`inlineData` or `fileData`) as an image URL; `None` when it is neither.
fn media(p: &Value, at: &str) -> Result<Option<String>, GatewayError> {
    let (field, data) = match (p.get("inlineData"), p.get("fileData")) {
        (Some(d), _) => ("inlineData", d),
        (None, Some(d)) => ("fileData", d),
        (None, None) => return Ok(None),
    };
    let mime = data.get("mimeType").and_then(Value::as_str).unwrap_or("");
    if !mime.starts_with("image/") {
        return Err(bad(
            format!("{at}.{field}.mimeType"),
            format!("`{mime}` is not an image type: only images are read"),
        ));
    }
    let url = match field {
        "inlineData" => data
            .get("data")
            .and_then(Value::as_str)
            .map(|d| format!("data:{mime};base64,{d}")),
        _ => data
            .get("fileUri")
            .and_then(Value::as_str)
            .map(str::to_string),
    };
    url.map(Some).ok_or_else(|| {
        bad(
            format!("{at}.{field}"),
            "an image part needs its data or URI",
        )
    })
}

/// `generationConfig`'s sampling fields as chat fields; the rest kept as Gemini's own.
fn generation(config: Value, out: &mut Map<String, Value>) -> Result<(), GatewayError> {
    let Value::Object(config) = config else {
        return Err(bad("generationConfig", "must be an object"));
    };
    let mut kept = Map::new();
    let mut mime = None;
    let mut schema = None;
    for (k, v) in config {
        let chat = match k.as_str() {
            "temperature" => "temperature",
            "topP" => "top_p",
            "topK" => "top_k",
            "candidateCount" => "n",
            "maxOutputTokens" => "max_tokens",
            "stopSequences" => "stop",
            "seed" => "seed",
            "presencePenalty" => "presence_penalty",
            "frequencyPenalty" => "frequency_penalty",
            "responseMimeType" => {
                mime = v.as_str().map(str::to_string);
                continue;
            }
            "responseJsonSchema" => {
                schema = Some(v);
                continue;
            }
            "responseSchema" => {
                schema = Some(lowered(v));
                continue;
            }
            _ => {
                kept.insert(k, v);
                continue;
            }
        };
        out.insert(chat.into(), v);
    }
    match (mime.as_deref(), schema) {
        (Some("application/json"), Some(schema)) => {
            out.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": {"name": "response", "schema": schema}}),
            );
        }
        (Some("application/json"), None) => {
            out.insert("response_format".into(), json!({"type": "json_object"}));
        }
        (Some("text/plain") | None, None) => {}
        (other, _) => {
            return Err(bad(
                "generationConfig.responseMimeType",
                format!(
                    "`{}` with a schema: a schema needs application/json",
                    other.unwrap_or("text/plain")
                ),
            ));
        }
    }
    if !kept.is_empty() {
        out.insert("generationConfig".into(), Value::Object(kept));
    }
    Ok(())
}

/// An OpenAPI schema as Gemini writes it (`"type": "OBJECT"`) as JSON Schema (`"object"`).
fn lowered(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| match (k.as_str(), v) {
                    ("type", Value::String(t)) => (k, Value::from(t.to_ascii_lowercase())),
                    (_, v) => (k, lowered(v)),
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(lowered).collect()),
        other => other,
    }
}

/// Gemini's tools as chat tools: each function declaration a function.
fn chat_tools(tools: &Value) -> Result<Value, GatewayError> {
    let tools = tools
        .as_array()
        .ok_or_else(|| bad("tools", "must be a list of tools"))?;
    let mut out = Vec::new();
    for (i, t) in tools.iter().enumerate() {
        let Some(decls) = t.get("functionDeclarations").and_then(Value::as_array) else {
            // Google's own tools (`googleSearch`, `codeExecution`): kept for a Gemini
            // upstream, which takes them as they came.
            out.push(t.clone());
            continue;
        };
        for (j, d) in decls.iter().enumerate() {
            let name = d.get("name").and_then(Value::as_str).ok_or_else(|| {
                bad(
                    format!("tools[{i}].functionDeclarations[{j}].name"),
                    "a function declaration needs a name",
                )
            })?;
            let parameters = d
                .get("parametersJsonSchema")
                .cloned()
                .or_else(|| d.get("parameters").cloned().map(lowered))
                .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
            let mut f = json!({"name": name, "parameters": parameters});
            if let Some(desc) = d.get("description") {
                f["description"] = desc.clone();
            }
            out.push(json!({"type": "function", "function": f}));
        }
    }
    Ok(Value::Array(out))
}

/// `toolConfig.functionCallingConfig` as `tool_choice`.
fn tool_choice(config: &Value) -> Result<Option<Value>, GatewayError> {
    let Some(f) = config.get("functionCallingConfig") else {
        return Ok(None);
    };
    let allowed = f
        .get("allowedFunctionNames")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    Ok(Some(
        match (f.get("mode").and_then(Value::as_str), allowed) {
            (None | Some("AUTO" | "MODE_UNSPECIFIED"), _) => json!("auto"),
            (Some("NONE"), _) => json!("none"),
            (Some("ANY" | "VALIDATED"), [one]) => {
                json!({"type": "function", "function": {"name": one}})
            }
            (Some("ANY" | "VALIDATED"), _) => json!("required"),
            (Some(other), _) => {
                return Err(bad(
                    "toolConfig.functionCallingConfig.mode",
                    format!("`{other}` is not AUTO, ANY or NONE"),
                ));
            }
        },
    ))
}
