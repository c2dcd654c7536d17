use serde_json::{Value, json};
use sluice_core::ChatRequest;

use super::*;

fn chat(v: Value) -> Value {
    let out = to_chat(v.to_string().as_bytes()).unwrap();
    // The internal form is a request sluice's own check accepts.
    ChatRequest::parse(&out).unwrap();
    serde_json::from_slice(&out).unwrap()
}

fn refused(v: Value) -> (String, String) {
    let e = to_chat(v.to_string().as_bytes()).unwrap_err();
    (
        e.param.unwrap_or_default().into_owned(),
        e.message.into_owned(),
    )
}

#[test]
fn a_conversation_with_tools_becomes_chat_messages() {
    let out = chat(json!({
        "model": "claude", "max_tokens": 300,
        "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "weather in Oslo?"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "use the tool", "signature": "sig"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "tu_1", "name": "weather", "input": {"city": "Oslo"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "tu_1", "content": [{"type": "text", "text": "-3C"}]},
                {"type": "text", "text": "and tomorrow?"}
            ]}
        ],
        "tools": [{"name": "weather", "description": "w", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
        "stop_sequences": ["END"], "temperature": 0.2, "top_k": 5,
        "metadata": {"user_id": "u-9"}, "thinking": {"type": "enabled", "budget_tokens": 2048},
        "vendor_option": {"x": 1}
    }));
    let m = out["messages"].as_array().unwrap();
    assert_eq!(m.len(), 5);
    assert_eq!(m[0]["role"], "system");
    assert_eq!(m[0]["content"][0]["cache_control"]["type"], "ephemeral");
    assert_eq!(m[2]["content"], "Checking.");
    assert_eq!(m[2]["tool_calls"][0]["id"], "tu_1");
    assert_eq!(
        m[2]["tool_calls"][0]["function"]["arguments"],
        r#"{"city":"Oslo"}"#
    );
    assert_eq!(
        m[3],
        json!({"role": "tool", "tool_call_id": "tu_1", "content": "-3C"})
    );
    assert_eq!(m[4], json!({"role": "user", "content": "and tomorrow?"}));
    assert_eq!(out["tool_choice"], "required");
    assert_eq!(out["parallel_tool_calls"], false);
    assert_eq!(
        out["tools"][0]["function"]["parameters"],
        json!({"type": "object"})
    );
    assert_eq!(out["stop"], json!(["END"]));
    assert_eq!(out["user"], "u-9");
    assert_eq!(out["max_tokens"], 300);
    assert_eq!(
        out["vendor_option"],
        json!({"x": 1}),
        "unknown fields go on"
    );
    assert!(out.get("top_k").is_none() && out.get("thinking").is_none());
}

#[test]
fn images_and_documents_become_parts() {
    let out = chat(
        json!({"model": "m", "max_tokens": 5, "stream": true, "messages": [
            {"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAA"}},
                {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
                {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "contract"}},
                {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVB"}}
            ]}
        ]}),
    );
    let parts = &out["messages"][0]["content"];
    assert_eq!(parts[0]["image_url"]["url"], "data:image/png;base64,AAA");
    assert_eq!(parts[1]["image_url"]["url"], "https://x/y.png");
    assert_eq!(parts[2], json!({"type": "text", "text": "contract"}));
    assert_eq!(
        parts[3]["file"]["file_data"],
        "data:application/pdf;base64,JVB"
    );
    assert_eq!(out["stream_options"]["include_usage"], true);
}

#[test]
fn every_refusal_names_its_field() {
    let base = |messages: Value| json!({"model": "m", "max_tokens": 5, "messages": messages});
    let cases = [
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}]}),
            "max_tokens",
        ),
        (
            json!({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}),
            "model",
        ),
        (
            json!({"model": "m", "max_tokens": 0, "messages": [{"role": "user", "content": "x"}]}),
            "max_tokens",
        ),
        (base(json!([])), "messages"),
        (base(json!([{"role": "user"}])), "messages[0].content"),
        (
            base(json!([{"role": "system", "content": "x"}])),
            "messages[0].role",
        ),
        (base(json!([{"content": "x"}])), "messages[0].role"),
        (
            base(
                json!([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nope"}]}]),
            ),
            "messages[0].content[0].tool_use_id",
        ),
        (
            base(
                json!([{"role": "user", "content": [{"type": "image", "source": {"type": "url"}}]}]),
            ),
            "messages[0].content[0].source.url",
        ),
        (
            base(
                json!([{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "b", "input": {}}]}]),
            ),
            "messages[0].content[0].type",
        ),
        (
            base(json!([{"role": "user", "content": [{"type": "text"}]}])),
            "messages[0].content[0].text",
        ),
        (
            base(json!([{"role": "user", "content": 5}])),
            "messages[0].content",
        ),
    ];
    for (body, field) in cases {
        let (param, message) = refused(body.clone());
        assert_eq!(param, field, "{body}: {message}");
    }
    let mut body = base(json!([{"role": "user", "content": "x"}]));
    body["thinking"] = json!({"type": "enabled", "budget_tokens": 10});
    assert_eq!(refused(body).0, "thinking.budget_tokens");
    let mut body = base(json!([{"role": "user", "content": "x"}]));
    body["tools"] = json!([{"type": "web_search_20250305", "name": "web_search"}]);
    assert_eq!(refused(body).0, "tools[0].type");
    assert_eq!(
        to_chat(b"{nope").unwrap_err().kind,
        sluice_core::ErrorKind::InvalidJson
    );
    // Sampling in Anthropic's ranges: temperature and top_p within 0..1, top_k a count.
    for (field, value, says) in [
        ("temperature", json!(1.5), "between 0 and 1, got 1.5"),
        ("temperature", json!(-1), "between 0 and 1"),
        ("top_p", json!(2), "between 0 and 1"),
        ("top_k", json!(-3), "non-negative integer"),
        ("top_k", json!(2.5), "non-negative integer"),
    ] {
        let mut body = base(json!([{"role": "user", "content": "x"}]));
        body[field] = value;
        let (param, message) = refused(body);
        assert_eq!(param, field, "{message}");
        assert!(message.contains(says), "{field}: {message}");
    }
    let mut body = base(json!([{"role": "user", "content": "x"}]));
    body["temperature"] = json!(1);
    body["top_k"] = json!(0);
    chat(body);
}

#[test]
fn an_answer_becomes_a_message_with_uncached_input() {
    let chat = json!({
        "id": "chatcmpl-1", "model": "gpt", "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Sure.", "reasoning_content": "hmm",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]
        }}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 7,
            "prompt_tokens_details": {"cached_tokens": 60, "cache_write_tokens": 10}}
    });
    let out: Value =
        serde_json::from_slice(&from_chat(chat.to_string().as_bytes()).unwrap()).unwrap();
    assert_eq!(out["id"], "msg_chatcmpl-1");
    assert_eq!(out["type"], "message");
    assert_eq!(out["stop_reason"], "tool_use");
    assert_eq!(out["content"][0]["type"], "thinking");
    assert_eq!(out["content"][1], json!({"type": "text", "text": "Sure."}));
    assert_eq!(out["content"][2]["input"], json!({"a": 1}));
    assert_eq!(
        out["usage"],
        json!({"input_tokens": 30, "output_tokens": 7,
            "cache_read_input_tokens": 60, "cache_creation_input_tokens": 10})
    );
}

fn events(bytes: &[u8]) -> Vec<(String, Value)> {
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let mut lines = e.lines();
            let name = lines
                .next()
                .unwrap()
                .strip_prefix("event: ")
                .unwrap()
                .to_string();
            let data = lines.next().unwrap().strip_prefix("data: ").unwrap();
            (name, serde_json::from_str(data).unwrap())
        })
        .collect()
}

#[test]
fn a_stream_becomes_events_in_order_however_it_is_split() {
    let chunks = [
        json!({"id": "c", "model": "g", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
        json!({"id": "c", "model": "g", "choices": [{"index": 0, "delta": {"reasoning_content": "think"}}]}),
        json!({"id": "c", "model": "g", "choices": [{"index": 0, "delta": {"content": "Hel"}}]}),
        json!({"id": "c", "model": "g", "choices": [{"index": 0, "delta": {"content": "lo"}}]}),
        json!({"id": "c", "model": "g", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "t1", "type": "function", "function": {"name": "f", "arguments": ""}}]}}]}),
        json!({"id": "c", "model": "g", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": "{\"a\":"}}]}}]}),
        json!({"id": "c", "model": "g", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": "1}"}}]}}]}),
        json!({"id": "c", "model": "g", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        json!({"id": "c", "model": "g", "choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 4}}),
    ];
    let mut whole = Vec::new();
    for c in &chunks {
        whole.extend_from_slice(format!("data: {c}\n\n").as_bytes());
    }
    whole.extend_from_slice(b"data: [DONE]\n\n");
    // Fed in pieces of 7 bytes: events are cut only where they end.
    let mut r = Reframer::new();
    let mut out = Vec::new();
    for piece in whole.chunks(7) {
        out.extend(r.feed(piece));
    }
    out.extend(r.finish());
    assert!(r.ended());
    let evs = events(&out);
    let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    assert_eq!(evs[0].1["message"]["id"], "msg_c");
    assert_eq!(evs[3].1["delta"]["thinking"], "think");
    assert_eq!(evs[4].1["delta"]["type"], "signature_delta");
    assert_eq!(evs[7].1["delta"]["text"], "Hel");
    assert_eq!(evs[10].1["content_block"]["id"], "t1");
    assert_eq!(evs[12].1["delta"]["partial_json"], "1}");
    assert_eq!(evs[13].1["index"], 2);
    assert_eq!(evs[14].1["delta"]["stop_reason"], "tool_use");
    assert_eq!(evs[14].1["usage"]["input_tokens"], 12);
    assert_eq!(evs[14].1["usage"]["output_tokens"], 4);
}

#[test]
fn a_cut_or_failed_stream_ends_with_an_error_event() {
    let mut r = Reframer::new();
    let mut out = r.feed(b"data: {\"id\":\"c\",\"model\":\"g\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n");
    out.extend(r.finish());
    let evs = events(&out);
    assert_eq!(evs.last().unwrap().0, "error");
    assert_eq!(evs.last().unwrap().1["error"]["type"], "api_error");

    let mut r = Reframer::new();
    let e = sluice_core::GatewayError::new(sluice_core::ErrorKind::Overloaded, "busy");
    let evs = events(&r.fail(&e));
    assert_eq!(evs[0].1["error"]["type"], "overloaded_error");
    assert!(r.finish().is_empty(), "nothing after the error");

    let mut r = Reframer::new();
    let evs = events(&r.feed(b"data: {\"error\":{\"message\":\"boom\",\"type\":\"x\"}}\n\n"));
    assert_eq!(evs[0].0, "error");
    assert_eq!(evs[0].1["error"]["message"], "boom");
}

#[test]
fn count_tokens_needs_no_max_tokens() {
    let out =
        count_request(br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#).unwrap();
    assert!(ChatRequest::parse(&out).is_ok());
}
