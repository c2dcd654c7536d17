//! The client's chat-completions request: the few fields sluice reads, and the rest untouched.

mod fields;
#[macro_use]
mod text;
mod message;
mod sampling;
mod scan;

use std::sync::Arc;

use bytes::Bytes;
use serde_json::error::Category;
use serde_json::{Map, Value};

pub use fields::Fields;
use message::BadMessage;
use scan::Messages;
use text::Text;

use crate::{ErrorKind, GatewayError};

/// A validated chat-completions request.
///
/// The body is kept as the client sent it, with an index of its top-level fields, so
/// adapters can forward fields sluice does not know (provider-specific options) without
/// reading them: no JSON tree is built of a request on its way through.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatRequest {
    /// The model group the client asked for.
    pub model: String,
    /// Whether the client asked for a stream.
    pub stream: bool,
    /// Whether the client asked for a usage chunk at the end of the stream.
    pub include_usage: bool,
    max_tokens: Option<u64>,
    /// Bytes of text in `messages` and `system`.
    prompt_bytes: usize,
    messages: usize,
    fields: Fields,
    /// The request as the client wrote it in another API, when it did.
    original: Option<Arc<Original>>,
}

/// A request as its client wrote it in another API than chat completions, kept beside its
/// chat form so that an upstream speaking that API is sent it unchanged (and its answer
/// goes back unchanged). Any rewrite of the chat form (normalising, compressing) drops it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Original {
    /// The API it is written in, e.g. [`Original::ANTHROPIC_MESSAGES`].
    pub api: &'static str,
    /// The body as the client sent it.
    pub body: Bytes,
    /// Headers of that API the client sent, to go upstream with it (lower-case names).
    pub headers: Vec<(String, String)>,
}

impl Original {
    /// Anthropic Messages.
    pub const ANTHROPIC_MESSAGES: &'static str = "anthropic-messages";
    /// OpenAI embeddings: not a chat at all; its chat form only carries what admission,
    /// billing and the caches read (the inputs as the prompt, no output).
    pub const OPENAI_EMBEDDINGS: &'static str = "openai-embeddings";
    /// OpenAI Responses.
    pub const OPENAI_RESPONSES: &'static str = "openai-responses";
}

fn invalid(message: impl Into<String>, param: &'static str) -> GatewayError {
    GatewayError::new(ErrorKind::InvalidRequest, message.into()).with_param(param)
}

impl ChatRequest {
    /// Parses and checks a request body. Errors name the position (bad JSON) or the field.
    pub fn parse(bytes: &[u8]) -> Result<Self, GatewayError> {
        Self::from_bytes(Bytes::copy_from_slice(bytes))
    }

    /// [`ChatRequest::parse`] keeping `body` itself rather than a copy.
    pub fn from_bytes(body: Bytes) -> Result<Self, GatewayError> {
        if !crate::budget::within(&body) {
            return Err(GatewayError::new(
                ErrorKind::InvalidRequest,
                crate::budget::refusal("the request body"),
            ));
        }
        let fields = Fields::read(body).map_err(|e| match e.classify() {
            Category::Data => GatewayError::new(
                ErrorKind::InvalidRequest,
                "request body must be a JSON object",
            ),
            _ => GatewayError::new(
                ErrorKind::InvalidJson,
                format!(
                    "request body is not valid JSON: {} at line {} column {}",
                    describe(&e),
                    e.line(),
                    e.column()
                ),
            ),
        })?;
        Self::check(fields)
    }

    /// Checks a body given as a JSON map: it is written out and read as if a client had sent
    /// it (for tests and callers that build requests).
    pub fn from_body(body: Map<String, Value>) -> Result<Self, GatewayError> {
        let text = serde_json::to_vec(&body).map_err(|e| {
            GatewayError::new(ErrorKind::InvalidRequest, format!("body not writable: {e}"))
        })?;
        Self::from_bytes(Bytes::from(text))
    }

    fn check(fields: Fields) -> Result<Self, GatewayError> {
        let model = match fields.get("model") {
            None => return Err(invalid("`model` is required", "model")),
            Some(raw) => match serde_json::from_slice::<String>(raw) {
                Ok(m) if !m.is_empty() => m,
                Ok(_) => return Err(invalid("`model` must not be empty", "model")),
                Err(_) => return Err(invalid("`model` must be a string", "model")),
            },
        };
        let (messages, message_text) = match fields.get("messages").map(read_messages) {
            None => return Err(invalid("`messages` is required", "messages")),
            Some(r) => r?,
        };
        let stream = match fields.get("stream") {
            None | Some(b"null") => false,
            Some(raw) => serde_json::from_slice::<bool>(raw)
                .map_err(|_| invalid("`stream` must be a boolean", "stream"))?,
        };
        let include_usage = match fields.get("stream_options") {
            None | Some(b"null") => false,
            Some(raw) => match serde_json::from_slice::<Value>(raw) {
                Ok(Value::Object(o)) => match o.get("include_usage") {
                    None | Some(Value::Null) => false,
                    Some(Value::Bool(b)) => *b,
                    Some(_) => {
                        return Err(invalid(
                            "`stream_options.include_usage` must be a boolean",
                            "stream_options.include_usage",
                        ));
                    }
                },
                _ => {
                    return Err(invalid(
                        "`stream_options` must be an object",
                        "stream_options",
                    ));
                }
            },
        };
        let max_tokens = match read_count(&fields, "max_completion_tokens")? {
            Some(n) => Some(n),
            None => read_count(&fields, "max_tokens")?,
        };
        sampling::check(&fields)?;
        let system_text = fields
            .get("system")
            .and_then(|raw| serde_json::from_slice::<Text>(raw).ok())
            .map_or(0, |t| t.bytes);
        Ok(Self {
            model,
            stream,
            include_usage,
            max_tokens,
            prompt_bytes: message_text + system_text,
            messages,
            fields,
            original: None,
        })
    }

    /// The same request, remembering how its client wrote it in another API.
    pub fn with_original(mut self, original: Original) -> Self {
        self.original = Some(Arc::new(original));
        self
    }

    /// The request as its client wrote it in another API, if it did and the chat form has
    /// not been rewritten since.
    pub fn original(&self) -> Option<&Original> {
        self.original.as_deref()
    }

    /// Every top-level field of the body, in the client's order, with its value's JSON text
    /// as the client wrote it.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.fields.iter()
    }

    /// The JSON text of the body's field `name`.
    pub fn field(&self, name: &str) -> Option<&[u8]> {
        self.fields.get(name)
    }

    /// The same request with the fields named in `replaced` given new JSON text; every other
    /// field keeps its text as the client wrote it, in the client's order.
    pub fn with_fields(&self, replaced: &[(&str, &[u8])]) -> Result<Self, GatewayError> {
        let mut out = Vec::with_capacity(self.body_len() + 64);
        out.push(b'{');
        for (i, (k, v)) in self.fields().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            serde_json::to_writer(&mut out, k).map_err(|e| {
                GatewayError::new(ErrorKind::Internal, format!("writing the body: {e}"))
            })?;
            out.push(b':');
            match replaced.iter().find(|(name, _)| *name == k) {
                Some((_, text)) => out.extend_from_slice(text),
                None => out.extend_from_slice(v),
            }
        }
        out.push(b'}');
        Self::from_bytes(Bytes::from(out))
    }

    /// The same request with field `name` set to the JSON text `text`: replaced where the
    /// client sent it, else added after its last field; every other field as written.
    pub fn with_field(&self, name: &str, text: &[u8]) -> Result<Self, GatewayError> {
        if self.field(name).is_some() {
            return self.with_fields(&[(name, text)]);
        }
        let mut out = Vec::with_capacity(self.body_len() + name.len() + text.len() + 4);
        out.push(b'{');
        for (k, v) in self.fields() {
            serde_json::to_writer(&mut out, k).map_err(|e| {
                GatewayError::new(ErrorKind::Internal, format!("writing the body: {e}"))
            })?;
            out.push(b':');
            out.extend_from_slice(v);
            out.push(b',');
        }
        serde_json::to_writer(&mut out, name).map_err(|e| {
            GatewayError::new(ErrorKind::Internal, format!("writing the body: {e}"))
        })?;
        out.push(b':');
        out.extend_from_slice(text);
        out.push(b'}');
        Self::from_bytes(Bytes::from(out))
    }

    /// The body's field `name` as a JSON value.
    pub fn value(&self, name: &str) -> Option<Value> {
        self.field(name).map(to_value)
    }

    /// The whole body as a JSON map, for adapters that rewrite it (built on each call).
    pub fn to_map(&self) -> Map<String, Value> {
        self.fields()
            .map(|(k, v)| (k.to_string(), to_value(v)))
            .collect()
    }

    /// The body's length in bytes.
    pub fn body_len(&self) -> usize {
        self.fields.body_len()
    }

    /// How many messages the request holds.
    pub fn message_count(&self) -> usize {
        self.messages
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
        (self.prompt_bytes as u64).div_ceil(4)
    }

    /// Every piece of text the prompt holds (messages, system, tools), one per line: what a
    /// tokenizer counts.
    pub fn prompt_text(&self) -> String {
        let mut out = String::new();
        for key in ["messages", "system", "tools"] {
            if let Some(v) = self.value(key) {
                push_text(&v, &mut out);
            }
        }
        out
    }

    /// The client's `max_tokens` (or `max_completion_tokens`), if any.
    pub fn max_tokens(&self) -> Option<u64> {
        self.max_tokens
    }
}

/// A field's JSON text as a value. The text was checked to be JSON when the body was read;
/// a value nested deeper than the JSON reader's limit reads as `null`.
fn to_value(raw: &[u8]) -> Value {
    serde_json::from_slice(raw).unwrap_or(Value::Null)
}

/// A token count the client may set: absent, `null`, or a non-negative integer.
fn read_count(fields: &Fields, name: &'static str) -> Result<Option<u64>, GatewayError> {
    match fields.get(name) {
        None | Some(b"null") => Ok(None),
        Some(raw) => serde_json::from_slice::<u64>(raw)
            .map(Some)
            .map_err(|_| invalid(format!("`{name}` must be a non-negative integer"), name)),
    }
}

/// Checks `messages` and counts its text, naming the first message at fault.
fn read_messages(raw: &[u8]) -> Result<(usize, usize), GatewayError> {
    let scanned = serde_json::from_slice::<Messages>(raw)
        .map_err(|e| invalid(format!("`messages` could not be read: {e}"), "messages"))?;
    match scanned {
        Messages::NotArray => Err(invalid("`messages` must be an array", "messages")),
        Messages::Items { count: 0, .. } => {
            Err(invalid("`messages` must not be empty", "messages"))
        }
        Messages::Items {
            first_bad: Some((i, bad)),
            ..
        } => {
            let (what, param) = match bad {
                BadMessage::NotObject => ("must be an object", format!("messages[{i}]")),
                BadMessage::Role => ("must be a string", format!("messages[{i}].role")),
                BadMessage::UnknownRole => (
                    "must be one of system, developer, user, assistant, tool or function",
                    format!("messages[{i}].role"),
                ),
                BadMessage::NoContent => (
                    "is required for a user, system or developer message",
                    format!("messages[{i}].content"),
                ),
                BadMessage::NoAnswer => (
                    "is required for an assistant message without `tool_calls`",
                    format!("messages[{i}].content"),
                ),
                BadMessage::NoToolCallId => (
                    "is required for a tool message",
                    format!("messages[{i}].tool_call_id"),
                ),
                BadMessage::ImageWithoutUrl(j) => (
                    "is required for an image part",
                    format!("messages[{i}].content[{j}].image_url.url"),
                ),
            };
            Err(
                GatewayError::new(ErrorKind::InvalidRequest, format!("`{param}` {what}"))
                    .with_param(param),
            )
        }
        Messages::Items { count, text, .. } => Ok((count, text)),
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
