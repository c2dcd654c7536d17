//! A chat-completions SSE stream written as `streamGenerateContent?alt=sse` events: each
//! piece of text (or thought) an answer of its own, then one last answer with the function
//! calls (whole: Gemini sends a call's arguments at once), the finish reason and the usage.
//! An error, or a stream that ends before its answer, ends with an `error` object, never a
//! silent cut.
//!
//! [`Reframer`] is a pure state machine: bytes of chat frames in (split anywhere), bytes of
//! events out.

use serde::Deserialize;
use serde_json::{Value, json};
use sluice_core::{ErrorKind, GatewayError};

use super::answer::{ChatUsage, finish_reason, function_call, usage_metadata};
use super::error;
use crate::frames::Frames;

/// One tool call being read: its index in its choice, and the call as chat writes it whole.
#[derive(Debug)]
struct Call {
    choice: u64,
    index: u64,
    call: Value,
}

/// Turns a chat stream's frames into Gemini's events.
#[derive(Debug, Default)]
pub struct Reframer {
    frames: Frames,
    id: String,
    model: String,
    usage: Option<ChatUsage>,
    calls: Vec<Call>,
    /// Each choice's finish reason, once seen.
    finished: Vec<(u64, String)>,
    ended: bool,
}

/// Writes one event.
fn put(out: &mut Vec<u8>, v: &Value) {
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(v.to_string().as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
}

impl Reframer {
    /// A reframer for one stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads `bytes` of the chat stream; returns the events they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for data in self.frames.push(bytes) {
            if self.ended {
                break;
            }
            if data == b"[DONE]" {
                out.extend(self.finish());
                continue;
            }
            match serde_json::from_slice::<Value>(&data) {
                Ok(chunk) if chunk.get("error").is_some() => {
                    let text = chunk
                        .pointer("/error/message")
                        .and_then(Value::as_str)
                        .unwrap_or("the upstream's stream failed");
                    let e = GatewayError::new(ErrorKind::UpstreamServerError, text.to_string());
                    out.extend(self.fail(&e));
                }
                Ok(chunk) => self.chunk(&chunk, &mut out),
                Err(_) => {
                    let e = GatewayError::new(
                        ErrorKind::UpstreamProtocol,
                        "the upstream's stream held a frame that is not JSON",
                    );
                    out.extend(self.fail(&e));
                }
            }
        }
        out
    }

    /// The stream failed with `e`: the `error` object that ends it.
    pub fn fail(&mut self, e: &GatewayError) -> Vec<u8> {
        let mut out = Vec::new();
        if !self.ended {
            self.ended = true;
            put(&mut out, &error::body(e));
        }
        out
    }

    /// The chat stream ended: the last answer (calls, finish reason, usage), or an error
    /// when it ended before its answer did.
    pub fn finish(&mut self) -> Vec<u8> {
        if self.ended {
            return Vec::new();
        }
        if self.finished.is_empty() {
            let e = GatewayError::new(
                ErrorKind::UpstreamProtocol,
                "the upstream's stream ended before its answer did",
            );
            return self.fail(&e);
        }
        self.ended = true;
        let mut candidates = Vec::new();
        for (choice, reason) in &self.finished {
            let mut parts = Vec::new();
            for c in self.calls.iter().filter(|c| c.choice == *choice) {
                match function_call(&c.call) {
                    Ok(p) => parts.push(p),
                    Err(e) => {
                        self.ended = false;
                        return self.fail(&e);
                    }
                }
            }
            if parts.is_empty() {
                parts.push(json!({"text": ""}));
            }
            candidates.push(json!({"content": {"role": "model", "parts": parts},
                "finishReason": finish_reason(reason), "index": choice}));
        }
        let mut out = Vec::new();
        put(
            &mut out,
            &json!({"candidates": candidates, "usageMetadata": usage_metadata(self.usage),
                "modelVersion": self.model, "responseId": self.id}),
        );
        out
    }

    fn chunk(&mut self, chunk: &Value, out: &mut Vec<u8>) {
        if let Some(id) = chunk.get("id").and_then(Value::as_str) {
            self.id = id.to_string();
        }
        if let Some(m) = chunk.get("model").and_then(Value::as_str) {
            self.model = m.to_string();
        }
        if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
            self.usage = ChatUsage::deserialize(u).ok();
        }
        for choice in chunk
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let index = choice.get("index").and_then(Value::as_u64).unwrap_or(0);
            let delta = choice.get("delta").unwrap_or(&Value::Null);
            let mut parts = Vec::new();
            if let Some(t) = text_of(delta, "reasoning_content") {
                parts.push(json!({"text": t, "thought": true}));
            }
            if let Some(t) = text_of(delta, "content") {
                parts.push(json!({"text": t}));
            }
            if !parts.is_empty() {
                put(
                    out,
                    &json!({"candidates": [{"content": {"role": "model", "parts": parts},
                        "index": index}], "modelVersion": self.model, "responseId": self.id}),
                );
            }
            for call in delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                self.call(index, call);
            }
            if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finished.push((index, f.to_string()));
            }
        }
    }

    /// A piece of a tool call: a new call (it has an id), or more of its arguments.
    fn call(&mut self, choice: u64, piece: &Value) {
        let index = piece.get("index").and_then(Value::as_u64).unwrap_or(0);
        let new = piece.get("id").is_some_and(Value::is_string);
        let open = self
            .calls
            .iter_mut()
            .rev()
            .find(|c| c.choice == choice && c.index == index);
        let args = piece
            .pointer("/function/arguments")
            .and_then(Value::as_str)
            .unwrap_or("");
        match open {
            Some(c) if !new => {
                let so_far = c.call["function"]["arguments"].as_str().unwrap_or("");
                c.call["function"]["arguments"] = Value::from(format!("{so_far}{args}"));
            }
            _ => {
                let mut call = piece.clone();
                call["function"]["arguments"] = Value::from(args);
                self.calls.push(Call {
                    choice,
                    index,
                    call,
                });
            }
        }
    }
}

fn text_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|t| !t.is_empty())
}
