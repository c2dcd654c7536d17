//! A Responses request (the stateless subset) checked and written as a chat-completions
//! request: `instructions` to a system message, input items to messages, function calls
//! and their outputs to tool calls and tool messages, `text.format` to `response_format`.

use serde_json::{Map, Value, json};
use sluice_core::GatewayError;

use crate::json::{bad, read_object, write};

/// Fields that need state sluice does not keep: refused, naming the field, when set.
const STATEFUL: &[&str] = &["previous_response_id", "conversation", "prompt"];

/// Fields with no chat-completions meaning: checked where they matter, then left out.
const NOT_TRANSLATED: &[&str] = &[
    "include",
    "truncation",
    "reasoning",
    "metadata",
    "stream_options",
    "max_tool_calls",
    "top_logprobs",
    "background",
    "store",
];

/// Reads a Responses request body and writes it as a chat-completions body.
pub fn to_chat(raw: &[u8]) -> Result<Vec<u8>, GatewayError> {
    write(&Value::Object(translate(&read_object(raw)?)?))
}

fn translate(body: &Map<String, Value>) -> Result<Map<String, Value>, GatewayError> {
    for field in STATEFUL {
        if body.get(*field).is_some_and(|v| !v.is_null()) {
            return Err(stateless(field));
        }
    }
    for field in ["store", "background"] {
        if body.get(field).and_then(Value::as_bool) == Some(true) {
            return Err(stateless(field));
        }
    }
    let mut out = Map::new();
    match body.get("model") {
        Some(Value::String(m)) if !m.is_empty() => {
            out.insert("model".into(), Value::from(m.as_str()));
        }
        None => return Err(bad("model", "`model` is required")),
        Some(_) => return Err(bad("model", "`model` must be a non-empty string")),
    }
    let mut messages = Vec::new();
    match body.get("instructions") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => messages.push(json!({"role": "system", "content": s})),
        Some(_) => return Err(bad("instructions", "`instructions` must be a string")),
    }
    match body.get("input") {
        Some(Value::String(s)) => messages.push(json!({"role": "user", "content": s})),
        Some(Value::Array(items)) if !items.is_empty() => items_to_messages(items, &mut messages)?,
        Some(Value::Array(_)) => return Err(bad("input", "`input` must not be empty")),
        None | Some(Value::Null) => return Err(bad("input", "`input` is required")),
        Some(_) => {
            return Err(bad(
                "input",
                "`input` must be a string or an array of items",
            ));
        }
    }
    out.insert("messages".into(), Value::Array(messages));
    let stream = match body.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(bad("stream", "`stream` must be a boolean")),
    };
    if stream {
        out.insert("stream".into(), Value::Bool(true));
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    for (key, value) in body {
        match key.as_str() {
            "model" | "input" | "instructions" | "stream" => {}
            "max_output_tokens" => match value {
                Value::Null => {}
                v if v.as_u64().is_some() => {
                    out.insert("max_tokens".into(), v.clone());
                }
                _ => {
                    return Err(bad(
                        "max_output_tokens",
                        "`max_output_tokens` must be a non-negative integer",
                    ));
                }
            },
            "tools" => {
                out.insert("tools".into(), tools(value)?);
            }
            "tool_choice" => {
                out.insert("tool_choice".into(), tool_choice(value)?);
            }
            "text" => {
                if let Some(format) = response_format(value)? {
                    out.insert("response_format".into(), format);
                }
            }
            k if STATEFUL.contains(&k) || NOT_TRANSLATED.contains(&k) => {}
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    Ok(out)
}

fn stateless(field: &str) -> GatewayError {
    bad(
        field,
        format!(
            "`{field}` is not supported: sluice serves the Responses API without storing \
             responses; send the whole conversation as `input`"
        ),
    )
}

fn items_to_messages(items: &[Value], out: &mut Vec<Value>) -> Result<(), GatewayError> {
    // The ids of function calls made so far: an output must answer one of them.
    let mut calls: Vec<String> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("input[{i}]");
        let Value::Object(obj) = item else {
            return Err(bad(at.clone(), format!("`{at}` must be an object")));
        };
        let kind = match obj.get("type") {
            None => "message",
            Some(Value::String(t)) => t.as_str(),
            Some(_) => {
                return Err(bad(
                    format!("{at}.type"),
                    format!("`{at}.type` must be a string"),
                ));
            }
        };
        match kind {
            "message" => out.push(message(item, &at)?),
            "function_call" => {
                let call_id = field(item, "call_id", &at)?;
                let name = field(item, "name", &at)?;
                let arguments = field(item, "arguments", &at)?;
                calls.push(call_id.to_string());
                let call = json!({"id": call_id, "type": "function",
                    "function": {"name": name, "arguments": arguments}});
                // Consecutive calls (and a call right after the assistant's text) are one
                // assistant message, as chat completions writes them.
                match out.last_mut() {
                    Some(last) if last["role"] == "assistant" => push_call(last, call),
                    _ => out
                        .push(json!({"role": "assistant", "content": null, "tool_calls": [call]})),
                }
            }
            "function_call_output" => {
                let call_id = field(item, "call_id", &at)?;
                if !calls.iter().any(|c| c == call_id) {
                    return Err(bad(
                        format!("{at}.call_id"),
                        format!("`{at}.call_id` `{call_id}` answers no earlier `function_call`"),
                    ));
                }
                let output = text_or_parts(item.get("output"), &format!("{at}.output"))?;
                out.push(json!({"role": "tool", "tool_call_id": call_id, "content": output}));
            }
            // A reasoning model's earlier thoughts: a chat history has no place for them.
            "reasoning" => {}
            "item_reference" => return Err(stateless("input[].item_reference")),
            other => {
                return Err(bad(
                    format!("{at}.type"),
                    format!("`{at}.type` `{other}` is not supported"),
                ));
            }
        }
    }
    Ok(())
}

fn push_call(message: &mut Value, call: Value) {
    if let Some(obj) = message.as_object_mut() {
        match obj.get_mut("tool_calls").and_then(Value::as_array_mut) {
            Some(list) => list.push(call),
            None => {
                obj.insert("tool_calls".into(), Value::Array(vec![call]));
            }
        }
    }
}

fn message(item: &Value, at: &str) -> Result<Value, GatewayError> {
    let role = match item.get("role").and_then(Value::as_str) {
        Some(r @ ("user" | "assistant" | "system" | "developer")) => r,
        Some(other) => {
            return Err(bad(
                format!("{at}.role"),
                format!("`{at}.role` `{other}` is not user, assistant, system or developer"),
            ));
        }
        None => {
            return Err(bad(
                format!("{at}.role"),
                format!("`{at}.role` is required"),
            ));
        }
    };
    let content = text_or_parts(item.get("content"), &format!("{at}.content"))?;
    Ok(json!({"role": role, "content": content}))
}

/// Content given as text or as parts (`at` names where, for a refusal).
fn text_or_parts(v: Option<&Value>, at: &str) -> Result<Value, GatewayError> {
    match v {
        Some(Value::String(s)) => Ok(Value::from(s.as_str())),
        Some(Value::Array(parts)) => parts
            .iter()
            .enumerate()
            .map(|(j, p)| part(p, &format!("{at}[{j}]")))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        _ => Err(bad(at, format!("`{at}` is required (a string or parts)"))),
    }
}

/// One content part: text (input or output), an image by URL, a file by its data.
fn part(p: &Value, at: &str) -> Result<Value, GatewayError> {
    match p.get("type").and_then(Value::as_str) {
        Some("input_text" | "output_text") => {
            Ok(json!({"type": "text", "text": field(p, "text", at)?}))
        }
        Some("refusal") => Ok(json!({"type": "text", "text": field(p, "refusal", at)?})),
        Some("input_image") => {
            let Some(url) = p
                .get("image_url")
                .and_then(Value::as_str)
                .filter(|u| !u.is_empty())
            else {
                return Err(bad(
                    format!("{at}.image_url"),
                    format!("`{at}.image_url` is required (stored files are not supported)"),
                ));
            };
            let mut image = json!({"url": url});
            if let (Some(d), Some(obj)) = (p.get("detail"), image.as_object_mut()) {
                obj.insert("detail".into(), d.clone());
            }
            Ok(json!({"type": "image_url", "image_url": image}))
        }
        Some("input_file") => {
            let data = field(p, "file_data", at)?;
            let name = p.get("filename").and_then(Value::as_str).unwrap_or("file");
            Ok(json!({"type": "file", "file": {"file_data": data, "filename": name}}))
        }
        Some(other) => Err(bad(
            format!("{at}.type"),
            format!("`{at}.type` `{other}` is not supported"),
        )),
        None => Err(bad(
            format!("{at}.type"),
            format!("`{at}.type` is required"),
        )),
    }
}

fn field<'a>(v: &'a Value, name: &str, at: &str) -> Result<&'a str, GatewayError> {
    v.get(name).and_then(Value::as_str).ok_or_else(|| {
        bad(
            format!("{at}.{name}"),
            format!("`{at}.{name}` is required (a string)"),
        )
    })
}

/// Function tools; hosted tools (web search, file search, ...) have no chat form.
fn tools(value: &Value) -> Result<Value, GatewayError> {
    let Some(list) = value.as_array() else {
        return Err(bad("tools", "`tools` must be an array"));
    };
    let mut out = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        let at = format!("tools[{i}]");
        match t.get("type").and_then(Value::as_str) {
            Some("function") => {}
            Some(other) => {
                return Err(bad(
                    format!("{at}.type"),
                    format!("`{at}.type` `{other}` is not supported: only function tools"),
                ));
            }
            None => {
                return Err(bad(
                    format!("{at}.type"),
                    format!("`{at}.type` is required"),
                ));
            }
        }
        let mut function = Map::new();
        function.insert("name".into(), Value::from(field(t, "name", &at)?));
        for key in ["description", "parameters", "strict"] {
            if let Some(v) = t.get(key).filter(|v| !v.is_null()) {
                function.insert(key.into(), v.clone());
            }
        }
        out.push(json!({"type": "function", "function": function}));
    }
    Ok(Value::Array(out))
}

fn tool_choice(value: &Value) -> Result<Value, GatewayError> {
    match value {
        Value::String(s) if matches!(s.as_str(), "auto" | "none" | "required") => Ok(value.clone()),
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("function") => {
            let name = field(value, "name", "tool_choice")?;
            Ok(json!({"type": "function", "function": {"name": name}}))
        }
        _ => Err(bad(
            "tool_choice",
            "`tool_choice` must be auto, none, required or a function",
        )),
    }
}

/// `text.format` as `response_format`: `None` for plain text.
fn response_format(text: &Value) -> Result<Option<Value>, GatewayError> {
    let Some(format) = text.get("format").filter(|f| !f.is_null()) else {
        return Ok(None);
    };
    match format.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(json!({"type": "json_object"}))),
        Some("json_schema") => {
            let mut schema = Map::new();
            schema.insert(
                "name".into(),
                Value::from(field(format, "name", "text.format")?),
            );
            for key in ["schema", "strict", "description"] {
                if let Some(v) = format.get(key) {
                    schema.insert(key.into(), v.clone());
                }
            }
            Ok(Some(json!({"type": "json_schema", "json_schema": schema})))
        }
        _ => Err(bad(
            "text.format.type",
            "`text.format.type` must be text, json_object or json_schema",
        )),
    }
}
