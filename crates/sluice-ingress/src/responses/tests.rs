use serde_json::{Value, json};
use sluice_core::ChatRequest;

use super::*;

fn chat(v: Value) -> Value {
    let out = to_chat(v.to_string().as_bytes()).unwrap();
    ChatRequest::parse(&out).unwrap();
    serde_json::from_slice(&out).unwrap()
}

fn refused(v: Value) -> String {
    let e = to_chat(v.to_string().as_bytes()).unwrap_err();
    e.param.unwrap_or_default().into_owned()
}

#[test]
fn items_become_messages_and_function_calls_tool_calls() {
    let out = chat(json!({
        "model": "gpt", "instructions": "be brief", "max_output_tokens": 50,
        "input": [
            {"role": "user", "content": "weather?"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
            {"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{\"city\":\"Oslo\"}"},
            {"type": "function_call", "call_id": "c2", "name": "w", "arguments": "{\"city\":\"Rome\"}"},
            {"type": "function_call_output", "call_id": "c1", "output": "-3C"},
            {"type": "function_call_output", "call_id": "c2", "output": "18C"},
            {"type": "reasoning", "id": "r", "summary": []},
            {"role": "user", "content": [
                {"type": "input_text", "text": "and this?"},
                {"type": "input_image", "image_url": "https://x/i.png", "detail": "low"}
            ]}
        ],
        "tools": [{"type": "function", "name": "w", "parameters": {"type": "object"}, "strict": true}],
        "tool_choice": {"type": "function", "name": "w"},
        "text": {"format": {"type": "json_schema", "name": "r", "schema": {"type": "object"}}},
        "temperature": 0.5, "store": false, "stream": true
    }));
    let m = out["messages"].as_array().unwrap();
    assert_eq!(m[0], json!({"role": "system", "content": "be brief"}));
    assert_eq!(
        m[2]["content"][0],
        json!({"type": "text", "text": "Checking."})
    );
    assert_eq!(
        m[2]["tool_calls"].as_array().unwrap().len(),
        2,
        "calls join the assistant turn"
    );
    assert_eq!(
        m[3],
        json!({"role": "tool", "tool_call_id": "c1", "content": "-3C"})
    );
    assert_eq!(
        m[5]["content"][1]["image_url"],
        json!({"url": "https://x/i.png", "detail": "low"})
    );
    assert_eq!(m.len(), 6, "reasoning left out");
    assert_eq!(out["max_tokens"], 50);
    assert_eq!(out["tools"][0]["function"]["strict"], true);
    assert_eq!(out["tool_choice"]["function"]["name"], "w");
    assert_eq!(out["response_format"]["json_schema"]["name"], "r");
    assert_eq!(out["stream_options"]["include_usage"], true);
    assert!(out.get("store").is_none());
}

#[test]
fn state_and_bad_items_are_refused_by_name() {
    let base = |extra: Value| {
        let mut b = json!({"model": "m", "input": "hi"});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };
    assert_eq!(
        refused(base(json!({"previous_response_id": "resp_1"}))),
        "previous_response_id"
    );
    assert_eq!(refused(base(json!({"store": true}))), "store");
    assert_eq!(refused(base(json!({"background": true}))), "background");
    assert_eq!(
        refused(base(json!({"tools": [{"type": "web_search"}]}))),
        "tools[0].type"
    );
    assert_eq!(refused(json!({"model": "m"})), "input");
    assert_eq!(refused(json!({"input": "x"})), "model");
    assert_eq!(
        refused(
            json!({"model": "m", "input": [{"type": "function_call_output", "call_id": "x", "output": "r"}]})
        ),
        "input[0].call_id"
    );
    assert_eq!(
        refused(json!({"model": "m", "input": [{"role": "user"}]})),
        "input[0].content"
    );
    assert_eq!(
        refused(json!({"model": "m", "input": [{"role": "robot", "content": "x"}]})),
        "input[0].role"
    );
    assert_eq!(
        refused(
            json!({"model": "m", "input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]})
        ),
        "input[0].content[0].image_url"
    );
}

#[test]
fn an_answer_becomes_a_response() {
    let chat = json!({"id": "c9", "model": "gpt", "created": 7,
        "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": "Hi",
            "tool_calls": [{"id": "k", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 4}}});
    let out: Value =
        serde_json::from_slice(&from_chat(chat.to_string().as_bytes()).unwrap()).unwrap();
    assert_eq!(out["object"], "response");
    assert_eq!(out["id"], "resp_c9");
    assert_eq!(out["status"], "incomplete");
    assert_eq!(out["incomplete_details"]["reason"], "max_output_tokens");
    assert_eq!(out["output"][0]["content"][0]["text"], "Hi");
    assert_eq!(out["output"][1]["type"], "function_call");
    assert_eq!(out["output"][1]["call_id"], "k");
    assert_eq!(out["usage"]["input_tokens_details"]["cached_tokens"], 4);
    assert_eq!(out["usage"]["total_tokens"], 13);
}

fn events(bytes: &[u8]) -> Vec<Value> {
    String::from_utf8(bytes.to_vec())
        .unwrap()
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            serde_json::from_str(e.lines().nth(1).unwrap().strip_prefix("data: ").unwrap()).unwrap()
        })
        .collect()
}

#[test]
fn a_stream_becomes_responses_events_in_order() {
    let frames = [
        json!({"id": "c", "model": "g", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "He"}}]}),
        json!({"id": "c", "model": "g", "choices": [{"index": 0, "delta": {"content": "llo"}}]}),
        json!({"id": "c", "model": "g", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "t", "type": "function", "function": {"name": "f", "arguments": "{\"a\""}}]}}]}),
        json!({"id": "c", "model": "g", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": ":1}"}}]}}]}),
        json!({"id": "c", "model": "g", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        json!({"id": "c", "model": "g", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}}),
    ];
    let mut whole = Vec::new();
    for f in &frames {
        whole.extend_from_slice(format!("data: {f}\n\n").as_bytes());
    }
    whole.extend_from_slice(b"data: [DONE]\n\n");
    let mut r = Restream::new();
    let mut out = Vec::new();
    for piece in whole.chunks(5) {
        out.extend(r.feed(piece));
    }
    out.extend(r.finish());
    let evs = events(&out);
    let kinds: Vec<&str> = evs.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    let seq: Vec<u64> = evs
        .iter()
        .map(|e| e["sequence_number"].as_u64().unwrap())
        .collect();
    assert_eq!(seq, (0..seq.len() as u64).collect::<Vec<_>>());
    assert_eq!(evs[6]["text"], "Hello");
    assert_eq!(evs[12]["arguments"], "{\"a\":1}");
    let done = &evs[14]["response"];
    assert_eq!(done["status"], "completed");
    assert_eq!(done["output"].as_array().unwrap().len(), 2);
    assert_eq!(done["usage"]["total_tokens"], 7);
}

#[test]
fn a_cut_stream_ends_with_an_error_event() {
    let mut r = Restream::new();
    let mut out = r.feed(
        b"data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n",
    );
    out.extend(r.finish());
    let evs = events(&out);
    assert_eq!(evs.last().unwrap()["type"], "error");
    assert!(r.ended());
    assert!(r.finish().is_empty());
}
