//! OpenAI's Responses API at an upstream that serves it (`responses = true`): a Responses
//! client's request goes as it came (its model swapped), and the answer and its events come
//! back as they came, beside their chat form, which the cache, usage and billing read.

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::{Value, json};
use sluice_core::{ErrorKind, GatewayError, Usage};

use crate::http::{self, Endpoint, HttpSettings};
use crate::pump::{self, Translate};
use crate::sse::{self, SseEvent};
use crate::unix_now;
use crate::usage::to_openai_json;
use crate::{Completion, StreamEvent, UpstreamCall, UpstreamResponse};

/// Sends the client's own body for `call` and reads the answer, or its first events.
pub(super) async fn send(
    name: Arc<str>,
    settings: HttpSettings,
    endpoint: Arc<Endpoint>,
    body: Result<serde_json::Value, GatewayError>,
    call: UpstreamCall,
) -> Result<UpstreamResponse, GatewayError> {
    let body = serde_json::to_vec(&body?)
        .map_err(|e| GatewayError::new(ErrorKind::Internal, format!("encoding request: {e}")))?;
    let mut accepted = http::send(&name, &settings, &endpoint, body, &call, |_| None, &[]).await?;
    if call.request.stream {
        let translator = Events::new(call.request.include_usage);
        return Ok(UpstreamResponse::Stream(pump::pump(
            accepted.body,
            translator,
            name,
        )));
    }
    let (raw, first_byte) = http::read_complete(&mut accepted).await?;
    completion(raw, first_byte, &name).map(UpstreamResponse::Complete)
}

/// A complete Responses answer as a chat completion, its usage read; the answer itself is
/// kept for a client that spoke Responses.
pub(crate) fn completion(
    raw: bytes::Bytes,
    first_byte: tokio::time::Instant,
    name: &str,
) -> Result<Completion, GatewayError> {
    if !sluice_core::budget::within(&raw) {
        return Err(unreadable(name, &sluice_core::budget::refusal("it")));
    }
    let response: Value = serde_json::from_slice(&raw).map_err(|e| unreadable(name, &e))?;
    let (chat, usage) = to_chat(&response);
    Ok(Completion {
        body: bytes::Bytes::from(chat.to_string()),
        usage: Some(usage),
        first_byte,
        native: Some(raw),
    })
}

fn unreadable(name: &str, e: &dyn std::fmt::Display) -> GatewayError {
    GatewayError::new(
        ErrorKind::UpstreamProtocol,
        format!("upstream {name} answered a response that does not read: {e}"),
    )
}

/// Responses usage as sluice's.
fn usage_of(u: Option<&Value>) -> Usage {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let u = u.unwrap_or(&Value::Null);
    Usage {
        prompt_tokens: n(u.get("input_tokens")),
        completion_tokens: n(u.get("output_tokens")),
        cached_tokens: n(u.pointer("/input_tokens_details/cached_tokens")),
        reasoning_tokens: n(u.pointer("/output_tokens_details/reasoning_tokens")),
        ..Usage::default()
    }
}

/// The finish reason a response's status gives.
fn finish_reason(response: &Value, called: bool) -> &'static str {
    match (
        response.get("status").and_then(Value::as_str),
        response
            .pointer("/incomplete_details/reason")
            .and_then(Value::as_str),
    ) {
        (Some("incomplete"), Some("content_filter")) => "content_filter",
        (Some("incomplete"), _) => "length",
        _ if called => "tool_calls",
        _ => "stop",
    }
}

/// A whole response in the internal form: its text, its function calls, its usage.
pub(crate) fn to_chat(response: &Value) -> (Value, Usage) {
    let mut text = String::new();
    let mut calls = Vec::new();
    for item in response
        .get("output")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                for part in item
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if let Some(t) = part.get("text").and_then(Value::as_str) {
                        text.push_str(t);
                    }
                }
            }
            Some("function_call") => calls.push(json!({
                "id": item.get("call_id").cloned().unwrap_or(Value::Null),
                "type": "function",
                "function": {"name": item.get("name").cloned().unwrap_or(Value::Null),
                    "arguments": item.get("arguments").cloned().unwrap_or(Value::from("{}"))},
            })),
            _ => {}
        }
    }
    let usage = usage_of(response.get("usage"));
    let mut message = json!({"role": "assistant", "content": text});
    if !calls.is_empty()
        && let Some(obj) = message.as_object_mut()
    {
        obj.insert("tool_calls".into(), Value::Array(calls.clone()));
    }
    let chat = json!({
        "id": response.get("id").cloned().unwrap_or(Value::Null),
        "object": "chat.completion",
        "created": response.get("created_at").cloned().unwrap_or(Value::from(unix_now())),
        "model": response.get("model").cloned().unwrap_or(Value::Null),
        "choices": [{"index": 0, "message": message,
            "finish_reason": finish_reason(response, !calls.is_empty())}],
        "usage": to_openai_json(&usage),
    });
    (chat, usage)
}

/// A Responses stream: each event passed on as it came ([`StreamEvent::Native`]), ahead
/// of the chat frames it becomes; usage read from the final response.
pub(crate) struct Events {
    include_usage: bool,
    id: Value,
    model: Value,
    /// Function calls so far: their item ids, in order (a call's index is its place here).
    calls: Vec<String>,
    finished: bool,
}

impl Events {
    pub(crate) fn new(include_usage: bool) -> Self {
        Self {
            include_usage,
            id: Value::Null,
            model: Value::Null,
            calls: Vec::new(),
            finished: false,
        }
    }

    fn chunk(&self, delta: Value, finish: Option<&str>) -> StreamEvent {
        let v = json!({"id": self.id, "object": "chat.completion.chunk", "created": unix_now(),
            "model": self.model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        StreamEvent::Frame(sse::frame(v.to_string().as_bytes()))
    }
}

impl Translate for Events {
    fn event(&mut self, ev: SseEvent, out: &mut VecDeque<StreamEvent>) -> Result<(), GatewayError> {
        let v = sse::json_of(&ev)?;
        let kind = v.get("type").and_then(Value::as_str).unwrap_or_default();
        if kind == "error" || kind == "response.failed" {
            let msg = v
                .get("message")
                .or_else(|| v.pointer("/response/error/message"))
                .and_then(Value::as_str)
                .unwrap_or("upstream stream error");
            return Err(GatewayError::new(
                ErrorKind::UpstreamServerError,
                format!("upstream stream error: {msg}"),
            ));
        }
        out.push_back(StreamEvent::Native(sse::again(&ev, kind)));
        match kind {
            "response.created" => {
                self.id = v.pointer("/response/id").cloned().unwrap_or(Value::Null);
                self.model = v.pointer("/response/model").cloned().unwrap_or(Value::Null);
                out.push_back(self.chunk(json!({"role": "assistant", "content": ""}), None));
            }
            "response.output_text.delta" => {
                let text = v.get("delta").cloned().unwrap_or(Value::from(""));
                out.push_back(self.chunk(json!({"content": text}), None));
            }
            "response.output_item.added"
                if v.pointer("/item/type").and_then(Value::as_str) == Some("function_call") =>
            {
                let item = v.get("item").unwrap_or(&Value::Null);
                let index = self.calls.len();
                let id = item.get("id").and_then(Value::as_str).unwrap_or_default();
                self.calls.push(id.to_string());
                out.push_back(self.chunk(
                    json!({"tool_calls": [{"index": index, "id": item.get("call_id"),
                        "type": "function", "function": {"name": item.get("name"), "arguments": ""}}]}),
                    None,
                ));
            }
            "response.function_call_arguments.delta" => {
                let id = v.get("item_id").and_then(Value::as_str).unwrap_or_default();
                if let Some(index) = self.calls.iter().position(|c| c == id) {
                    let part = v.get("delta").cloned().unwrap_or(Value::from(""));
                    out.push_back(self.chunk(
                        json!({"tool_calls": [{"index": index, "function": {"arguments": part}}]}),
                        None,
                    ));
                }
            }
            "response.completed" | "response.incomplete" => {
                self.finished = true;
                let response = v.get("response").unwrap_or(&Value::Null);
                let finish = finish_reason(response, !self.calls.is_empty());
                out.push_back(self.chunk(json!({}), Some(finish)));
                let usage = usage_of(response.get("usage"));
                if self.include_usage {
                    let u = json!({"id": self.id, "object": "chat.completion.chunk",
                        "created": unix_now(), "model": self.model, "choices": [],
                        "usage": to_openai_json(&usage)});
                    out.push_back(StreamEvent::Frame(sse::frame(u.to_string().as_bytes())));
                }
                out.push_back(StreamEvent::Usage(usage));
                out.push_back(StreamEvent::Frame(sse::frame(sse::DONE)));
            }
            _ => {}
        }
        Ok(())
    }

    fn finished(&self) -> bool {
        self.finished
    }

    fn closed(&mut self, _out: &mut VecDeque<StreamEvent>) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_reads_as_a_chat_answer_with_its_usage() {
        let response = json!({"id": "resp_1", "model": "m", "created_at": 5, "status": "completed",
            "output": [
                {"type": "reasoning", "id": "r", "summary": []},
                {"type": "message", "content": [{"type": "output_text", "text": "Hi"}]},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{\"a\":1}"}
            ],
            "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4},
                "output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 1}}});
        let (chat, usage) = to_chat(&response);
        assert_eq!(chat["choices"][0]["message"]["content"], "Hi");
        assert_eq!(chat["choices"][0]["message"]["tool_calls"][0]["id"], "c1");
        assert_eq!(chat["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(
            (
                usage.prompt_tokens,
                usage.cached_tokens,
                usage.completion_tokens,
                usage.reasoning_tokens
            ),
            (10, 4, 3, 1)
        );
        let cut =
            json!({"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}});
        assert_eq!(to_chat(&cut).0["choices"][0]["finish_reason"], "length");
    }
}
