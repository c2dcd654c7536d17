//! A chat-completions SSE stream written as Messages' events: `message_start` and a `ping`,
//! each content block opened, filled and closed in order (thinking, text, each tool call
//! with its arguments as `input_json_delta`), then `message_delta` with the stop reason and
//! usage and `message_stop`. An error, or a stream that ends before its answer, ends with
//! an `error` event, never a silent cut.
//!
//! [`Reframer`] is a pure state machine: bytes of chat frames in (split anywhere), bytes of
//! events out.

use serde_json::{Value, json};
use sluice_core::GatewayError;

use serde::Deserialize;

use super::answer::{ChatUsage, message_id, stop_reason, usage};
use super::error;
use crate::frames::{Frames, event};

/// The kind of the content block open now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Open {
    Thinking,
    Text,
    /// A tool call, by its index among the chunk's `tool_calls`.
    Tool(u64),
}

/// Turns a chat stream's frames into Messages events.
#[derive(Debug, Default)]
pub struct Reframer {
    frames: Frames,
    started: bool,
    /// The open block and its index.
    open: Option<(usize, Open)>,
    next_index: usize,
    finish: Option<String>,
    usage: Option<ChatUsage>,
    /// `message_stop` or an `error` event has been written: nothing follows.
    ended: bool,
}

impl Reframer {
    /// A reframer for one stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the stream has ended (`message_stop` or an error written).
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Reads `bytes` of the chat stream; returns the events they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for data in self.frames.push(bytes) {
            self.frame(&data, &mut out);
        }
        out
    }

    /// The stream failed with `e`: the `error` event that ends it.
    pub fn fail(&mut self, e: &GatewayError) -> Vec<u8> {
        let mut out = Vec::new();
        if !self.ended {
            self.ended = true;
            event(&mut out, "error", &error::body(e));
        }
        out
    }

    /// The chat stream ended: closes the message, or (when it ended before its answer did)
    /// writes an `error` event.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.ended {
            return out;
        }
        if self.finish.is_none() {
            self.ended = true;
            let e = GatewayError::new(
                sluice_core::ErrorKind::UpstreamProtocol,
                "the upstream's stream ended before its answer did",
            );
            event(&mut out, "error", &error::body(&e));
            return out;
        }
        self.close(&mut out);
        let stop = self.finish.as_deref().map(stop_reason);
        event(
            &mut out,
            "message_delta",
            &json!({
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": null},
                "usage": usage(self.usage),
            }),
        );
        event(&mut out, "message_stop", &json!({"type": "message_stop"}));
        self.ended = true;
        out
    }

    fn frame(&mut self, data: &[u8], out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        if data == b"[DONE]" {
            out.extend(self.finish());
            return;
        }
        let Ok(chunk) = serde_json::from_slice::<Value>(data) else {
            let e = GatewayError::new(
                sluice_core::ErrorKind::UpstreamProtocol,
                "the upstream's stream held a frame that is not JSON",
            );
            out.extend(self.fail(&e));
            return;
        };
        if let Some(err) = chunk.get("error") {
            let text = err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("the upstream's stream failed");
            let kind = match err.get("type").and_then(Value::as_str) {
                Some("overloaded_error") => "overloaded_error",
                Some("timeout_error") => "timeout_error",
                _ => "api_error",
            };
            self.ended = true;
            event(
                out,
                "error",
                &json!({"type": "error", "error": {"type": kind, "message": text}}),
            );
            return;
        }
        self.chunk(&chunk, out);
    }

    fn chunk(&mut self, chunk: &Value, out: &mut Vec<u8>) {
        if !self.started {
            self.started = true;
            let id = chunk.get("id").and_then(Value::as_str).unwrap_or_default();
            event(
                out,
                "message_start",
                &json!({"type": "message_start", "message": {
                    "id": message_id(id), "type": "message", "role": "assistant",
                    "model": chunk.get("model").cloned().unwrap_or(Value::from("")),
                    "content": [], "stop_reason": null, "stop_sequence": null,
                    "usage": {"input_tokens": 0, "output_tokens": 0},
                }}),
            );
            event(out, "ping", &json!({"type": "ping"}));
        }
        if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
            self.usage = ChatUsage::deserialize(u).ok();
        }
        let Some(choice) = chunk.get("choices").and_then(|c| c.get(0)) else {
            return;
        };
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        if let Some(t) = text_of(delta, "reasoning_content") {
            self.ensure(
                Open::Thinking,
                out,
                || json!({"type": "thinking", "thinking": ""}),
            );
            self.delta(out, json!({"type": "thinking_delta", "thinking": t}));
        }
        if let Some(t) = text_of(delta, "content") {
            self.ensure(Open::Text, out, || json!({"type": "text", "text": ""}));
            self.delta(out, json!({"type": "text_delta", "text": t}));
        }
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let k = call.get("index").and_then(Value::as_u64).unwrap_or(0);
            let f = call.get("function").unwrap_or(&Value::Null);
            if call.get("id").is_some_and(|v| !v.is_null()) {
                // A new call: its own block, even when a call of the same index was open.
                self.close(out);
            }
            self.ensure(Open::Tool(k), out, || {
                json!({"type": "tool_use",
                    "id": call.get("id").and_then(Value::as_str).unwrap_or_default(),
                    "name": f.get("name").and_then(Value::as_str).unwrap_or_default(),
                    "input": {}})
            });
            if let Some(args) = text_of(f, "arguments") {
                self.delta(
                    out,
                    json!({"type": "input_json_delta", "partial_json": args}),
                );
            }
        }
        if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(f.to_string());
        }
    }

    /// Opens a block of `kind` unless one is open, closing another kind first.
    fn ensure(&mut self, kind: Open, out: &mut Vec<u8>, block: impl FnOnce() -> Value) {
        if matches!(self.open, Some((_, k)) if k == kind) {
            return;
        }
        self.close(out);
        let index = self.next_index;
        self.next_index += 1;
        self.open = Some((index, kind));
        event(
            out,
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": block()}),
        );
    }

    fn delta(&self, out: &mut Vec<u8>, delta: Value) {
        if let Some((index, _)) = self.open {
            event(
                out,
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            );
        }
    }

    fn close(&mut self, out: &mut Vec<u8>) {
        if let Some((index, kind)) = self.open.take() {
            if kind == Open::Thinking {
                // Chat streams carry no signature; the block says so with an empty one.
                event(
                    out,
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "signature_delta", "signature": ""}}),
                );
            }
            event(
                out,
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": index}),
            );
        }
    }
}

/// A non-empty string field of `v`.
fn text_of<'a>(v: &'a Value, name: &str) -> Option<&'a str> {
    v.get(name)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}
