//! Bedrock ConverseStream events (decoded from AWS's event stream by
//! [`crate::eventstream`], each named by its type) → chat-completions SSE stream.
//!
//! [`StreamTranslator`] is the pure state machine (events in, frames out).

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Value, json};
use sluice_core::{ErrorKind, GatewayError, UpstreamReply};

use super::response::finish_reason;
use crate::StreamEvent;
use crate::pump::Translate;
use crate::sse::{self, SseEvent};
use crate::unix_now;
use crate::usage::{BedrockUsage, to_openai_json};

/// Translates ConverseStream events into chat-completion chunks.
#[derive(Debug)]
pub struct StreamTranslator {
    upstream: Arc<str>,
    model: Arc<str>,
    include_usage: bool,
    id: String,
    created: u64,
    usage: BedrockUsage,
    /// Content-block index → tool-call index, for `toolUse` blocks.
    tools: Vec<(u64, usize)>,
    stopped: bool,
    finished: bool,
}

impl StreamTranslator {
    /// A translator for `upstream` serving `model`; `include_usage` is whether the client
    /// asked for a usage chunk.
    pub fn new(upstream: Arc<str>, model: Arc<str>, include_usage: bool) -> Self {
        let created = unix_now();
        Self {
            upstream,
            model,
            include_usage,
            id: format!("chatcmpl-bedrock-{created}"),
            created,
            usage: BedrockUsage::default(),
            tools: Vec::new(),
            stopped: false,
            finished: false,
        }
    }

    fn chunk(&self, delta: Value, finish: Option<&str>) -> StreamEvent {
        let v = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": &*self.model,
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
        let kind = ev.event.as_deref().unwrap_or_default();
        if let Some(exception) = kind
            .strip_prefix("exception:")
            .or_else(|| kind.strip_prefix("error:"))
        {
            return Err(self.exception(exception, &ev.data));
        }
        let v = sse::json_of(ev)?;
        match kind {
            "messageStart" => {
                out.push_back(self.chunk(json!({"role": "assistant", "content": ""}), None));
            }
            "contentBlockStart" => {
                if let Some(u) = v.pointer("/start/toolUse") {
                    let block = v
                        .get("contentBlockIndex")
                        .and_then(Value::as_u64)
                        .unwrap_or(0);
                    let tool = self.tools.len();
                    self.tools.push((block, tool));
                    out.push_back(self.chunk(
                        json!({"tool_calls": [{"index": tool,
                            "id": u.get("toolUseId").cloned().unwrap_or(Value::Null),
                            "type": "function",
                            "function": {"name": u.get("name").cloned().unwrap_or(Value::Null),
                                "arguments": ""}}]}),
                        None,
                    ));
                }
            }
            "contentBlockDelta" => self.delta(&v, out),
            "messageStop" => {
                self.stopped = true;
                let stop = v
                    .get("stopReason")
                    .and_then(Value::as_str)
                    .unwrap_or("end_turn");
                out.push_back(self.chunk(json!({}), Some(finish_reason(stop))));
            }
            "metadata" => {
                if let Some(u) = v.get("usage") {
                    self.usage = serde_json::from_value(u.clone()).unwrap_or_default();
                }
                self.end(out);
            }
            // contentBlockStop, and event types added later, carry nothing to translate.
            _ => {}
        }
        Ok(())
    }

    fn delta(&mut self, v: &Value, out: &mut VecDeque<StreamEvent>) {
        let d = v.get("delta").unwrap_or(&Value::Null);
        if let Some(t) = d.get("text").and_then(Value::as_str) {
            out.push_back(self.chunk(json!({"content": t}), None));
        } else if let Some(t) = d.pointer("/reasoningContent/text").and_then(Value::as_str) {
            out.push_back(self.chunk(json!({"reasoning_content": t}), None));
        } else if let Some(part) = d.pointer("/toolUse/input").and_then(Value::as_str) {
            let block = v
                .get("contentBlockIndex")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            if let Some(&(_, tool)) = self.tools.iter().find(|(b, _)| *b == block) {
                out.push_back(self.chunk(
                    json!({"tool_calls": [{"index": tool, "function": {"arguments": part}}]}),
                    None,
                ));
            }
        }
    }

    /// The stream's end: its usage (a chunk of it too, when asked for) and `[DONE]`.
    fn end(&mut self, out: &mut VecDeque<StreamEvent>) {
        if self.finished {
            return;
        }
        self.finished = true;
        let usage = self.usage.normalise();
        if self.include_usage {
            let v = json!({
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": &*self.model,
                "choices": [],
                "usage": to_openai_json(&usage),
            });
            out.push_back(StreamEvent::Frame(sse::frame(v.to_string().as_bytes())));
        }
        out.push_back(StreamEvent::Usage(usage));
        out.push_back(StreamEvent::Frame(sse::frame(sse::DONE)));
    }

    /// The error of an exception the stream sent: throttling as the 429 it is (paced and
    /// counted by the breaker as a rate limit), the service's own failures as 5xx, the rest
    /// as the upstream's refusal.
    fn exception(&self, kind: &str, data: &Bytes) -> GatewayError {
        let message = serde_json::from_slice::<Value>(data)
            .ok()
            .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_else(|| kind.to_string());
        let status = match kind {
            "throttlingException" => 429,
            "validationException" => 400,
            "serviceUnavailableException" => 503,
            _ => 500,
        };
        if status >= 500 {
            return GatewayError::new(
                ErrorKind::UpstreamServerError,
                format!(
                    "upstream {} stream failed ({kind}): {message}",
                    self.upstream
                ),
            )
            .with_upstream_status(status);
        }
        let body =
            json!({"error": {"message": message, "type": kind, "param": null, "code": kind}});
        GatewayError::rejected(UpstreamReply {
            status,
            body: Bytes::from(body.to_string()),
            content_type: Some("application/json".into()),
            retry_after: None,
        })
    }
}

impl Translate for StreamTranslator {
    fn event(&mut self, ev: SseEvent, out: &mut VecDeque<StreamEvent>) -> Result<(), GatewayError> {
        StreamTranslator::event(self, &ev, out)
    }

    fn finished(&self) -> bool {
        self.finished
    }

    fn closed(&mut self, out: &mut VecDeque<StreamEvent>) -> bool {
        // The metadata event (usage) may be missing; the stop is the answer's end.
        if self.stopped {
            self.end(out);
        }
        self.stopped
    }
}
