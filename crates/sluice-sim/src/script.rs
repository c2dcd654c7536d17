//! Turns a planned answer into the timed steps a client sees: waits and frames, in OpenAI's,
//! Anthropic's, Gemini's or Bedrock's wire format. The in-process provider and the HTTP server both play
//! these steps.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use sluice_core::Usage;
use sluice_providers::sse;
use sluice_providers::usage::to_openai_json;

use crate::limits::Api;
use crate::structured::Shape;
use crate::upstream::AnswerPlan;

/// One step of an answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Wait this long before the next step.
    Wait(Duration),
    /// Send these bytes (an SSE frame, or a whole JSON body).
    Frame(Bytes),
    /// The answer's usage (for in-process callers; not sent over HTTP by itself).
    Usage(Usage),
}

/// How to render an answer.
#[derive(Clone, Debug)]
pub struct Render {
    /// Wire format.
    pub api: Api,
    /// The model name to report.
    pub model: String,
    /// Whether the client asked for a stream.
    pub stream: bool,
    /// Whether the client asked for a usage chunk.
    pub include_usage: bool,
    /// Text, JSON of the asked-for schema, or a call of the forced tool.
    pub shape: Shape,
}

const WORDS: [&str; 8] = [
    "clause ",
    "renewal ",
    "liability ",
    "notice ",
    "term ",
    "party ",
    "shall ",
    "the ",
];

fn text(from: u32, n: u32) -> String {
    (from..from + n)
        .map(|i| WORDS[i as usize % WORDS.len()])
        .collect()
}

/// Tokens `from..from + n` of `content` (four bytes a token, on char boundaries).
fn piece(content: &str, from: u32, n: u32) -> String {
    let at = |t: u32| {
        let mut i = (t as usize * 4).min(content.len());
        while !content.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    content[at(from)..at(from + n)].to_string()
}

fn usage_of(p: &AnswerPlan) -> Usage {
    Usage {
        prompt_tokens: p.prompt_tokens,
        completion_tokens: u64::from(p.output_tokens),
        cached_tokens: p.cached_tokens,
        cache_write_tokens: 0,
        reasoning_tokens: 0,
        cache_write_long_tokens: 0,
    }
}

fn id(p: &AnswerPlan, api: Api) -> String {
    match api {
        Api::Openai => format!("chatcmpl-sim{}", p.seq),
        Api::Anthropic => format!("msg_sim{}", p.seq),
        Api::Gemini => format!("sim-resp-{}", p.seq),
        Api::Bedrock => format!("sim-converse-{}", p.seq),
    }
}

/// Converse's `usage` of `u`.
fn bedrock_usage(u: &Usage) -> Value {
    json!({
        "inputTokens": u.prompt_tokens - u.cached_tokens,
        "outputTokens": u.completion_tokens,
        "totalTokens": u.total_tokens(),
        "cacheReadInputTokens": u.cached_tokens,
        "cacheWriteInputTokens": 0,
    })
}

/// One ConverseStream event, framed in AWS's event stream.
fn bedrock_event(name: &str, v: &Value) -> Step {
    match sluice_providers::eventstream::encode("event", name, v.to_string().as_bytes()) {
        Ok(b) => Step::Frame(b),
        // Only a payload over 16 MiB fails, which no planned answer holds.
        Err(_) => Step::Wait(Duration::ZERO),
    }
}

/// Gemini's `usageMetadata` of `u`.
fn gemini_usage(u: &Usage) -> Value {
    let mut v = json!({
        "promptTokenCount": u.prompt_tokens,
        "candidatesTokenCount": u.completion_tokens,
        "totalTokenCount": u.total_tokens(),
    });
    if u.cached_tokens > 0 {
        v["cachedContentTokenCount"] = Value::from(u.cached_tokens);
    }
    v
}

/// One Gemini answer (or stream chunk) of `parts`, finished for `finish`.
fn gemini_answer(
    p: &AnswerPlan,
    r: &Render,
    parts: Value,
    finish: Option<&str>,
    u: Value,
) -> Value {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(f) = finish {
        candidate["finishReason"] = Value::from(f);
    }
    json!({"candidates": [candidate], "usageMetadata": u, "modelVersion": r.model,
        "responseId": id(p, r.api)})
}

fn anthropic_usage(u: &Usage, output: u64) -> Value {
    json!({
        "input_tokens": u.prompt_tokens - u.cached_tokens,
        "cache_read_input_tokens": u.cached_tokens,
        "cache_creation_input_tokens": 0,
        "output_tokens": output,
    })
}

/// The steps of a planned answer. A JSON or tool-call answer carries its generated text,
/// and its output tokens are that text's.
pub fn answer(p: &AnswerPlan, r: &Render) -> Vec<Step> {
    let shaped;
    let p = match r.shape.text() {
        Some(t) => {
            let mut q = p.clone();
            q.output_tokens = u32::try_from(crate::cache::tokens_of(t.len()).max(1)).unwrap_or(1);
            q.content = Some(t.to_string());
            shaped = q;
            &shaped
        }
        None => p,
    };
    if r.stream {
        stream(p, r)
    } else {
        let decode = p
            .per_token
            .saturating_mul(p.output_tokens.saturating_sub(1));
        vec![
            Step::Wait(p.ttft + decode),
            Step::Frame(complete_body(p, r)),
            Step::Usage(usage_of(p)),
        ]
    }
}

/// A complete answer's JSON body.
pub fn complete_body(p: &AnswerPlan, r: &Render) -> Bytes {
    let u = usage_of(p);
    let content = p
        .content
        .clone()
        .unwrap_or_else(|| text(0, p.output_tokens));
    let call_id = format!("call_sim{}", p.seq);
    let v = match (r.api, &r.shape) {
        (Api::Openai, Shape::Tool { name, arguments }) => json!({
            "id": id(p, r.api), "object": "chat.completion", "created": 0, "model": r.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
                "tool_calls": [{"id": call_id, "type": "function",
                    "function": {"name": name, "arguments": arguments}}]},
                "finish_reason": "tool_calls"}],
            "usage": to_openai_json(&u),
        }),
        (Api::Openai, _) => json!({
            "id": id(p, r.api), "object": "chat.completion", "created": 0, "model": r.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": to_openai_json(&u),
        }),
        (Api::Anthropic, Shape::Tool { name, arguments }) => json!({
            "id": id(p, r.api), "type": "message", "role": "assistant", "model": r.model,
            "content": [{"type": "tool_use", "id": format!("toolu_sim{}", p.seq), "name": name,
                "input": serde_json::from_str::<Value>(arguments).unwrap_or(Value::Null)}],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": anthropic_usage(&u, u.completion_tokens),
        }),
        (Api::Anthropic, _) => json!({
            "id": id(p, r.api), "type": "message", "role": "assistant", "model": r.model,
            "content": [{"type": "text", "text": content}], "stop_reason": "end_turn",
            "stop_sequence": null,
            "usage": anthropic_usage(&u, u.completion_tokens),
        }),
        (Api::Gemini, Shape::Tool { name, arguments }) => gemini_answer(
            p,
            r,
            json!([{"functionCall": {"name": name,
                "args": serde_json::from_str::<Value>(arguments).unwrap_or(Value::Null)}}]),
            Some("STOP"),
            gemini_usage(&u),
        ),
        (Api::Gemini, _) => gemini_answer(
            p,
            r,
            json!([{"text": content}]),
            Some("STOP"),
            gemini_usage(&u),
        ),
        (Api::Bedrock, Shape::Tool { name, arguments }) => json!({
            "output": {"message": {"role": "assistant", "content": [{"toolUse": {
                "toolUseId": format!("tooluse_sim{}", p.seq), "name": name,
                "input": serde_json::from_str::<Value>(arguments).unwrap_or(Value::Null)}}]}},
            "stopReason": "tool_use", "usage": bedrock_usage(&u), "metrics": {"latencyMs": 1},
        }),
        (Api::Bedrock, _) => json!({
            "output": {"message": {"role": "assistant", "content": [{"text": content}]}},
            "stopReason": "end_turn", "usage": bedrock_usage(&u), "metrics": {"latencyMs": 1},
        }),
    };
    Bytes::from(v.to_string())
}

/// One streamed answer's frames in its wire format.
struct Frames<'a> {
    p: &'a AnswerPlan,
    r: &'a Render,
    oid: String,
}

impl Frames<'_> {
    fn openai(&self, delta: Value, finish: Value) -> Step {
        let v = json!({"id": self.oid, "object": "chat.completion.chunk", "created": 0,
            "model": self.r.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        Step::Frame(sse::frame(v.to_string().as_bytes()))
    }

    fn event(&self, name: &str, v: Value) -> Step {
        Step::Frame(Bytes::from(format!("event: {name}\ndata: {v}\n\n")))
    }

    /// Gemini's events end in CRLF pairs, as Google's servers send them.
    fn gemini(&self, parts: Value, finish: Option<&str>, u: Value) -> Step {
        let v = gemini_answer(self.p, self.r, parts, finish, u);
        Step::Frame(Bytes::from(format!("data: {v}\r\n\r\n")))
    }

    /// What comes before the first token: Anthropic's message and block starts.
    fn opening(&self, tool: Option<&str>, u: &Usage) -> Vec<Step> {
        if self.r.api == Api::Bedrock {
            let mut out = vec![bedrock_event("messageStart", &json!({"role": "assistant"}))];
            if let Some(name) = tool {
                out.push(bedrock_event(
                    "contentBlockStart",
                    &json!({"start": {"toolUse": {"toolUseId": format!("tooluse_sim{}", self.p.seq),
                        "name": name}}, "contentBlockIndex": 0}),
                ));
            }
            return out;
        }
        if self.r.api != Api::Anthropic {
            return Vec::new();
        }
        let block = match tool {
            Some(name) => json!({"type": "tool_use", "id": format!("toolu_sim{}", self.p.seq),
                "name": name, "input": {}}),
            None => json!({"type": "text", "text": ""}),
        };
        vec![
            self.event(
                "message_start",
                json!({"type": "message_start", "message": {
                "id": self.oid, "type": "message", "role": "assistant", "model": self.r.model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": anthropic_usage(u, 1)}}),
            ),
            self.event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": block}),
            ),
        ]
    }

    /// The frame of tokens `t`, the first when `first`; none for a Gemini function call,
    /// which is sent whole at the end.
    fn piece(&self, tool: Option<&str>, first: bool, t: String) -> Option<Step> {
        Some(match (self.r.api, tool) {
            (Api::Openai, Some(name)) if first => self.openai(
                json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0,
                    "id": format!("call_sim{}", self.p.seq), "type": "function",
                    "function": {"name": name, "arguments": t}}]}),
                Value::Null,
            ),
            (Api::Openai, Some(_)) => self.openai(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": t}}]}),
                Value::Null,
            ),
            (Api::Openai, None) if first => {
                self.openai(json!({"role": "assistant", "content": t}), Value::Null)
            }
            (Api::Openai, None) => self.openai(json!({"content": t}), Value::Null),
            (Api::Anthropic, Some(_)) => self.event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": t}}),
            ),
            (Api::Anthropic, None) => self.event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": t}}),
            ),
            (Api::Gemini, Some(_)) => return None,
            (Api::Bedrock, Some(_)) => bedrock_event(
                "contentBlockDelta",
                &json!({"delta": {"toolUse": {"input": t}}, "contentBlockIndex": 0}),
            ),
            (Api::Bedrock, None) => bedrock_event(
                "contentBlockDelta",
                &json!({"delta": {"text": t}, "contentBlockIndex": 0}),
            ),
            (Api::Gemini, None) => self.gemini(
                json!([{"text": t}]),
                None,
                json!({"promptTokenCount": self.p.prompt_tokens}),
            ),
        })
    }

    /// What ends the answer: the finish, the usage, the terminator.
    fn ending(&self, tool: Option<&str>, u: Usage) -> Vec<Step> {
        match self.r.api {
            Api::Openai => {
                let finish = if tool.is_some() { "tool_calls" } else { "stop" };
                let mut out = vec![self.openai(json!({}), Value::from(finish))];
                if self.r.include_usage {
                    let v = json!({"id": self.oid, "object": "chat.completion.chunk",
                        "created": 0, "model": self.r.model,
                        "choices": [], "usage": to_openai_json(&u)});
                    out.push(Step::Frame(sse::frame(v.to_string().as_bytes())));
                }
                out.push(Step::Usage(u));
                out.push(Step::Frame(sse::frame(sse::DONE)));
                out
            }
            Api::Anthropic => {
                let stop = if tool.is_some() {
                    "tool_use"
                } else {
                    "end_turn"
                };
                vec![
                    self.event(
                        "content_block_stop",
                        json!({"type": "content_block_stop", "index": 0}),
                    ),
                    self.event(
                        "message_delta",
                        json!({"type": "message_delta",
                        "delta": {"stop_reason": stop, "stop_sequence": null},
                        "usage": {"output_tokens": u.completion_tokens}}),
                    ),
                    Step::Usage(u),
                    self.event("message_stop", json!({"type": "message_stop"})),
                ]
            }
            Api::Gemini => {
                let parts = match &self.r.shape {
                    Shape::Tool { name, arguments } => json!([{"functionCall": {"name": name,
                        "args": serde_json::from_str::<Value>(arguments).unwrap_or(Value::Null)}}]),
                    _ => json!([{"text": ""}]),
                };
                vec![
                    Step::Usage(u),
                    self.gemini(parts, Some("STOP"), gemini_usage(&u)),
                ]
            }
            Api::Bedrock => {
                let stop = if tool.is_some() {
                    "tool_use"
                } else {
                    "end_turn"
                };
                vec![
                    bedrock_event("contentBlockStop", &json!({"contentBlockIndex": 0})),
                    bedrock_event("messageStop", &json!({"stopReason": stop})),
                    Step::Usage(u),
                    bedrock_event(
                        "metadata",
                        &json!({"usage": bedrock_usage(&u), "metrics": {"latencyMs": 1}}),
                    ),
                ]
            }
        }
    }
}

fn stream(p: &AnswerPlan, r: &Render) -> Vec<Step> {
    let frames = Frames {
        p,
        r,
        oid: id(p, r.api),
    };
    let u = usage_of(p);
    let tool = match &r.shape {
        Shape::Tool { name, .. } => Some(name.as_str()),
        _ => None,
    };
    let mut steps = vec![Step::Wait(p.ttft)];
    steps.extend(frames.opening(tool, &u));
    let chunk = p.tokens_per_chunk.max(1);
    let mut sent = 0;
    while sent < p.output_tokens {
        let n = chunk.min(p.output_tokens - sent);
        if sent > 0 {
            steps.push(Step::Wait(p.per_token.saturating_mul(n)));
        }
        if let Some((after, stall)) = p.mid_stream_stall
            && sent <= after
            && after < sent + n
            && sent > 0
        {
            steps.push(Step::Wait(stall));
        }
        let t = match &p.content {
            Some(c) => piece(c, sent, n),
            None => text(sent, n),
        };
        steps.extend(frames.piece(tool, sent == 0, t));
        sent += n;
    }
    steps.extend(frames.ending(tool, u));
    steps
}

/// An error body in the upstream's format.
pub fn error_body(api: Api, status: u16, message: &str) -> Bytes {
    let v = match api {
        Api::Openai => {
            let (t, code) = match status {
                429 => ("requests", "rate_limit_exceeded"),
                503 => ("server_error", "overloaded"),
                _ => ("server_error", "internal_error"),
            };
            json!({"error": {"message": message, "type": t, "param": null, "code": code}})
        }
        Api::Anthropic => {
            let t = match status {
                429 => "rate_limit_error",
                503 | 529 => "overloaded_error",
                _ => "api_error",
            };
            json!({"type": "error", "error": {"type": t, "message": message}})
        }
        Api::Gemini => {
            let s = match status {
                400 => "INVALID_ARGUMENT",
                401 => "UNAUTHENTICATED",
                403 => "PERMISSION_DENIED",
                404 => "NOT_FOUND",
                429 => "RESOURCE_EXHAUSTED",
                503 => "UNAVAILABLE",
                _ => "INTERNAL",
            };
            json!({"error": {"code": status, "message": message, "status": s}})
        }
        Api::Bedrock => json!({"message": message}),
    };
    Bytes::from(v.to_string())
}

#[cfg(test)]
mod tests;
