//! A streamed answer assembled, frame by frame as it passes to the client, into the complete
//! `chat.completion` the answer cache stores: each choice's role, content, reasoning,
//! refusal and tool calls joined from their deltas, its finish reason, and the usage the
//! stream reported.
//!
//! Only what can be rebuilt faithfully is stored: a stream with a delta field this does not
//! know, log probabilities, an error event, no `[DONE]`, a choice without a finish reason or
//! more than [`MAX_BYTES`] of text gives nothing (the answer is passed through, not stored).

use std::collections::BTreeMap;

use bytes::Bytes;
use serde_json::{Map, Value, json};
use sluice_core::Usage;

use super::HEAD_FIELDS;

/// The most text an assembled answer may hold.
pub const MAX_BYTES: usize = 4 * 1024 * 1024;

/// Delta fields whose text is joined across chunks.
const TEXT_FIELDS: [&str; 3] = ["content", "reasoning_content", "refusal"];

#[derive(Default, Debug)]
struct ToolCall {
    id: Option<Value>,
    kind: Option<Value>,
    name: String,
    arguments: String,
}

#[derive(Default, Debug)]
struct Choice {
    role: Option<Value>,
    texts: BTreeMap<&'static str, String>,
    tool_calls: BTreeMap<u64, ToolCall>,
    finish_reason: Option<Value>,
}

/// The answer so far.
#[derive(Default, Debug)]
pub struct Assembler {
    head: Map<String, Value>,
    choices: BTreeMap<u64, Choice>,
    usage: Option<Usage>,
    done: bool,
    bytes: usize,
    /// Something was seen that cannot be rebuilt: nothing will be stored.
    spoiled: bool,
}

impl Assembler {
    /// Takes one SSE frame (`data: ...\n\n`) as it is sent to the client.
    pub fn frame(&mut self, frame: &[u8]) {
        if self.spoiled {
            return;
        }
        let data = frame
            .strip_prefix(b"data: ")
            .map(|d| d.trim_ascii_end())
            .unwrap_or_default();
        if data == b"[DONE]" {
            self.done = true;
            return;
        }
        self.bytes += data.len();
        let ok = self.bytes <= MAX_BYTES
            && !self.done
            && match serde_json::from_slice::<Value>(data) {
                Ok(Value::Object(chunk)) => self.chunk(chunk),
                _ => false,
            };
        self.spoiled = !ok;
    }

    /// Takes the usage the stream reported.
    pub fn usage(&mut self, u: Usage) {
        self.usage = Some(u);
    }

    /// Adds a chunk; false when it holds what cannot be rebuilt.
    fn chunk(&mut self, mut chunk: Map<String, Value>) -> bool {
        if chunk.contains_key("error") {
            return false;
        }
        for name in HEAD_FIELDS {
            if let Some(v) = chunk.remove(name)
                && !v.is_null()
            {
                self.head.entry(name).or_insert(v);
            }
        }
        let Some(Value::Array(choices)) = chunk.remove("choices") else {
            // A usage-only chunk may have `choices: []`; a chunk with none at all is odd.
            return chunk.contains_key("usage");
        };
        choices.into_iter().all(|c| match c {
            Value::Object(c) => self.choice(c),
            _ => false,
        })
    }

    fn choice(&mut self, mut c: Map<String, Value>) -> bool {
        if c.get("logprobs").is_some_and(|l| !l.is_null()) {
            return false;
        }
        let Some(index) = c.get("index").and_then(Value::as_u64) else {
            return false;
        };
        let acc = self.choices.entry(index).or_default();
        if let Some(f) = c.remove("finish_reason")
            && !f.is_null()
        {
            acc.finish_reason = Some(f);
        }
        let delta = match c.remove("delta") {
            Some(Value::Object(d)) => d,
            None | Some(Value::Null) => Map::new(),
            Some(_) => return false,
        };
        for (name, v) in delta {
            let joined = match (name.as_str(), v) {
                (_, Value::Null) => true,
                ("role", v) => {
                    acc.role = Some(v);
                    true
                }
                ("tool_calls", Value::Array(calls)) => {
                    calls.into_iter().all(|call| tool_call(acc, call))
                }
                (field, Value::String(s)) => match TEXT_FIELDS.iter().find(|f| **f == field) {
                    Some(f) => {
                        acc.texts.entry(*f).or_default().push_str(&s);
                        true
                    }
                    None => false,
                },
                _ => false,
            };
            if !joined {
                return false;
            }
        }
        true
    }

    /// The complete answer, when the stream ended well and everything in it was rebuilt.
    pub fn finish(self) -> Option<Bytes> {
        let complete = self.done
            && !self.spoiled
            && !self.choices.is_empty()
            && self.choices.values().all(|c| c.finish_reason.is_some());
        if !complete {
            return None;
        }
        let mut out = self.head;
        out.insert("object".into(), json!("chat.completion"));
        let choices: Vec<Value> = self
            .choices
            .into_iter()
            .map(|(index, c)| {
                let mut message = Map::new();
                message.insert("role".into(), c.role.unwrap_or_else(|| json!("assistant")));
                let mut texts = c.texts;
                message.insert(
                    "content".into(),
                    texts.remove("content").map_or(Value::Null, Value::String),
                );
                for (field, text) in texts {
                    message.insert(field.into(), Value::String(text));
                }
                if !c.tool_calls.is_empty() {
                    let calls: Vec<Value> = c
                        .tool_calls
                        .into_values()
                        .map(|t| {
                            json!({
                                "id": t.id.unwrap_or(Value::Null),
                                "type": t.kind.unwrap_or_else(|| json!("function")),
                                "function": {"name": t.name, "arguments": t.arguments},
                            })
                        })
                        .collect();
                    message.insert("tool_calls".into(), Value::Array(calls));
                }
                json!({
                    "index": index,
                    "message": Value::Object(message),
                    "logprobs": null,
                    "finish_reason": c.finish_reason,
                })
            })
            .collect();
        out.insert("choices".into(), Value::Array(choices));
        if let Some(u) = self.usage {
            out.insert("usage".into(), usage_json(&u));
        }
        serde_json::to_vec(&Value::Object(out))
            .ok()
            .map(Bytes::from)
    }
}

/// Joins one tool-call delta into its call; false when it is not one.
fn tool_call(acc: &mut Choice, call: Value) -> bool {
    let Value::Object(mut call) = call else {
        return false;
    };
    let Some(i) = call.get("index").and_then(Value::as_u64) else {
        return false;
    };
    let t = acc.tool_calls.entry(i).or_default();
    if let Some(id) = call.remove("id").filter(|v| !v.is_null()) {
        t.id = Some(id);
    }
    if let Some(kind) = call.remove("type").filter(|v| !v.is_null()) {
        t.kind = Some(kind);
    }
    match call.remove("function") {
        None | Some(Value::Null) => true,
        Some(Value::Object(f)) => f.into_iter().all(|(k, v)| match (k.as_str(), v) {
            (_, Value::Null) => true,
            ("name", Value::String(s)) => {
                t.name.push_str(&s);
                true
            }
            ("arguments", Value::String(s)) => {
                t.arguments.push_str(&s);
                true
            }
            _ => false,
        }),
        Some(_) => false,
    }
}

/// Usage in OpenAI's shape.
fn usage_json(u: &Usage) -> Value {
    let mut v = json!({
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.total_tokens(),
    });
    if u.cached_tokens > 0 {
        v["prompt_tokens_details"] = json!({"cached_tokens": u.cached_tokens});
    }
    if u.reasoning_tokens > 0 {
        v["completion_tokens_details"] = json!({"reasoning_tokens": u.reasoning_tokens});
    }
    v
}
