//! Gemini `streamGenerateContent?alt=sse` → chat-completions SSE stream. Each event is a
//! whole `generateContent` answer holding the next piece of each candidate; the last one
//! carries the finish reason and the usage, and the stream ends when the body does (no
//! terminator), so a body that ends before a finish reason is a truncated answer.
//!
//! [`StreamTranslator`] is the pure state machine (events in, frames out); [`translate`] is
//! the glue that feeds it from the upstream's body.

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::{Value, json};
use sluice_core::GatewayError;

use super::response::{Answer, blocked, finish_reason, unreadable};
use crate::http::TimedBody;
use crate::pump::{self, Translate};
use crate::sse::{self, SseEvent};
use crate::unix_now;
use crate::usage::{GeminiUsage, to_openai_json};
use crate::{EventStream, StreamEvent};

/// Translates Gemini's stream events into chat-completion chunks.
#[derive(Debug)]
pub struct StreamTranslator {
    upstream: Arc<str>,
    include_usage: bool,
    id: String,
    model: String,
    created: u64,
    usage: GeminiUsage,
    /// Candidates whose first chunk (with the role) was sent.
    started: Vec<u64>,
    /// Tool calls sent so far (they number the calls Gemini gave no id), and per candidate.
    calls: usize,
    called: Vec<(u64, usize)>,
    /// A finish reason was seen: the body's end is then the answer's.
    finished_reason: bool,
    done: bool,
}

impl StreamTranslator {
    /// A translator for `upstream`; `include_usage` is whether the client asked for a usage
    /// chunk.
    pub fn new(upstream: Arc<str>, include_usage: bool) -> Self {
        Self {
            upstream,
            include_usage,
            id: String::new(),
            model: String::new(),
            created: unix_now(),
            usage: GeminiUsage::default(),
            started: Vec::new(),
            calls: 0,
            called: Vec::new(),
            finished_reason: false,
            done: false,
        }
    }

    fn chunk(&self, index: u64, delta: Value, finish: Option<&str>) -> StreamEvent {
        let v = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{ "index": index, "delta": delta, "finish_reason": finish }],
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
        if let Some(e) = v.get("error") {
            let msg = e
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("upstream stream error");
            return Err(GatewayError::new(
                sluice_core::ErrorKind::UpstreamServerError,
                format!("upstream {} stream error: {msg}", self.upstream),
            ));
        }
        let answer: Answer =
            serde_json::from_value(v).map_err(|e| unreadable(&self.upstream, e))?;
        if let Some(reason) = answer
            .prompt_feedback
            .as_ref()
            .and_then(|f| f.block_reason.as_deref())
        {
            return Err(blocked(&self.upstream, reason));
        }
        if let Some(id) = answer.response_id {
            self.id = id;
        }
        if let Some(m) = answer.model_version {
            self.model = m;
        }
        if let Some(u) = answer.usage_metadata {
            // Each chunk's metadata is the total so far.
            self.usage = u;
        }
        for (i, c) in answer.candidates.iter().enumerate() {
            let index = c.index.unwrap_or(i as u64);
            if !self.started.contains(&index) {
                self.started.push(index);
                out.push_back(self.chunk(index, json!({"role": "assistant", "content": ""}), None));
            }
            for p in c.content.iter().flat_map(|c| &c.parts) {
                if let Some(f) = &p.function_call {
                    let n = self.called_in(index);
                    let mut call = f.tool_call(self.calls, p.thought_signature.as_deref());
                    if let Some(obj) = call.as_object_mut() {
                        obj.insert("index".into(), Value::from(n));
                    }
                    self.calls += 1;
                    out.push_back(self.chunk(index, json!({ "tool_calls": [call] }), None));
                } else if let Some(t) = p.text.as_deref().filter(|t| !t.is_empty()) {
                    let key = if p.thought {
                        "reasoning_content"
                    } else {
                        "content"
                    };
                    out.push_back(self.chunk(index, json!({ key: t }), None));
                }
            }
            if let Some(reason) = &c.finish_reason {
                self.finished_reason = true;
                let called = self.called.iter().any(|(i, n)| *i == index && *n > 0);
                out.push_back(self.chunk(index, json!({}), Some(finish_reason(reason, called))));
            }
        }
        Ok(())
    }

    /// The number of the next tool call of candidate `index` (counted).
    fn called_in(&mut self, index: u64) -> usize {
        match self.called.iter_mut().find(|(i, _)| *i == index) {
            Some((_, n)) => {
                *n += 1;
                *n - 1
            }
            None => {
                self.called.push((index, 1));
                0
            }
        }
    }

    /// The answer's end: its usage (a chunk of it too, when asked for) and `[DONE]`.
    fn end(&mut self, out: &mut VecDeque<StreamEvent>) {
        self.done = true;
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
}

impl Translate for StreamTranslator {
    fn event(&mut self, ev: SseEvent, out: &mut VecDeque<StreamEvent>) -> Result<(), GatewayError> {
        StreamTranslator::event(self, &ev, out)
    }

    fn finished(&self) -> bool {
        self.done
    }

    fn closed(&mut self, out: &mut VecDeque<StreamEvent>) -> bool {
        if !self.finished_reason {
            return false;
        }
        self.end(out);
        true
    }
}

/// Streams the upstream's answers as chat-completion frames.
pub(crate) fn translate(body: TimedBody, translator: StreamTranslator) -> EventStream {
    let name = translator.upstream.clone();
    pump::pump(body, translator, name)
}
