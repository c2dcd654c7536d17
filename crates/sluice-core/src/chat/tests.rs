use super::*;

fn parse(s: &str) -> Result<ChatRequest, GatewayError> {
    ChatRequest::parse(s.as_bytes())
}

#[test]
fn reads_model_stream_and_usage_flags() {
    let r = parse(
        r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,
            "stream_options":{"include_usage":true},"top_k":5}"#,
    )
    .unwrap();
    assert_eq!(r.model, "m");
    assert!(r.stream && r.include_usage);
    assert_eq!(
        r.value("top_k"),
        Some(Value::from(5)),
        "unknown fields kept"
    );
    assert_eq!(r.message_count(), 1);
}

#[test]
fn every_field_is_kept_as_written_in_the_clients_order() {
    let body = "{\"top_k\": 5.0e0, \"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\n\"x\":{\"deep\":[1, \"\\u00e9\"]}}";
    let r = parse(body).unwrap();
    let fields: Vec<(&str, &[u8])> = r.fields().collect();
    assert_eq!(
        fields,
        [
            ("top_k", &b"5.0e0"[..]),
            ("model", b"\"m\""),
            ("messages", b"[{\"role\":\"user\",\"content\":\"x\"}]"),
            ("x", b"{\"deep\":[1, \"\\u00e9\"]}"),
        ]
    );
    assert_eq!(r.body_len(), body.len());
    let map = r.to_map();
    assert_eq!(
        map.keys().collect::<Vec<_>>(),
        ["top_k", "model", "messages", "x"]
    );
    assert_eq!(map["x"]["deep"][1], "é");
}

#[test]
fn a_body_read_from_a_map_is_the_same_request() {
    let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}"#;
    let map: Map<String, Value> = serde_json::from_str(body).unwrap();
    assert_eq!(ChatRequest::from_body(map).unwrap(), parse(body).unwrap());
}

#[test]
fn messages_nested_past_the_readers_limit_are_refused_by_name() {
    let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
    let body = format!(r#"{{"model":"m","messages":[{{"role":"user","content":{deep}}}]}}"#);
    let e = parse(&body).unwrap_err();
    assert_eq!(e.param.as_deref(), Some("messages"), "{}", e.message);
}

#[test]
fn invalid_utf8_is_bad_json_with_its_position() {
    let e = ChatRequest::parse(b"{\"model\":\"m\xff\",\"messages\":[]}").unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidJson);
    assert!(e.message.contains("line 1 column"), "{}", e.message);
}

#[test]
fn malformed_json_names_the_position() {
    let e = parse("{\"model\": \"m\",\n \"messages\": [}").unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidJson);
    assert!(e.message.contains("line 2 column"), "{}", e.message);
}

#[test]
fn each_bad_field_is_named() {
    let cases = [
        (r#"[1,2]"#, None),
        (
            r#"{"messages":[{"role":"user","content":"x"}]}"#,
            Some("model"),
        ),
        (
            r#"{"model":5,"messages":[{"role":"user","content":"x"}]}"#,
            Some("model"),
        ),
        (
            r#"{"model":"","messages":[{"role":"user","content":"x"}]}"#,
            Some("model"),
        ),
        (r#"{"model":"m"}"#, Some("messages")),
        (r#"{"model":"m","messages":[]}"#, Some("messages")),
        (r#"{"model":"m","messages":"hi"}"#, Some("messages")),
        (
            r#"{"model":"m","messages":[{"content":"x"}]}"#,
            Some("messages[0].role"),
        ),
        (r#"{"model":"m","messages":[7]}"#, Some("messages[0]")),
        (
            r#"{"model":"m","messages":[{"role":"user","content":"x"}],"stream":"yes"}"#,
            Some("stream"),
        ),
        (
            r#"{"model":"m","messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":1}}"#,
            Some("stream_options.include_usage"),
        ),
        (
            r#"{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":1.5}"#,
            Some("max_tokens"),
        ),
        (
            r#"{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":1e999}"#,
            Some("max_tokens"),
        ),
        (
            r#"{"model":"m","messages":[{"role":"user","content":"x"}],"max_completion_tokens":-1}"#,
            Some("max_completion_tokens"),
        ),
    ];
    for (body, param) in cases {
        let e = parse(body).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidRequest, "{body}");
        assert_eq!(e.param.as_deref(), param, "{body}");
    }
}

#[test]
fn max_tokens_prefers_the_new_name() {
    let r = parse(
        r#"{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":5,"max_completion_tokens":9}"#,
    )
    .unwrap();
    assert_eq!(r.max_tokens(), Some(9));
}

#[test]
fn the_token_estimate_counts_message_text_and_the_output_reserved() {
    let text = "x".repeat(4_000);
    let body = format!(
        r#"{{"model":"m","messages":[{{"role":"user","content":[{{"type":"text","text":"{text}"}}]}}],"max_tokens":100}}"#
    );
    // "user", "text" and the 4,000 bytes: 4,008 bytes, 1,002 tokens, plus the 100 reserved.
    assert_eq!(parse(&body).unwrap().token_estimate(), 1_102);
    let r = parse(r#"{"model":"m","messages":[{"role":"user","content":"abcd"}]}"#).unwrap();
    assert_eq!(r.token_estimate(), 2 + DEFAULT_OUTPUT_ESTIMATE);
}

#[test]
fn messages_are_checked_as_openai_checks_them() {
    let at = |messages: &str| format!(r#"{{"model":"m","messages":{messages}}}"#);
    let cases = [
        (r#"[{"role":"user"}]"#, "messages[0].content"),
        (r#"[{"role":"user","content":null}]"#, "messages[0].content"),
        (
            r#"[{"role":"system","content":"s"},{"role":"developer"}]"#,
            "messages[1].content",
        ),
        (
            r#"[{"role":"user","content":"q"},{"role":"assistant"}]"#,
            "messages[1].content",
        ),
        (
            r#"[{"role":"user","content":"q"},{"role":"assistant","content":"a"},{"role":"tool","content":"r"}]"#,
            "messages[2].tool_call_id",
        ),
        (r#"[{"role":"robot","content":"x"}]"#, "messages[0].role"),
        (
            r#"[{"role":"user","content":[{"type":"text","text":"t"},{"type":"image_url","image_url":{"detail":"low"}}]}]"#,
            "messages[0].content[1].image_url.url",
        ),
        (
            r#"[{"role":"user","content":[{"image_url":{"url":""},"type":"image_url"}]}]"#,
            "messages[0].content[0].image_url.url",
        ),
        (
            r#"[{"role":"user","content":[{"type":"image_url"}]}]"#,
            "messages[0].content[0].image_url.url",
        ),
    ];
    for (messages, param) in cases {
        let body = at(messages);
        let e = parse(&body).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidRequest, "{body}");
        assert_eq!(e.param.as_deref(), Some(param), "{body}: {}", e.message);
    }
    // What OpenAI accepts passes: an assistant's tool calls without content, a tool's answer
    // with its call's id, an image as a URL string, extra fields of a provider's own.
    let fine = at(
        r#"[{"role":"user","content":[{"type":"image_url","image_url":"https://x/i.png"}]},
            {"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},
            {"role":"tool","tool_call_id":"c","content":"r","vendor":{"x":1}},
            {"role":"assistant","refusal":"no"}]"#,
    );
    assert_eq!(parse(&fine).unwrap().message_count(), 4);
}

/// Sampling parameters outside OpenAI's ranges are refused with the field named; inside them,
/// at their bounds, and `null`, they pass.
#[test]
fn sampling_parameters_are_checked_in_openais_ranges() {
    let with = |field: &str| {
        parse(&format!(
            r#"{{"model":"m","messages":[{{"role":"user","content":"hi"}}],{field}}}"#
        ))
    };
    for (field, param, says) in [
        (r#""temperature":5"#, "temperature", "at most 2, got 5"),
        (r#""temperature":-0.1"#, "temperature", "at least 0"),
        (r#""temperature":"hot""#, "temperature", "must be a number"),
        (r#""top_p":1.5"#, "top_p", "at most 1"),
        (
            r#""presence_penalty":-3"#,
            "presence_penalty",
            "at least -2",
        ),
        (
            r#""frequency_penalty":2.5"#,
            "frequency_penalty",
            "at most 2",
        ),
        (r#""n":0"#, "n", "at least 1"),
        (r#""n":1.5"#, "n", "must be an integer"),
        (r#""top_logprobs":21"#, "top_logprobs", "at most 20"),
    ] {
        let e = with(field).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidRequest, "{field}");
        assert_eq!(e.param.as_deref(), Some(param), "{field}");
        assert!(e.message.contains(says), "{field}: {}", e.message);
    }
    for field in [
        r#""temperature":2"#,
        r#""temperature":0"#,
        r#""temperature":null"#,
        r#""top_p":1,"n":2,"presence_penalty":-2,"frequency_penalty":2.0,"top_logprobs":0"#,
    ] {
        assert!(with(field).is_ok(), "{field}");
    }
}
