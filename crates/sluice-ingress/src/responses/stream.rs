//! A chat-completions SSE stream written as Responses events, in the order OpenAI sends
//! them: `response.created`, `response.in_progress`; for the text an `output_item.added`,
//! `content_part.added`, `output_text.delta`s, `output_text.done`, `content_part.done`,
//! `output_item.done`; for each tool call an `output_item.added`,
//! `function_call_arguments.delta`s and `.done`, `output_item.done`; then
//! `response.completed` (or `response.incomplete`) with the whole response and its usage.
//! An error, or a stream that ends before its answer, ends with an `error` event.
//!
//! [`Restream`] is a pure state machine: bytes of chat frames in (cut anywhere), bytes of
//! events out.

use serde_json::{Value, json};
use sluice_core::{ErrorKind, GatewayError};

use super::answer::{call_item, message_item, now_secs, response, response_id, status, usage};
use crate::frames::{Frames, event};

/// The output item open now.
#[derive(Debug)]
enum Open {
    Message {
        index: usize,
        id: String,
        text: String,
    },
    Call {
        index: usize,
        /// Its index among the chunks' `tool_calls`.
        chat_index: u64,
        call_id: String,
        name: String,
        arguments: String,
    },
}

/// Turns a chat stream's frames into Responses events.
#[derive(Debug, Default)]
pub struct Restream {
    frames: Frames,
    sequence: u64,
    started: bool,
    id: String,
    chat_id: String,
    model: Value,
    created: u64,
    open: Option<Open>,
    /// Output items finished, in order.
    done: Vec<Value>,
    finish: Option<String>,
    usage: Option<Value>,
    ended: bool,
}

impl Restream {
    /// A translator for one stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the stream has ended.
    pub fn ended(&self) -> bool {
        self.ended
    }

    fn emit(&mut self, out: &mut Vec<u8>, kind: &str, mut data: Value) {
        if let Some(obj) = data.as_object_mut() {
            obj.insert("type".into(), Value::from(kind));
            obj.insert("sequence_number".into(), Value::from(self.sequence));
        }
        self.sequence += 1;
        event(out, kind, &data);
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
                Ok(chunk) => match chunk.get("error") {
                    Some(err) => {
                        let text = err
                            .get("message")
                            .and_then(Value::as_str)
                            .unwrap_or("the upstream's stream failed")
                            .to_string();
                        self.error(&mut out, "upstream_error", &text);
                    }
                    None => self.chunk(&chunk, &mut out),
                },
                Err(_) => self.error(
                    &mut out,
                    "upstream_protocol_error",
                    "the upstream's stream held a frame that is not JSON",
                ),
            }
        }
        out
    }

    /// The stream failed with `e`: the `error` event that ends it.
    pub fn fail(&mut self, e: &GatewayError) -> Vec<u8> {
        let mut out = Vec::new();
        self.error(&mut out, e.kind.code(), &e.message);
        out
    }

    fn error(&mut self, out: &mut Vec<u8>, code: &str, message: &str) {
        if self.ended {
            return;
        }
        self.ended = true;
        self.emit(
            out,
            "error",
            json!({"code": code, "message": message, "param": null}),
        );
    }

    /// The chat stream ended: `response.completed`, or an `error` event when it ended
    /// before its answer did.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.ended {
            return out;
        }
        if self.finish.is_none() {
            let e = GatewayError::new(
                ErrorKind::UpstreamProtocol,
                "the upstream's stream ended before its answer did",
            );
            return self.fail(&e);
        }
        self.close(&mut out);
        let (state, incomplete) = status(self.finish.as_deref());
        let whole = response(
            &self.id,
            &self.model,
            self.created,
            state,
            incomplete,
            self.done.clone(),
            usage(self.usage.as_ref()),
        );
        let kind = if state == "completed" {
            "response.completed"
        } else {
            "response.incomplete"
        };
        self.emit(&mut out, kind, json!({"response": whole}));
        self.ended = true;
        out
    }

    fn chunk(&mut self, chunk: &Value, out: &mut Vec<u8>) {
        if !self.started {
            self.started = true;
            self.chat_id = chunk
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            self.id = response_id(&self.chat_id);
            self.model = chunk.get("model").cloned().unwrap_or(Value::Null);
            self.created = chunk
                .get("created")
                .and_then(Value::as_u64)
                .unwrap_or_else(now_secs);
            let skeleton = response(
                &self.id,
                &self.model,
                self.created,
                "in_progress",
                Value::Null,
                Vec::new(),
                Value::Null,
            );
            self.emit(
                out,
                "response.created",
                json!({"response": skeleton.clone()}),
            );
            self.emit(out, "response.in_progress", json!({"response": skeleton}));
        }
        if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
            self.usage = Some(u.clone());
        }
        let Some(choice) = chunk.get("choices").and_then(|c| c.get(0)) else {
            return;
        };
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        if let Some(t) = delta
            .get("content")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            self.text(t, out);
        }
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            self.call(call, out);
        }
        if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(f.to_string());
        }
    }

    fn text(&mut self, t: &str, out: &mut Vec<u8>) {
        if !matches!(self.open, Some(Open::Message { .. })) {
            self.close(out);
            let index = self.done.len();
            let id = format!("msg_{}", self.chat_id);
            let mut item = message_item(&id, "", "in_progress");
            item["content"] = json!([]);
            self.emit(
                out,
                "response.output_item.added",
                json!({"output_index": index, "item": item}),
            );
            self.emit(
                out,
                "response.content_part.added",
                json!({"item_id": id, "output_index": index, "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []}}),
            );
            self.open = Some(Open::Message {
                index,
                id,
                text: String::new(),
            });
        }
        if let Some(Open::Message { index, id, text }) = &mut self.open {
            text.push_str(t);
            let data = json!({"item_id": id.as_str(), "output_index": *index, "content_index": 0,
                "delta": t, "logprobs": []});
            self.emit(out, "response.output_text.delta", data);
        }
    }

    fn call(&mut self, call: &Value, out: &mut Vec<u8>) {
        let k = call.get("index").and_then(Value::as_u64).unwrap_or(0);
        let f = call.get("function").unwrap_or(&Value::Null);
        let new_call = call.get("id").is_some_and(|v| !v.is_null());
        let same = matches!(&self.open, Some(Open::Call { chat_index, .. }) if *chat_index == k);
        if new_call || !same {
            self.close(out);
            let index = self.done.len();
            let call_id = call
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let name = f
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            self.emit(
                out,
                "response.output_item.added",
                json!({"output_index": index,
                    "item": call_item(&call_id, &name, "", "in_progress")}),
            );
            self.open = Some(Open::Call {
                index,
                chat_index: k,
                call_id,
                name,
                arguments: String::new(),
            });
        }
        if let Some(args) = f
            .get("arguments")
            .and_then(Value::as_str)
            .filter(|a| !a.is_empty())
            && let Some(Open::Call {
                index,
                call_id,
                arguments,
                ..
            }) = &mut self.open
        {
            arguments.push_str(args);
            let data = json!({"item_id": format!("fc_{call_id}"), "output_index": *index,
                "delta": args});
            self.emit(out, "response.function_call_arguments.delta", data);
        }
    }

    fn close(&mut self, out: &mut Vec<u8>) {
        match self.open.take() {
            None => {}
            Some(Open::Message { index, id, text }) => {
                let at = json!({"item_id": id, "output_index": index, "content_index": 0});
                let mut done = at.clone();
                done["text"] = Value::from(text.as_str());
                done["logprobs"] = json!([]);
                self.emit(out, "response.output_text.done", done);
                let mut part = at;
                part["part"] = json!({"type": "output_text", "text": text, "annotations": []});
                self.emit(out, "response.content_part.done", part);
                let item = message_item(&id, &text, "completed");
                self.emit(
                    out,
                    "response.output_item.done",
                    json!({"output_index": index, "item": item.clone()}),
                );
                self.done.push(item);
            }
            Some(Open::Call {
                index,
                call_id,
                name,
                arguments,
                ..
            }) => {
                self.emit(
                    out,
                    "response.function_call_arguments.done",
                    json!({"item_id": format!("fc_{call_id}"), "output_index": index,
                        "name": name, "arguments": arguments}),
                );
                let item = call_item(&call_id, &name, &arguments, "completed");
                self.emit(
                    out,
                    "response.output_item.done",
                    json!({"output_index": index, "item": item.clone()}),
                );
                self.done.push(item);
            }
        }
    }
}
