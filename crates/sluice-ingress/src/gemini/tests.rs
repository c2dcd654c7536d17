use serde_json::{Value, json};
use sluice_core::{ErrorKind, GatewayError};

use super::*;

fn chat(body: Value, stream: bool) -> Value {
    let out = to_chat(body.to_string().as_bytes(), "flash", stream).unwrap();
    serde_json::from_slice(&out).unwrap()
}

#[test]
fn a_conversation_with_a_function_call_becomes_chat_messages() {
    let c = chat(
        json!({
            "systemInstruction": {"parts": [{"text": "Be "}, {"text": "brief."}]},
            "contents": [
                {"role": "user", "parts": [{"text": "weather in Oslo?"},
                    {"inlineData": {"mimeType": "image/png", "data": "AAAA"}}]},
                {"role": "model", "parts": [{"text": "thinking", "thought": true},
                    {"functionCall": {"name": "weather", "args": {"city": "Oslo"}},
                     "thoughtSignature": "sig-1"}]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "weather", "response": {"t": "-3C"}}},
                    {"text": "and tomorrow?"}]}
            ],
            "generationConfig": {"maxOutputTokens": 64, "temperature": 0.1, "topP": 0.9,
                "stopSequences": ["END"], "candidateCount": 1,
                "responseMimeType": "application/json",
                "responseSchema": {"type": "OBJECT", "properties": {"t": {"type": "STRING"}}},
                "thinkingConfig": {"thinkingBudget": 512}},
            "tools": [{"functionDeclarations": [{"name": "weather", "description": "d",
                "parameters": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}}}]},
                {"googleSearch": {}}],
            "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["weather"]}},
            "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}]
        }),
        true,
    );
    assert_eq!(c["model"], "flash");
    assert_eq!(c["stream"], true);
    assert_eq!(c["stream_options"]["include_usage"], true);
    let m = c["messages"].as_array().unwrap();
    assert_eq!(m[0], json!({"role": "system", "content": "Be brief."}));
    assert_eq!(
        m[1]["content"][1]["image_url"]["url"],
        "data:image/png;base64,AAAA"
    );
    assert_eq!(m[2]["role"], "assistant");
    assert_eq!(m[2]["content"], Value::Null, "thoughts are not sent back");
    let call = &m[2]["tool_calls"][0];
    assert_eq!(call["function"]["arguments"], r#"{"city":"Oslo"}"#);
    assert_eq!(
        call["extra_content"]["google"]["thought_signature"],
        "sig-1"
    );
    assert_eq!(m[3]["role"], "tool");
    assert_eq!(m[3]["tool_call_id"], call["id"]);
    assert_eq!(m[3]["content"], r#"{"t":"-3C"}"#);
    assert_eq!(m[4], json!({"role": "user", "content": "and tomorrow?"}));
    assert_eq!(c["max_tokens"], 64);
    assert_eq!(c["top_p"], 0.9);
    assert_eq!(c["stop"], json!(["END"]));
    assert_eq!(c["n"], 1);
    assert_eq!(
        c["response_format"]["json_schema"]["schema"]["properties"]["t"]["type"],
        "string"
    );
    assert_eq!(
        c["generationConfig"],
        json!({"thinkingConfig": {"thinkingBudget": 512}})
    );
    assert_eq!(c["tools"][0]["function"]["parameters"]["type"], "object");
    assert_eq!(c["tools"][1], json!({"googleSearch": {}}));
    assert_eq!(
        c["tool_choice"],
        json!({"type": "function", "function": {"name": "weather"}})
    );
    assert_eq!(c["safetySettings"][0]["threshold"], "BLOCK_NONE");
}

#[test]
fn what_cannot_be_read_is_refused_with_its_field_named() {
    let refused = |body: Value| to_chat(body.to_string().as_bytes(), "flash", false).unwrap_err();
    let cases = [
        (json!({}), "contents"),
        (
            json!({"contents": [{"parts": [{"text": "a"}]}], "extra": 1}),
            "extra",
        ),
        (
            json!({"contents": [{"role": "user", "parts": [{"functionResponse": {"name": "x", "response": {}}}]}]}),
            "contents[0].parts[0].functionResponse",
        ),
        (
            json!({"contents": [{"role": "robot", "parts": []}]}),
            "contents[0].role",
        ),
        (
            json!({"contents": [{"parts": [{"inlineData": {"mimeType": "audio/wav", "data": "x"}}]}]}),
            "contents[0].parts[0].inlineData.mimeType",
        ),
        (
            json!({"contents": [], "toolConfig": {"functionCallingConfig": {"mode": "SOMETIMES"}}}),
            "toolConfig.functionCallingConfig.mode",
        ),
    ];
    for (body, param) in cases {
        let e = refused(body);
        assert_eq!(e.kind, ErrorKind::InvalidRequest, "{param}");
        assert_eq!(e.param.as_deref(), Some(param), "{}", e.message);
    }
    assert_eq!(
        to_chat(b"[1]", "flash", false).unwrap_err().kind,
        ErrorKind::InvalidRequest
    );
    assert_eq!(
        Method::of("flash:generateContent").unwrap(),
        ("flash", Method::Generate)
    );
    assert_eq!(
        Method::of("a:b:streamGenerateContent").unwrap(),
        ("a:b", Method::Stream)
    );
    assert!(Method::of("flash:embedContent").is_err());
    assert!(Method::of("flash").is_err());
    assert!(Method::of(":countTokens").is_err());
}

const CHAT: &str = r#"{"id":"c-1","model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant",
  "content":"It is cold.","reasoning_content":"hmm","tool_calls":[{"id":"call_1","type":"function",
  "function":{"name":"weather","arguments":"{\"city\":\"Oslo\"}"},
  "extra_content":{"google":{"thought_signature":"s"}}}]},"finish_reason":"tool_calls"}],
  "usage":{"prompt_tokens":100,"completion_tokens":30,"prompt_tokens_details":{"cached_tokens":64},
  "completion_tokens_details":{"reasoning_tokens":10}}}"#;

#[test]
fn a_chat_answer_becomes_a_gemini_answer() {
    let out: Value = serde_json::from_slice(&from_chat(CHAT.as_bytes()).unwrap()).unwrap();
    let c = &out["candidates"][0];
    assert_eq!(c["finishReason"], "STOP");
    let parts = c["content"]["parts"].as_array().unwrap();
    assert_eq!(parts[0], json!({"text": "hmm", "thought": true}));
    assert_eq!(parts[1], json!({"text": "It is cold."}));
    assert_eq!(
        parts[2],
        json!({"functionCall": {"name": "weather", "args": {"city": "Oslo"}, "id": "call_1"},
            "thoughtSignature": "s"})
    );
    assert_eq!(
        out["usageMetadata"],
        json!({"promptTokenCount": 100, "candidatesTokenCount": 20, "totalTokenCount": 130,
            "cachedContentTokenCount": 64, "thoughtsTokenCount": 10})
    );
    assert_eq!(out["modelVersion"], "gpt-x");
    let bad = CHAT.replace(r#"{\"city\":\"Oslo\"}"#, "{not json");
    assert_eq!(
        from_chat(bad.as_bytes()).unwrap_err().kind,
        ErrorKind::UpstreamProtocol
    );
}

fn events(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .split("\r\n\r\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

#[test]
fn a_chat_stream_becomes_gemini_events_ending_with_calls_finish_and_usage() {
    let chunk = |v: Value| format!("data: {v}\n\n");
    let stream = [
        chunk(json!({"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "It "}}]})),
        chunk(json!({"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": "is."}}]})),
        chunk(json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_9", "type": "function", "function": {"name": "weather", "arguments": "{\"ci"}}]}}]})),
        chunk(json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "ty\":\"Oslo\"}"}}]}}]})),
        chunk(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})),
        chunk(json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5}})),
        "data: [DONE]\n\n".to_string(),
    ]
    .concat();
    let mut r = Reframer::new();
    // Split anywhere.
    let (a, b) = stream.as_bytes().split_at(37);
    let mut out = r.feed(a);
    out.extend(r.feed(b));
    out.extend(r.finish());
    let ev = events(&out);
    assert_eq!(ev.len(), 3, "{ev:?}");
    assert_eq!(ev[0]["candidates"][0]["content"]["parts"][0]["text"], "It ");
    assert_eq!(ev[1]["candidates"][0]["content"]["parts"][0]["text"], "is.");
    let last = &ev[2]["candidates"][0];
    assert_eq!(last["finishReason"], "STOP");
    assert_eq!(
        last["content"]["parts"][0]["functionCall"],
        json!({"name": "weather", "args": {"city": "Oslo"}, "id": "call_9"})
    );
    assert_eq!(ev[2]["usageMetadata"]["candidatesTokenCount"], 5);
}

#[test]
fn a_cut_or_failed_stream_ends_with_an_error_object() {
    let mut r = Reframer::new();
    let mut out = r.feed(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n");
    out.extend(r.finish());
    let ev = events(&out);
    assert_eq!(ev.last().unwrap()["error"]["code"], 502, "{ev:?}");
    let mut r = Reframer::new();
    let e = GatewayError::new(ErrorKind::Overloaded, "queue full");
    let ev = events(&r.fail(&e));
    assert_eq!(ev[0]["error"]["code"], 503);
    assert_eq!(ev[0]["error"]["status"], "UNAVAILABLE");
    assert!(r.finish().is_empty(), "nothing follows an error");
}

#[test]
fn refusals_take_googles_shape() {
    let e = GatewayError::new(ErrorKind::InvalidRequest, "must be a list").with_param("contents");
    assert_eq!(
        error::body(&e),
        json!({"error": {"code": 400, "message": "contents: must be a list", "status": "INVALID_ARGUMENT"}})
    );
    assert_eq!(error::status_name(429), "RESOURCE_EXHAUSTED");
    assert_eq!(error::status_name(401), "UNAUTHENTICATED");
}
