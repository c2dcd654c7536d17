//! Anthropic Messages stream → chat-completions SSE stream.
//!
//! [`StreamTranslator`] is the pure state machine (events in, frames out); [`translate`] is the
//! glue that feeds it from the upstream's body.

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::{Value, json};
use sluice_core::{ErrorKind, GatewayError};

use super::response::finish_reason;
use crate::http::TimedBody;
use crate::pump::{self, Translate};
use crate::sse::{self, SseEvent};
use crate::unix_now;
use crate::usage::{AnthropicUsage, to_openai_json};
use crate::{EventStream, StreamEvent};

/// Translates Messages stream events into chat-completion chunks.
#[derive(Debug)]
pub struct StreamTranslator {
    include_usage: bool,
    id: String,
    model: String,
    created: u64,
    usage: AnthropicUsage,
    /// Content-block index → tool-call index, for tool-use blocks.
    tool_index: Vec<(u64, usize)>,
    finished: bool,
    /// Each upstream event is also passed on as it came (for a client of Messages).
    native: bool,
}

impl StreamTranslator {
    /// A translator; `include_usage` is whether the client asked for a usage chunk.
    pub fn new(include_usage: bool) -> Self {
        Self {
            include_usage,
            id: String::new(),
            model: String::new(),
            created: unix_now(),
            usage: AnthropicUsage::default(),
            tool_index: Vec::new(),
            finished: false,
            native: false,
        }
    }

    /// The same, passing each upstream event on as it came too ([`StreamEvent::Native`],
    /// ahead of its frames), when `native`.
    pub fn native(mut self, native: bool) -> Self {
        self.native = native;
        self
    }

    /// Whether `message_stop` has been seen.
    pub fn finished(&self) -> bool {
        self.finished
    }

    fn chunk(&self, delta: Value, finish: Option<&str>) -> StreamEvent {
        let v = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }],
        });
        StreamEvent::Frame(sse::frame(v.to_string().as_bytes()))
    }

    /// Handles one event, appending what it produces to `out`.
    pub fn event(
        &mut self,
        ev: &SseEvent,
        out: &mut VecDeque<StreamEvent>,
    ) -> Result<(), GatewayError> {
        let v = sse::json_of(ev)?;
        let kind = v.get("type").and_then(Value::as_str).unwrap_or_default();
        if self.native && kind != "error" {
            out.push_back(StreamEvent::Native(sse::again(ev, kind)));
        }
        match kind {
            "message_start" => {
                let m = v.get("message").unwrap_or(&Value::Null);
                self.id = m
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                self.model = m
                    .get("model")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                self.merge_usage(m.get("usage"));
                out.push_back(self.chunk(json!({"role": "assistant", "content": ""}), None));
            }
            "content_block_start" => self.block_start(&v, out),
            "content_block_delta" => self.block_delta(&v, out),
            "message_delta" => {
                self.merge_usage(v.get("usage"));
                if let Some(stop) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    out.push_back(self.chunk(json!({}), Some(finish_reason(stop))));
                }
            }
            "message_stop" => {
                self.finished = true;
                let usage = self.usage.normalise();
                if self.include_usage {
                    let v = json!({
                        "id": self.id,
                        "object": "chat.completion.chunk",
                        "created": self.created,
                        "model": self.model,
                        "choices": [],
                        "usage": to_openai_json(&usage),
                    });
                    out.push_back(StreamEvent::Frame(sse::frame(v.to_string().as_bytes())));
                }
                out.push_back(StreamEvent::Usage(usage));
                out.push_back(StreamEvent::Frame(sse::frame(sse::DONE)));
            }
            "error" => {
                let msg = v
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("upstream stream error");
                let t = v
                    .pointer("/error/type")
                    .and_then(Value::as_str)
                    .unwrap_or("error");
                return Err(GatewayError::new(
                    ErrorKind::UpstreamServerError,
                    format!("upstream stream error ({t}): {msg}"),
                ));
            }
            // ping, content_block_stop, and event types added later carry nothing to translate.
            _ => {}
        }
        Ok(())
    }

    fn merge_usage(&mut self, usage: Option<&Value>) {
        if let Some(u) =
            usage.and_then(|u| serde_json::from_value::<AnthropicUsage>(u.clone()).ok())
        {
            self.usage.merge(&u);
        }
    }

    fn block_start(&mut self, v: &Value, out: &mut VecDeque<StreamEvent>) {
        let block = v.get("content_block").unwrap_or(&Value::Null);
        if block.get("type").and_then(Value::as_str) != Some("tool_use") {
            return;
        }
        let block_index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
        let tool = self.tool_index.len();
        self.tool_index.push((block_index, tool));
        out.push_back(self.chunk(
            json!({"tool_calls": [{
                "index": tool,
                "id": block.get("id").cloned().unwrap_or(Value::Null),
                "type": "function",
                "function": {"name": block.get("name").cloned().unwrap_or(Value::Null), "arguments": ""},
            }]}),
            None,
        ));
    }

    fn block_delta(&mut self, v: &Value, out: &mut VecDeque<StreamEvent>) {
        let delta = v.get("delta").unwrap_or(&Value::Null);
        match delta.get("type").and_then(Value::as_str) {
            Some("text_delta") => {
                let text = delta.get("text").cloned().unwrap_or(Value::from(""));
                out.push_back(self.chunk(json!({"content": text}), None));
            }
            Some("thinking_delta") => {
                let text = delta.get("thinking").cloned().unwrap_or(Value::from(""));
                out.push_back(self.chunk(json!({"reasoning_content": text}), None));
            }
            Some("input_json_delta") => {
                let block_index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
                let Some(&(_, tool)) = self.tool_index.iter().find(|(b, _)| *b == block_index)
                else {
                    return;
                };
                let part = delta
                    .get("partial_json")
                    .cloned()
                    .unwrap_or(Value::from(""));
                out.push_back(self.chunk(
                    json!({"tool_calls": [{"index": tool, "function": {"arguments": part}}]}),
                    None,
                ));
            }
            _ => {}
        }
    }
}

impl Translate for StreamTranslator {
    fn event(&mut self, ev: SseEvent, out: &mut VecDeque<StreamEvent>) -> Result<(), GatewayError> {
        StreamTranslator::event(self, &ev, out)
    }

    fn finished(&self) -> bool {
        self.finished
    }

    fn closed(&mut self, _out: &mut VecDeque<StreamEvent>) -> bool {
        false
    }
}

/// Streams the upstream's Messages events as chat-completion frames.
pub(crate) fn translate(
    body: TimedBody,
    translator: StreamTranslator,
    name: Arc<str>,
) -> EventStream {
    pump::pump(body, translator, name)
}
