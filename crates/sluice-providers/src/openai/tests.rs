use serde_json::json;

use super::*;

fn request(body: Value) -> ChatRequest {
    let Value::Object(map) = body else {
        panic!("object")
    };
    ChatRequest::from_body(map).unwrap()
}

fn outgoing(req: &ChatRequest, model: &str) -> Value {
    serde_json::from_slice(&outgoing_body(req, model).unwrap()).unwrap()
}

#[test]
fn fields_are_copied_byte_for_byte() {
    let body = "{\"top_k\": 3.10, \"model\":\"chat\",\"messages\":[{\"role\":\"user\",\"content\":\"h\\u00e9\"}], \"x\":{\"b\":1,\"a\":2}}";
    let req = ChatRequest::parse(body.as_bytes()).unwrap();
    let out = String::from_utf8(outgoing_body(&req, "up \"q\"").unwrap()).unwrap();
    assert_eq!(
        out,
        "{\"top_k\":3.10,\"model\":\"up \\\"q\\\"\",\"messages\":[{\"role\":\"user\",\"content\":\"h\\u00e9\"}],\"x\":{\"b\":1,\"a\":2}}"
    );
    let streamed = ChatRequest::parse(
        br#"{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true}"#,
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(outgoing_body(&streamed, "x").unwrap()).unwrap(),
        r#"{"model":"x","messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":true}}"#
    );
}

#[test]
fn swaps_the_model_and_keeps_unknown_fields_in_order() {
    let req = request(json!({
        "model": "chat", "messages": [{"role": "user", "content": "hi"}],
        "top_k": 3, "enable_thinking": false
    }));
    let out = outgoing(&req, "deepseek-chat");
    assert_eq!(out["model"], "deepseek-chat");
    assert_eq!(out["top_k"], 3);
    assert_eq!(out["enable_thinking"], false);
    let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["model", "messages", "top_k", "enable_thinking"]);
    assert!(out.get("stream_options").is_none(), "not a stream");
}

#[test]
fn streams_always_ask_for_usage() {
    let plain = request(
        json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": true}),
    );
    assert_eq!(
        outgoing(&plain, "x")["stream_options"],
        json!({"include_usage": true})
    );
    let with_opts = request(json!({
        "model": "m", "messages": [{"role": "user", "content": "x"}], "stream": true,
        "stream_options": {"include_usage": false, "continuous_usage_stats": true}
    }));
    assert_eq!(
        outgoing(&with_opts, "x")["stream_options"],
        json!({"include_usage": true, "continuous_usage_stats": true})
    );
}

#[test]
fn finish_reason_detection() {
    assert!(has_finish_reason(
        br#"{"choices":[{"finish_reason":"stop"}]}"#
    ));
    assert!(has_finish_reason(
        br#"{"choices":[{"finish_reason" : "length"}]}"#
    ));
    assert!(!has_finish_reason(
        br#"{"choices":[{"finish_reason":null}]}"#
    ));
    assert!(!has_finish_reason(br#"{"choices":[{"delta":{}}]}"#));
}

#[test]
fn usage_is_read_only_where_it_is_given() {
    assert!(gives_usage(
        br#"{"choices":[],"usage":{"prompt_tokens":3}}"#
    ));
    assert!(gives_usage(br#"{"usage" : {"prompt_tokens":3}}"#));
    assert!(!gives_usage(br#"{"choices":[{"delta":{}}],"usage":null}"#));
    assert!(!gives_usage(
        br#"{"choices":[{"delta":{"content":"\"usage\": 1"}}]}"#
    ));
    // A null one first does not hide a real one after it.
    assert!(gives_usage(
        br#"{"x":{"usage":null},"usage":{"prompt_tokens":3}}"#
    ));
}

#[test]
fn a_stream_with_null_usage_in_every_chunk_reports_the_real_one() {
    let mut frames = Frames::new(Arc::from("up"), false);
    let mut out = std::collections::VecDeque::new();
    for data in [
        r#"{"choices":[{"delta":{"content":"a"},"finish_reason":null}],"usage":null}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"stop"}],"usage":null}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}"#,
    ] {
        let ev = SseEvent {
            event: None,
            data: Bytes::from(data),
            framed: None,
        };
        frames.event(ev, &mut out).unwrap();
    }
    assert!(frames.saw_finish);
    let usage: Vec<_> = out
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Usage(u) => Some(*u),
            StreamEvent::Frame(_) | StreamEvent::Native(_) => None,
        })
        .collect();
    assert_eq!(usage.len(), 1);
    assert_eq!(usage[0].prompt_tokens, 5);
    assert_eq!(usage[0].completion_tokens, 2);
    // Two content frames reach the client; the usage-only chunk it did not ask for does not.
    assert_eq!(out.len(), 3);
}

#[test]
fn error_frames_are_openai_shaped() {
    let e = GatewayError::new(ErrorKind::UpstreamTimeout, "slow");
    let f = error_frame(&e);
    let text = std::str::from_utf8(&f).unwrap();
    let body: Value = serde_json::from_str(text.trim_start_matches("data: ").trim()).unwrap();
    assert_eq!(body["error"]["code"], "upstream_timeout");
    assert_eq!(body["error"]["message"], "slow");
}

#[test]
fn an_error_in_place_of_an_answer_is_the_upstream_failing() {
    let now = tokio::time::Instant::now();
    for body in [
        r#"{"error":{"message":"The server is overloaded","type":"server_error"}}"#,
        r#"{"object":"error","message":"bad","type":"BadRequestError","code":400}"#,
    ] {
        let e = completion(Bytes::from(body), now, "up").unwrap_err();
        assert_eq!(e.kind, ErrorKind::UpstreamServerError, "{body}");
        assert!(e.kind.retryable());
        assert!(
            e.message.contains("upstream up answered 200 with an error"),
            "{e}"
        );
    }
    assert!(
        completion(
            Bytes::from(r#"{"error":{"message":"overloaded"}}"#),
            now,
            "up"
        )
        .unwrap_err()
        .message
        .ends_with("overloaded")
    );
    // An answer that also carries a null error, or names "error" in its text, is an answer.
    for body in [
        r#"{"choices":[{"message":{"content":"hi"}}],"error":null}"#,
        r#"{"choices":[{"message":{"content":"\"error\" is a word"}}]}"#,
    ] {
        assert!(completion(Bytes::from(body), now, "up").is_ok(), "{body}");
    }
    // Mid-stream, the same error ends the stream as the upstream's failure.
    let mut frames = Frames::new(Arc::from("up"), true);
    let mut out = std::collections::VecDeque::new();
    let ev = |data: &'static str| SseEvent {
        event: None,
        data: Bytes::from(data),
        framed: None,
    };
    frames
        .event(ev(r#"{"choices":[{"delta":{"content":"a"}}]}"#), &mut out)
        .unwrap();
    let e = frames
        .event(
            ev(r#"{"error":{"message":"dropped","code":"server_error"}}"#),
            &mut out,
        )
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::UpstreamServerError);
    assert!(
        e.message.contains("sent mid-stream an error: dropped"),
        "{e}"
    );
    assert_eq!(out.len(), 1, "the error is not passed on as a frame");
}
