//! Turns a planned answer into the timed steps a client sees: waits and frames, in OpenAI's or
//! Anthropic's wire format. The in-process provider and the HTTP server both play these steps.

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
    }
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
    };
    Bytes::from(v.to_string())
}

fn stream(p: &AnswerPlan, r: &Render) -> Vec<Step> {
    let mut steps = vec![Step::Wait(p.ttft)];
    let chunk = p.tokens_per_chunk.max(1);
    let oid = id(p, r.api);
    let openai = |delta: Value, finish: Value| {
        let v = json!({"id": oid, "object": "chat.completion.chunk", "created": 0, "model": r.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        Step::Frame(sse::frame(v.to_string().as_bytes()))
    };
    let event =
        |name: &str, v: Value| Step::Frame(Bytes::from(format!("event: {name}\ndata: {v}\n\n")));
    let u = usage_of(p);
    let tool = match &r.shape {
        Shape::Tool { name, .. } => Some(name.as_str()),
        _ => None,
    };
    if r.api == Api::Anthropic {
        steps.push(event(
            "message_start",
            json!({"type": "message_start", "message": {
            "id": oid, "type": "message", "role": "assistant", "model": r.model, "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": anthropic_usage(&u, 1)}}),
        ));
        let block = match tool {
            Some(name) => json!({"type": "tool_use", "id": format!("toolu_sim{}", p.seq),
                "name": name, "input": {}}),
            None => json!({"type": "text", "text": ""}),
        };
        steps.push(event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": block}),
        ));
    }
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
        steps.push(match (r.api, tool) {
            (Api::Openai, Some(name)) if sent == 0 => openai(
                json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0,
                    "id": format!("call_sim{}", p.seq), "type": "function",
                    "function": {"name": name, "arguments": t}}]}),
                Value::Null,
            ),
            (Api::Openai, Some(_)) => openai(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": t}}]}),
                Value::Null,
            ),
            (Api::Openai, None) if sent == 0 => {
                openai(json!({"role": "assistant", "content": t}), Value::Null)
            }
            (Api::Openai, None) => openai(json!({"content": t}), Value::Null),
            (Api::Anthropic, Some(_)) => event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": t}}),
            ),
            (Api::Anthropic, None) => event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": t}}),
            ),
        });
        sent += n;
    }
    match r.api {
        Api::Openai => {
            let finish = if tool.is_some() { "tool_calls" } else { "stop" };
            steps.push(openai(json!({}), Value::from(finish)));
            if r.include_usage {
                let v = json!({"id": oid, "object": "chat.completion.chunk", "created": 0, "model": r.model,
                    "choices": [], "usage": to_openai_json(&u)});
                steps.push(Step::Frame(sse::frame(v.to_string().as_bytes())));
            }
            steps.push(Step::Usage(u));
            steps.push(Step::Frame(sse::frame(sse::DONE)));
        }
        Api::Anthropic => {
            steps.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ));
            let stop = if tool.is_some() {
                "tool_use"
            } else {
                "end_turn"
            };
            steps.push(event(
                "message_delta",
                json!({"type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": null},
                "usage": {"output_tokens": u.completion_tokens}}),
            ));
            steps.push(Step::Usage(u));
            steps.push(event("message_stop", json!({"type": "message_stop"})));
        }
    }
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
    };
    Bytes::from(v.to_string())
}

#[cfg(test)]
mod tests;
