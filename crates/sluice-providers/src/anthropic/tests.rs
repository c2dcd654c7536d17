use std::collections::VecDeque;

use serde_json::{Value, json};
use sluice_core::ChatRequest;

use super::*;
use crate::StreamEvent;
use crate::sse::{SseEvent, SseParser};

fn request(body: Value) -> ChatRequest {
    let Value::Object(map) = body else {
        panic!("object")
    };
    ChatRequest::from_body(map).unwrap()
}

#[test]
fn request_translation_maps_roles_tools_and_limits() {
    let req = request(json!({
        "model": "review",
        "messages": [
            {"role": "system", "content": "You review contracts."},
            {"role": "user", "content": [
                {"type": "text", "text": "Clause 4:", "cache_control": {"type": "ephemeral"}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
            ]},
            {"role": "assistant", "content": "Checking.", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"rule\":7}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "rule 7: no auto-renewal"},
            {"role": "user", "content": "So?"}
        ],
        "max_tokens": 300,
        "stop": "END",
        "temperature": 0.2,
        "tools": [{"type": "function", "function": {"name": "lookup", "description": "d", "parameters": {"type": "object"}}}],
        "tool_choice": "required",
        "user": "u-9",
        "presence_penalty": 0.5,
        "top_k": 40,
        "stream": true
    }));
    let out = translate_request(&req, "claude-sonnet-4-5", 4096).unwrap();
    assert_eq!(out["model"], "claude-sonnet-4-5");
    assert_eq!(
        out["system"],
        json!([{"type": "text", "text": "You review contracts."}])
    );
    assert_eq!(out["max_tokens"], 300);
    assert_eq!(out["stop_sequences"], json!(["END"]));
    assert_eq!(out["temperature"], 0.2);
    assert_eq!(out["top_k"], 40, "unknown fields are forwarded");
    assert!(
        out.get("presence_penalty").is_none(),
        "OpenAI-only fields are dropped"
    );
    assert_eq!(out["tool_choice"], json!({"type": "any"}));
    assert_eq!(out["tools"][0]["input_schema"], json!({"type": "object"}));
    assert_eq!(out["metadata"], json!({"user_id": "u-9"}));
    assert_eq!(out["stream"], true);
    let msgs = out["messages"].as_array().unwrap();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        ["user", "assistant", "user"],
        "tool result and next user turn merge"
    );
    assert_eq!(
        msgs[0]["content"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert_eq!(msgs[0]["content"][1]["source"]["media_type"], "image/png");
    assert_eq!(msgs[1]["content"][1]["type"], "tool_use");
    assert_eq!(msgs[1]["content"][1]["input"], json!({"rule": 7}));
    assert_eq!(msgs[2]["content"][0]["type"], "tool_result");
    assert_eq!(msgs[2]["content"][0]["tool_use_id"], "call_1");
    assert_eq!(msgs[2]["content"][1]["text"], "So?");
}

#[test]
fn default_max_tokens_applies_when_the_client_sends_none() {
    let req = request(json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}));
    assert_eq!(
        translate_request(&req, "x", 1234).unwrap()["max_tokens"],
        1234
    );
}

#[test]
fn bad_tool_arguments_name_the_field() {
    let req = request(json!({"model": "m", "messages": [
        {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{oops"}}]}
    ]}));
    let e = translate_request(&req, "x", 10).unwrap_err();
    assert_eq!(
        e.param.as_deref(),
        Some("messages[0].tool_calls[0].function.arguments")
    );
}

#[test]
fn response_translation_carries_text_tools_and_cache_usage() {
    let raw = json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [
            {"type": "text", "text": "Clause 4 "},
            {"type": "text", "text": "renews."},
            {"type": "tool_use", "id": "toolu_1", "name": "flag", "input": {"severity": "high"}}
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 10, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 5, "output_tokens": 20}
    });
    let (body, usage) = translate_response(raw.to_string().as_bytes()).unwrap();
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["choices"][0]["message"]["content"], "Clause 4 renews.");
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    let call = &v["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "flag");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"severity": "high"}));
    assert_eq!(usage.prompt_tokens, 1015);
    assert_eq!(usage.cached_tokens, 1000);
    assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 1000);
    assert_eq!(v["usage"]["total_tokens"], 1035);
}

fn feed(t: &mut StreamTranslator, sse_text: &str) -> Vec<StreamEvent> {
    let mut parser = SseParser::new();
    let mut events: Vec<SseEvent> = Vec::new();
    parser.push(sse_text.as_bytes(), &mut events).unwrap();
    let mut out = VecDeque::new();
    for ev in &events {
        t.event(ev, &mut out).unwrap();
    }
    out.into_iter().collect()
}

fn frames(events: &[StreamEvent]) -> Vec<Value> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Frame(b) => {
                let s = std::str::from_utf8(b).unwrap().trim();
                let data = s.strip_prefix("data: ").unwrap();
                if data == "[DONE]" {
                    Some(Value::from("[DONE]"))
                } else {
                    Some(serde_json::from_str(data).unwrap())
                }
            }
            StreamEvent::Usage(_) | StreamEvent::Native(_) => None,
        })
        .collect()
}

pub(crate) const STREAM: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_s\",\"model\":\"claude-x\",\"usage\":{\"input_tokens\":12,\"cache_read_input_tokens\":900,\"output_tokens\":1}}}\n\n",
    "event: ping\ndata: {\"type\":\"ping\"}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"lo\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_9\",\"name\":\"flag\",\"input\":{}}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"1}\"}}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":42}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

#[test]
fn stream_translation_produces_openai_chunks_and_usage() {
    let mut t = StreamTranslator::new(true);
    let out = feed(&mut t, STREAM);
    assert!(t.finished());
    let f = frames(&out);
    assert_eq!(f[0]["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(f[0]["id"], "msg_s");
    let text: String = f
        .iter()
        .filter_map(|c| {
            c.pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
        })
        .collect();
    assert_eq!(text, "Hello");
    let tool_start = f
        .iter()
        .find(|c| c.pointer("/choices/0/delta/tool_calls/0/id").is_some())
        .unwrap();
    assert_eq!(
        tool_start["choices"][0]["delta"]["tool_calls"][0]["function"]["name"],
        "flag"
    );
    let args: String = f
        .iter()
        .filter_map(|c| {
            c.pointer("/choices/0/delta/tool_calls/0/function/arguments")
                .and_then(Value::as_str)
        })
        .collect();
    assert_eq!(args, "{\"a\":1}");
    let finish = f.iter().find_map(|c| {
        c.pointer("/choices/0/finish_reason")
            .and_then(Value::as_str)
    });
    assert_eq!(finish, Some("tool_calls"));
    let usage_chunk = &f[f.len() - 2];
    assert_eq!(usage_chunk["choices"], json!([]));
    assert_eq!(usage_chunk["usage"]["prompt_tokens"], 912);
    assert_eq!(usage_chunk["usage"]["completion_tokens"], 42);
    assert_eq!(f.last().unwrap(), &Value::from("[DONE]"));
    let usage = out.iter().find_map(|e| match e {
        StreamEvent::Usage(u) => Some(*u),
        StreamEvent::Frame(_) | StreamEvent::Native(_) => None,
    });
    assert_eq!(usage.unwrap().cached_tokens, 900);
}

#[test]
fn without_include_usage_no_usage_chunk_is_sent() {
    let mut t = StreamTranslator::new(false);
    let out = feed(&mut t, STREAM);
    assert!(frames(&out).iter().all(|f| f.get("usage").is_none()));
    assert!(
        out.iter().any(|e| matches!(e, StreamEvent::Usage(_))),
        "usage still reported to sluice"
    );
}

#[test]
fn an_error_event_becomes_an_upstream_error() {
    let mut t = StreamTranslator::new(false);
    let mut parser = SseParser::new();
    let mut events = Vec::new();
    parser
        .push(b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n", &mut events)
        .unwrap();
    let mut out = VecDeque::new();
    let e = t.event(&events[0], &mut out).unwrap_err();
    assert_eq!(e.kind, sluice_core::ErrorKind::UpstreamServerError);
    assert!(e.message.contains("Overloaded"));
}

#[test]
fn anthropic_errors_become_openai_errors() {
    let raw = br#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#;
    let out: Value = serde_json::from_slice(&error_to_openai(raw).unwrap()).unwrap();
    assert_eq!(out["error"]["message"], "slow down");
    assert_eq!(out["error"]["type"], "rate_limit_error");
    assert!(error_to_openai(b"not json").is_none());
}

#[tokio::test(start_paused = true)]
async fn breakpoints_of_a_prefix_reused_every_twenty_minutes_ask_for_an_hour() {
    let up = Anthropic::new("claude", AnthropicSettings::default()).unwrap();
    let req = request(json!({"model": "review", "messages": [
        {"role": "system", "content": "You review contracts. ".repeat(400)},
        {"role": "user", "content": "Clause 4?"}
    ]}));
    let mut marks = Vec::new();
    for _ in 0..4 {
        let mut v = translate_request(&req, "claude-sonnet-4-5", 4096).unwrap();
        up.place(&mut v, 1024);
        marks.push(v["system"][0]["cache_control"].clone());
        tokio::time::advance(std::time::Duration::from_secs(20 * 60)).await;
    }
    let five = json!({"type": "ephemeral"});
    let hour = json!({"type": "ephemeral", "ttl": "1h"});
    assert_eq!(marks, [five.clone(), five, hour.clone(), hour]);
    // Fixed at five minutes, nothing is learnt.
    let fixed = Anthropic::new(
        "claude",
        AnthropicSettings {
            cache_ttl: CacheTtl::FiveMinutes,
            ..AnthropicSettings::default()
        },
    )
    .unwrap();
    for _ in 0..4 {
        let mut v = translate_request(&req, "claude-sonnet-4-5", 4096).unwrap();
        fixed.place(&mut v, 1024);
        assert_eq!(
            v["system"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );
        tokio::time::advance(std::time::Duration::from_secs(20 * 60)).await;
    }
}
