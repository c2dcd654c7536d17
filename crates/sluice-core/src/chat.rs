//! The client's chat-completions request: the few fields sluice reads, and the rest untouched.

use serde_json::{Map, Value};

use crate::{ErrorKind, GatewayError};

/// A validated chat-completions request.
///
/// `body` keeps every field the client sent, in the client's order, so adapters can forward
/// fields sluice does not know (provider-specific options) without touching them.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatRequest {
    /// The model group the client asked for.
    pub model: String,
    /// Whether the client asked for a stream.
    pub stream: bool,
    /// Whether the client asked for a usage chunk at the end of the stream.
    pub include_usage: bool,
    /// The whole body as sent.
    pub body: Map<String, Value>,
}

fn invalid(message: impl Into<String>, param: &'static str) -> GatewayError {
    GatewayError::new(ErrorKind::InvalidRequest, message.into()).with_param(param)
}

impl ChatRequest {
    /// Parses and checks a request body. Errors name the position (bad JSON) or the field.
    pub fn parse(bytes: &[u8]) -> Result<Self, GatewayError> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| {
            GatewayError::new(
                ErrorKind::InvalidJson,
                format!(
                    "request body is not valid JSON: {} at line {} column {}",
                    describe(&e),
                    e.line(),
                    e.column()
                ),
            )
        })?;
        let Value::Object(body) = value else {
            return Err(GatewayError::new(
                ErrorKind::InvalidRequest,
                "request body must be a JSON object",
            ));
        };
        Self::from_body(body)
    }

    /// Checks an already-parsed body.
    pub fn from_body(body: Map<String, Value>) -> Result<Self, GatewayError> {
        let model = match body.get("model") {
            Some(Value::String(m)) if !m.is_empty() => m.clone(),
            Some(Value::String(_)) => return Err(invalid("`model` must not be empty", "model")),
            Some(_) => return Err(invalid("`model` must be a string", "model")),
            None => return Err(invalid("`model` is required", "model")),
        };
        match body.get("messages") {
            Some(Value::Array(msgs)) if !msgs.is_empty() => check_messages(msgs)?,
            Some(Value::Array(_)) => {
                return Err(invalid("`messages` must not be empty", "messages"));
            }
            Some(_) => return Err(invalid("`messages` must be an array", "messages")),
            None => return Err(invalid("`messages` is required", "messages")),
        }
        let stream = match body.get("stream") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(invalid("`stream` must be a boolean", "stream")),
        };
        let include_usage = match body.get("stream_options") {
            None | Some(Value::Null) => false,
            Some(Value::Object(o)) => match o.get("include_usage") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => {
                    return Err(invalid(
                        "`stream_options.include_usage` must be a boolean",
                        "stream_options.include_usage",
                    ));
                }
            },
            Some(_) => {
                return Err(invalid(
                    "`stream_options` must be an object",
                    "stream_options",
                ));
            }
        };
        Ok(Self {
            model,
            stream,
            include_usage,
            body,
        })
    }

    /// About how many tokens a provider's tokens-per-minute limit counts for this request
    /// when it is sent: the prompt (a token per four bytes of message text, the usual rule
    /// of thumb) plus the output it may write (`max_tokens`, else
    /// [`DEFAULT_OUTPUT_ESTIMATE`]), as OpenAI and Anthropic reserve it up front.
    pub fn token_estimate(&self) -> u64 {
        self.prompt_estimate() + self.max_tokens().unwrap_or(DEFAULT_OUTPUT_ESTIMATE)
    }

    /// About how many tokens the prompt is: a token per four bytes of message text.
    pub fn prompt_estimate(&self) -> u64 {
        let text = self.body.get("messages").map_or(0, text_bytes)
            + self.body.get("system").map_or(0, text_bytes);
        (text as u64).div_ceil(4)
    }

    /// Every piece of text the prompt holds (messages, system, tools), one per line: what a
    /// tokenizer counts.
    pub fn prompt_text(&self) -> String {
        let mut out = String::new();
        for key in ["messages", "system", "tools"] {
            if let Some(v) = self.body.get(key) {
                push_text(v, &mut out);
            }
        }
        out
    }

    /// The client's `max_tokens` (or `max_completion_tokens`), if any.
    pub fn max_tokens(&self) -> Option<u64> {
        ["max_completion_tokens", "max_tokens"]
            .iter()
            .find_map(|k| self.body.get(*k).and_then(Value::as_u64))
    }
}

/// Output tokens assumed for a request that sets no `max_tokens`.
pub const DEFAULT_OUTPUT_ESTIMATE: u64 = 256;

/// Appends every string inside `v`, one per line.
fn push_text(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Value::Array(a) => a.iter().for_each(|x| push_text(x, out)),
        Value::Object(o) => o.values().for_each(|x| push_text(x, out)),
        _ => {}
    }
}

/// Bytes of text in every string inside `v`.
fn text_bytes(v: &Value) -> usize {
    match v {
        Value::String(s) => s.len(),
        Value::Array(a) => a.iter().map(text_bytes).sum(),
        Value::Object(o) => o.values().map(text_bytes).sum(),
        _ => 0,
    }
}

fn check_messages(msgs: &[Value]) -> Result<(), GatewayError> {
    for (i, m) in msgs.iter().enumerate() {
        let Some(obj) = m.as_object() else {
            return Err(GatewayError::new(
                ErrorKind::InvalidRequest,
                format!("`messages[{i}]` must be an object"),
            )
            .with_param(format!("messages[{i}]")));
        };
        if !matches!(obj.get("role"), Some(Value::String(_))) {
            return Err(GatewayError::new(
                ErrorKind::InvalidRequest,
                format!("`messages[{i}].role` must be a string"),
            )
            .with_param(format!("messages[{i}].role")));
        }
    }
    Ok(())
}

/// serde_json's message without its trailing position (we add our own).
fn describe(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) => s.get(..i).unwrap_or(&s).to_string(),
        None => s,
    }
}

#[cfg(test)]
mod tests;
