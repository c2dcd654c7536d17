use std::collections::VecDeque;

use serde_json::{Value, json};
use sluice_core::ChatRequest;

use super::*;
use crate::StreamEvent;
use crate::eventstream::{EventStreamDecoder, encode};
use crate::pump::{Decode, Translate};

fn request(body: Value) -> ChatRequest {
    let Value::Object(map) = body else {
        panic!("object")
    };
    ChatRequest::from_body(map).unwrap()
}

#[test]
fn a_conversation_becomes_converse_messages_with_system_tools_and_config() {
    let req = request(json!({
        "model": "b",
        "messages": [
            {"role": "system", "content": "You review contracts."},
            {"role": "user", "content": [{"type": "text", "text": "Clause 4:"},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}}]},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "lookup", "arguments": "{\"rule\":7}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "rule 7: no auto-renewal"},
            {"role": "user", "content": "So?"}
        ],
        "max_tokens": 300, "temperature": 0.2, "top_p": 0.9, "stop": "END", "top_k": 40,
        "tools": [{"type": "function", "function": {"name": "lookup", "description": "d",
            "parameters": {"type": "object"}}}],
        "tool_choice": {"type": "function", "function": {"name": "lookup"}},
        "user": "u-1", "stream": true
    }));
    let out = translate_request(&req).unwrap();
    assert_eq!(out["system"], json!([{"text": "You review contracts."}]));
    let m = out["messages"].as_array().unwrap();
    assert_eq!(m.len(), 3, "{m:?}");
    assert_eq!(
        m[0]["content"][1],
        json!({"image": {"format": "jpeg", "source": {"bytes": "AAAA"}}})
    );
    assert_eq!(
        m[1]["content"][0],
        json!({"toolUse": {"toolUseId": "call_1", "name": "lookup", "input": {"rule": 7}}})
    );
    assert_eq!(
        m[2]["content"],
        json!([{"toolResult": {"toolUseId": "call_1", "content": [{"text": "rule 7: no auto-renewal"}]}},
            {"text": "So?"}])
    );
    assert_eq!(
        out["inferenceConfig"],
        json!({"maxTokens": 300, "temperature": 0.2, "topP": 0.9, "stopSequences": ["END"]})
    );
    assert_eq!(out["additionalModelRequestFields"], json!({"top_k": 40}));
    assert_eq!(
        out["toolConfig"],
        json!({"tools": [{"toolSpec": {"name": "lookup", "description": "d",
            "inputSchema": {"json": {"type": "object"}}}}], "toolChoice": {"tool": {"name": "lookup"}}})
    );
    for (body, param) in [
        (json!({"n": 2}), "n"),
        (
            json!({"response_format": {"type": "json_object"}}),
            "response_format",
        ),
        (json!({"tool_choice": "none"}), "tool_choice"),
    ] {
        let mut b = json!({"model": "b", "messages": [{"role": "user", "content": "hi"}]});
        for (k, v) in body.as_object().unwrap() {
            b[k] = v.clone();
        }
        let e = translate_request(&request(b)).unwrap_err();
        assert_eq!(e.param.as_deref(), Some(param), "{}", e.message);
    }
}

#[test]
fn an_answer_becomes_a_chat_completion_with_cache_reads_and_writes() {
    let raw = br#"{"output":{"message":{"role":"assistant","content":[
        {"reasoningContent":{"reasoningText":{"text":"hmm","signature":"s"}}},
        {"text":"Clause 4 renews."},
        {"toolUse":{"toolUseId":"t1","name":"lookup","input":{"rule":7}}}]}},
        "stopReason":"tool_use",
        "usage":{"inputTokens":100,"outputTokens":20,"totalTokens":1344,
            "cacheReadInputTokens":1024,"cacheWriteInputTokens":200},"metrics":{"latencyMs":9}}"#;
    let (body, u) = translate_response(raw, "b", "nova").unwrap();
    let v: Value = serde_json::from_slice(&body).unwrap();
    let m = &v["choices"][0]["message"];
    assert_eq!(m["content"], "Clause 4 renews.");
    assert_eq!(m["reasoning_content"], "hmm");
    assert_eq!(m["tool_calls"][0]["id"], "t1");
    assert_eq!(m["tool_calls"][0]["function"]["arguments"], r#"{"rule":7}"#);
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(v["model"], "nova");
    assert_eq!(
        (
            u.prompt_tokens,
            u.cached_tokens,
            u.cache_write_tokens,
            u.completion_tokens
        ),
        (1324, 1024, 200, 20)
    );
    let e = translate_response(b"{\"output\":7}", "b", "nova").unwrap_err();
    assert_eq!(e.kind, ErrorKind::UpstreamProtocol);
}

fn decoded(wire: &[u8]) -> Vec<crate::sse::SseEvent> {
    let mut d = EventStreamDecoder::default();
    let mut out = Vec::new();
    d.push(&Bytes::copy_from_slice(wire), &mut out).unwrap();
    out
}

fn frames(out: &VecDeque<StreamEvent>) -> Vec<Value> {
    out.iter()
        .filter_map(|e| match e {
            StreamEvent::Frame(b) => {
                serde_json::from_str(std::str::from_utf8(b).ok()?.trim().strip_prefix("data: ")?)
                    .ok()
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_converse_stream_is_translated_event_by_event() {
    let mut wire = Vec::new();
    for (name, v) in [
        ("messageStart", json!({"role": "assistant"})),
        (
            "contentBlockDelta",
            json!({"delta": {"text": "Clause "}, "contentBlockIndex": 0}),
        ),
        (
            "contentBlockDelta",
            json!({"delta": {"text": "4."}, "contentBlockIndex": 0}),
        ),
        ("contentBlockStop", json!({"contentBlockIndex": 0})),
        (
            "contentBlockStart",
            json!({"start": {"toolUse": {"toolUseId": "t1", "name": "lookup"}}, "contentBlockIndex": 1}),
        ),
        (
            "contentBlockDelta",
            json!({"delta": {"toolUse": {"input": "{\"rule\":"}}, "contentBlockIndex": 1}),
        ),
        (
            "contentBlockDelta",
            json!({"delta": {"toolUse": {"input": "7}"}}, "contentBlockIndex": 1}),
        ),
        ("messageStop", json!({"stopReason": "tool_use"})),
        (
            "metadata",
            json!({"usage": {"inputTokens": 10, "outputTokens": 5, "cacheReadInputTokens": 1000}}),
        ),
    ] {
        wire.extend_from_slice(&encode("event", name, v.to_string().as_bytes()).unwrap());
    }
    let mut t = StreamTranslator::new(Arc::from("b"), Arc::from("nova"), true);
    let mut out = VecDeque::new();
    for ev in decoded(&wire) {
        t.event(&ev, &mut out).unwrap();
    }
    assert!(Translate::finished(&t));
    let f = frames(&out);
    let text: String = f
        .iter()
        .filter_map(|v| v["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "Clause 4.");
    let args: String = f
        .iter()
        .filter_map(|v| v["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(args, r#"{"rule":7}"#);
    assert!(
        f.iter()
            .any(|v| v["choices"][0]["finish_reason"] == "tool_calls")
    );
    let usage = out.iter().find_map(|e| match e {
        StreamEvent::Usage(u) => Some(*u),
        _ => None,
    });
    assert_eq!(usage.unwrap().prompt_tokens, 1010);
    assert_eq!(usage.unwrap().cached_tokens, 1000);
}

#[test]
fn throttling_in_a_stream_is_a_429_and_a_failure_a_5xx() {
    let mut t = StreamTranslator::new(Arc::from("b"), Arc::from("nova"), false);
    let mut out = VecDeque::new();
    let wire = encode(
        "exception",
        "throttlingException",
        br#"{"message":"slow down"}"#,
    )
    .unwrap();
    let e = t.event(&decoded(&wire)[0], &mut out).unwrap_err();
    assert_eq!((e.kind, e.status()), (ErrorKind::UpstreamRejected, 429));
    let wire = encode(
        "exception",
        "modelStreamErrorException",
        br#"{"message":"x"}"#,
    )
    .unwrap();
    let e = t.event(&decoded(&wire)[0], &mut out).unwrap_err();
    assert_eq!(e.kind, ErrorKind::UpstreamServerError);
    assert!(e.kind.retryable());
    // Cut before its stop: not a polite end.
    assert!(!Translate::closed(&mut t, &mut out));
}

fn creds(token: Option<&str>) -> Credentials {
    Credentials {
        access_key: "AKIDEXAMPLE".into(),
        secret_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
        session_token: token.map(str::to_string),
        source: "test".into(),
    }
}

#[test]
fn requests_are_signed_for_bedrock_in_the_region_over_host_and_content_type() {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_765_152_000);
    let url =
        "https://bedrock-runtime.eu-west-1.amazonaws.com/model/amazon.nova-pro-v1%3A0/converse";
    let h = signed(url, b"{}", at, &creds(Some("tok")), "eu-west-1").unwrap();
    let get = |n: &str| h.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
    let auth = get("authorization").unwrap();
    assert!(
        auth.starts_with(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20251208/eu-west-1/bedrock/aws4_request"
        ),
        "{auth}"
    );
    assert!(
        auth.contains("SignedHeaders=content-type;host;x-amz-date;x-amz-security-token"),
        "{auth}"
    );
    assert_eq!(get("x-amz-date"), Some("20251208T000000Z"));
    assert_eq!(get("x-amz-security-token"), Some("tok"));
    // Another body is another signature.
    let other = signed(url, b"{ }", at, &creds(Some("tok")), "eu-west-1").unwrap();
    assert_ne!(other, h);
}

#[test]
fn a_model_id_is_encoded_in_the_path_as_aws_sdks_encode_it() {
    let b = Bedrock::new(
        "b",
        BedrockSettings {
            base_url: "https://bedrock-runtime.us-east-1.amazonaws.com/".into(),
            region: "us-east-1".into(),
            auth: BedrockAuth::ApiKey("k".into()),
            headers: Vec::new(),
            http: HttpSettings::default(),
        },
    )
    .unwrap();
    assert_eq!(
        b.url("us.anthropic.claude-sonnet-4-5-20250929-v1:0", true),
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"
    );
    let h = b
        .authenticate("https://x/y", b"", std::time::SystemTime::now())
        .unwrap();
    assert_eq!(h, [("authorization".to_string(), "Bearer k".to_string())]);
}

#[test]
fn credentials_come_from_the_environment_else_a_profile_and_say_what_was_missing() {
    let dir = std::env::temp_dir().join(format!("sluice-bedrock-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("credentials");
    std::fs::write(
        &file,
        "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = s1\n\n\
         [work]\n# a comment\naws_access_key_id=AKIDWORK\naws_secret_access_key = s2\naws_session_token = t2\n",
    )
    .unwrap();
    let p = BedrockParams {
        region: Some("us-east-1".into()),
        credentials_file: Some(file.clone()),
        ..BedrockParams::default()
    };
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    };
    let from_env = p
        .credentials(&env(&[
            ("AWS_ACCESS_KEY_ID", "AKIDENV"),
            ("AWS_SECRET_ACCESS_KEY", "s0"),
        ]))
        .unwrap();
    assert_eq!(from_env.access_key, "AKIDENV");
    assert_eq!(p.credentials(&env(&[])).unwrap().access_key, "AKIDDEFAULT");
    let work = p.credentials(&env(&[("AWS_PROFILE", "work")])).unwrap();
    assert_eq!(
        (work.access_key.as_str(), work.session_token.as_deref()),
        ("AKIDWORK", Some("t2"))
    );
    assert!(
        !format!("{work:?}").contains("s2"),
        "the secret is never printed"
    );
    let missing = p.credentials(&env(&[("AWS_PROFILE", "nope")])).unwrap_err();
    assert!(missing.contains("no profile `nope`"), "{missing}");
    assert_eq!(BedrockParams::default().problems()[0].0, "region");
    let bad = BedrockParams {
        region: Some("US East".into()),
        ..BedrockParams::default()
    };
    assert_eq!(bad.problems()[0].0, "region");
}
