use std::collections::VecDeque;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::routing::post;
use parking_lot::Mutex;
use sluice_core::{ChatRequest, RequestId, UpstreamReply};

use super::*;
use crate::pump::Translate;
use crate::sse::{SseEvent, SseParser};
use crate::{RateReport, StreamEvent};

fn request(body: Value) -> ChatRequest {
    let Value::Object(map) = body else {
        panic!("object")
    };
    ChatRequest::from_body(map).unwrap()
}

#[test]
fn a_conversation_becomes_contents_with_system_tools_and_config() {
    let req = request(json!({
        "model": "g",
        "messages": [
            {"role": "system", "content": "You review contracts."},
            {"role": "user", "content": [
                {"type": "text", "text": "Clause 4:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "image_url", "image_url": {"url": "https://x.test/scan.PDF?v=2"}}
            ]},
            {"role": "assistant", "content": "Checking.", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"rule\":7}"},
                 "extra_content": {"google": {"thought_signature": "sig-1"}}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "rule 7: no auto-renewal"},
            {"role": "tool", "tool_call_id": "call_1", "content": "{\"found\": true}"},
            {"role": "user", "content": "So?"}
        ],
        "max_tokens": 300,
        "stop": "END",
        "temperature": 0.2,
        "n": 2,
        "stop": null,
        "tools": [{"type": "function", "function": {"name": "lookup", "description": "d",
            "parameters": {"type": "object", "additionalProperties": false}}},
            {"googleSearch": {}}],
        "tool_choice": {"type": "function", "function": {"name": "lookup"}},
        "response_format": {"type": "json_schema", "json_schema": {"name": "v", "schema": {"type": "object"}}},
        "reasoning_effort": "low",
        "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
        "user": "u-9",
        "stream": true
    }));
    let out = translate_request(&req).unwrap();
    assert!(out.get("model").is_none(), "the model is in the URL");
    assert_eq!(
        out["systemInstruction"],
        json!({"parts": [{"text": "You review contracts."}]})
    );
    let contents = out["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 3, "{contents:?}");
    assert_eq!(contents[0]["role"], "user");
    assert_eq!(
        contents[0]["parts"][1],
        json!({"inlineData": {"mimeType": "image/png", "data": "AAAA"}})
    );
    assert_eq!(
        contents[0]["parts"][2]["fileData"]["mimeType"],
        "application/pdf"
    );
    assert_eq!(contents[1]["role"], "model");
    assert_eq!(
        contents[1]["parts"][1],
        json!({"functionCall": {"name": "lookup", "args": {"rule": 7}}, "thoughtSignature": "sig-1"})
    );
    // Both tool results and the next question in one user turn (Gemini's turns alternate),
    // each result named by the call it answers.
    assert_eq!(
        contents[2],
        json!({"role": "user", "parts": [
            {"functionResponse": {"name": "lookup", "response": {"content": "rule 7: no auto-renewal"}}},
            {"functionResponse": {"name": "lookup", "response": {"found": true}}},
            {"text": "So?"}
        ]})
    );
    let config = &out["generationConfig"];
    assert_eq!(config["maxOutputTokens"], 300);
    assert_eq!(config["temperature"], 0.2);
    assert_eq!(config["candidateCount"], 2);
    assert!(
        config.get("stopSequences").is_none(),
        "a null stop is unset"
    );
    assert_eq!(config["responseMimeType"], "application/json");
    assert_eq!(config["responseJsonSchema"], json!({"type": "object"}));
    assert_eq!(config["thinkingConfig"], json!({"thinkingBudget": 1024}));
    assert_eq!(
        out["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"]["additionalProperties"],
        false
    );
    assert_eq!(out["tools"][1], json!({"googleSearch": {}}));
    assert_eq!(
        out["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["lookup"]}})
    );
    assert_eq!(out["safetySettings"][0]["threshold"], "BLOCK_NONE");
    assert!(out.get("user").is_none() && out.get("stream").is_none());
}

#[test]
fn what_cannot_be_sent_is_refused_with_its_field_named() {
    let refused = |body: Value| translate_request(&request(body)).unwrap_err();
    let base = |extra: Value| {
        let mut b = json!({"model": "g", "messages": [{"role": "user", "content": "hi"}]});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };
    let cases = [
        (base(json!({"logit_bias_x": 1})), "logit_bias_x"),
        (
            json!({"model": "g", "messages": [{"role": "tool", "tool_call_id": "nope", "content": "x"}]}),
            "messages[0].tool_call_id",
        ),
        (
            json!({"model": "g", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x.test/a"}}]}]}),
            "messages[0].content[0].image_url",
        ),
        (base(json!({"tool_choice": "sometimes"})), "tool_choice"),
        (
            base(json!({"response_format": {"type": "json_schema"}})),
            "response_format.json_schema.schema",
        ),
        (
            base(json!({"reasoning_effort": "extreme"})),
            "reasoning_effort",
        ),
    ];
    for (body, param) in cases {
        let e = refused(body);
        assert_eq!(e.kind, ErrorKind::InvalidRequest);
        assert_eq!(e.param.as_deref(), Some(param), "{}", e.message);
    }
}

const ANSWER: &str = r#"{"candidates":[{"content":{"role":"model","parts":[
    {"text":"Let me think.","thought":true},
    {"text":"Clause 4 renews "},{"text":"automatically."},
    {"functionCall":{"name":"lookup","args":{"rule":7}},"thoughtSignature":"sig-9"}]},
    "finishReason":"STOP","index":0}],
  "usageMetadata":{"promptTokenCount":1200,"candidatesTokenCount":12,"totalTokenCount":1240,
    "cachedContentTokenCount":1024,"thoughtsTokenCount":28},
  "modelVersion":"gemini-2.5-flash","responseId":"resp-1"}"#;

#[test]
fn an_answer_becomes_a_chat_completion_with_its_usage() {
    let (body, usage) = translate_response(ANSWER.as_bytes(), "g").unwrap();
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["id"], "resp-1");
    assert_eq!(v["model"], "gemini-2.5-flash");
    let m = &v["choices"][0]["message"];
    assert_eq!(m["content"], "Clause 4 renews automatically.");
    assert_eq!(m["reasoning_content"], "Let me think.");
    assert_eq!(m["tool_calls"][0]["function"]["name"], "lookup");
    assert_eq!(m["tool_calls"][0]["function"]["arguments"], r#"{"rule":7}"#);
    assert_eq!(
        m["tool_calls"][0]["extra_content"]["google"]["thought_signature"],
        "sig-9"
    );
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(
        (
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.cached_tokens,
            usage.reasoning_tokens
        ),
        (1200, 40, 1024, 28)
    );
    assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 1024);
}

#[test]
fn a_blocked_prompt_or_a_malformed_answer_is_an_error_not_an_empty_answer() {
    let blocked =
        r#"{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":9}}"#;
    let e = translate_response(blocked.as_bytes(), "g").unwrap_err();
    assert_eq!(e.kind, ErrorKind::ContentFiltered);
    assert!(e.message.contains("SAFETY"));
    for bad in [r#"{"candidates":[]}"#, "not json", r#"{"candidates":"x"}"#] {
        let e = translate_response(bad.as_bytes(), "g").unwrap_err();
        assert_eq!(e.kind, ErrorKind::UpstreamProtocol, "{bad}");
        assert!(e.message.contains("upstream g"));
    }
    let cut =
        r#"{"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":"MAX_TOKENS"}]}"#;
    let (body, _) = translate_response(cut.as_bytes(), "g").unwrap();
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["choices"][0]["finish_reason"], "length");
}

fn events(text: &str) -> Vec<SseEvent> {
    let mut out = Vec::new();
    SseParser::new().push(text.as_bytes(), &mut out).unwrap();
    out
}

fn frames(out: &VecDeque<StreamEvent>) -> Vec<Value> {
    out.iter()
        .filter_map(|e| match e {
            StreamEvent::Frame(b) => {
                let s = std::str::from_utf8(b).unwrap();
                let data = s.trim().strip_prefix("data: ").unwrap();
                serde_json::from_str(data).ok()
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_stream_is_translated_chunk_by_chunk_and_ends_with_its_usage() {
    let sse = concat!(
        "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"Clause \"}]},\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":1200},\"modelVersion\":\"gemini-2.5-flash\",\"responseId\":\"r-2\"}\r\n\r\n",
        "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"4.\"},{\"functionCall\":{\"name\":\"lookup\",\"args\":{}}}]},\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":1200,\"candidatesTokenCount\":5,\"cachedContentTokenCount\":1000,\"thoughtsTokenCount\":3}}\r\n\r\n",
    );
    let mut t = StreamTranslator::new(Arc::from("g"), true);
    let mut out = VecDeque::new();
    for ev in events(sse) {
        t.event(&ev, &mut out).unwrap();
    }
    assert!(!Translate::finished(&t));
    assert!(Translate::closed(&mut t, &mut out), "a polite end");
    let f = frames(&out);
    assert_eq!(f[0]["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(f[1]["choices"][0]["delta"]["content"], "Clause ");
    assert_eq!(f[2]["choices"][0]["delta"]["content"], "4.");
    assert_eq!(
        f[3]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"],
        "lookup"
    );
    assert_eq!(f[3]["choices"][0]["delta"]["tool_calls"][0]["index"], 0);
    assert_eq!(f[4]["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(
        f[5]["usage"]["prompt_tokens_details"]["cached_tokens"],
        1000
    );
    assert_eq!(f[1]["id"], "r-2");
    let usage = out.iter().find_map(|e| match e {
        StreamEvent::Usage(u) => Some(*u),
        _ => None,
    });
    let u = usage.unwrap();
    assert_eq!(
        (u.prompt_tokens, u.completion_tokens, u.cached_tokens),
        (1200, 8, 1000)
    );
    assert_eq!(
        out.back(),
        Some(&StreamEvent::Frame(crate::sse::frame(crate::sse::DONE)))
    );
}

#[test]
fn a_stream_cut_before_its_finish_or_a_bad_event_is_an_error() {
    let mut t = StreamTranslator::new(Arc::from("g"), false);
    let mut out = VecDeque::new();
    for ev in events("data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}]}}]}\n\n") {
        t.event(&ev, &mut out).unwrap();
    }
    assert!(!Translate::closed(&mut t, &mut out), "truncated");
    for bad in [
        "data: not json\n\n",
        "data: {\"candidates\":7}\n\n",
        "data: {\"error\":{\"code\":500,\"message\":\"boom\",\"status\":\"INTERNAL\"}}\n\n",
        "data: {\"promptFeedback\":{\"blockReason\":\"OTHER\"}}\n\n",
    ] {
        let mut t = StreamTranslator::new(Arc::from("g"), false);
        let e = t.event(&events(bad)[0], &mut out).unwrap_err();
        assert!(
            e.message.contains("g") || e.message.contains("unreadable"),
            "{bad}: {}",
            e.message
        );
    }
}

#[test]
fn a_google_error_reads_in_openai_shape_with_its_retry_delay() {
    let body = r#"{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED",
        "details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26.5s"}]}}"#;
    let e = google_error(GatewayError::rejected(UpstreamReply {
        status: 429,
        body: Bytes::from(body),
        content_type: Some("application/json".into()),
        retry_after: None,
    }));
    let reply = e.upstream.as_deref().unwrap();
    assert_eq!(reply.retry_after.as_deref(), Some("27"));
    let v: Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(v["error"]["code"], "RESOURCE_EXHAUSTED");
    assert_eq!(v["error"]["message"], "Resource has been exhausted");
    assert_eq!(e.status(), 429);
    // A body that is not Google's is passed on as it came.
    let other = google_error(GatewayError::rejected(UpstreamReply {
        status: 400,
        body: Bytes::from("plain"),
        content_type: None,
        retry_after: None,
    }));
    assert_eq!(other.upstream.unwrap().body, Bytes::from("plain"));
}

#[test]
fn the_credential_and_vertex_names_are_required() {
    assert_eq!(GeminiParams::default().problems(false)[0].0, "api_key_env");
    assert!(GeminiParams::default().problems(true).is_empty());
    let vertex = GeminiParams {
        api: GeminiApi::Vertex,
        ..GeminiParams::default()
    };
    let fields: Vec<_> = vertex.problems(true).iter().map(|p| p.0).collect();
    assert_eq!(fields, ["token_env", "project", "location"]);
    let fine = GeminiParams {
        api: GeminiApi::Vertex,
        project: Some("acme-prod".into()),
        location: Some("us-central1".into()),
        token_file: Some("/run/token".into()),
        ..GeminiParams::default()
    };
    assert!(fine.problems(false).is_empty());
    let bad = GeminiParams {
        project: Some("a/b".into()),
        ..fine.clone()
    };
    assert_eq!(bad.problems(false)[0].0, "project");
    let stray = GeminiParams {
        project: Some("p".into()),
        ..GeminiParams::default()
    };
    assert_eq!(stray.problems(true)[0].0, "project");
}

/// What the capturing upstream saw: (path and query, x-goog-api-key, authorization).
type Seen = Arc<Mutex<Vec<(String, Option<String>, Option<String>)>>>;

async fn capture(
    State(seen): State<Seen>,
    uri: Uri,
    headers: HeaderMap,
) -> axum::response::Response {
    let h = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    seen.lock()
        .push((uri.to_string(), h("x-goog-api-key"), h("authorization")));
    if uri.path().contains("busy") {
        let body = r#"{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3s"}]}}"#;
        return axum::response::IntoResponse::into_response((StatusCode::TOO_MANY_REQUESTS, body));
    }
    axum::response::IntoResponse::into_response(([("content-type", "application/json")], ANSWER))
}

async fn upstream() -> (String, Seen) {
    let seen = Seen::default();
    let app = Router::new()
        .fallback(post(capture))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), seen)
}

fn settings(base: &str, params: GeminiParams, key: Option<&str>) -> GeminiSettings {
    GeminiSettings {
        base_url: base.to_string(),
        params,
        api_key: key.map(str::to_string),
        headers: Vec::new(),
        http: HttpSettings::default(),
    }
}

fn call(model: &str) -> UpstreamCall {
    let request =
        ChatRequest::parse(br#"{"model":"chat","messages":[{"role":"user","content":"hi"}]}"#)
            .unwrap();
    UpstreamCall {
        request: Arc::new(request),
        model: Arc::from(model),
        request_id: RequestId::from_client_or_generate(Some("req-1")),
        deadline: None,
        rate_report: RateReport::default(),
        trace: None,
    }
}

#[tokio::test]
async fn the_gemini_api_is_called_at_the_models_url_with_the_key_and_a_429_keeps_its_delay() {
    let (base, seen) = upstream().await;
    let g = Gemini::new(
        "g",
        settings(
            &format!("{base}/v1beta"),
            GeminiParams::default(),
            Some("k-1"),
        ),
    )
    .unwrap();
    let UpstreamResponse::Complete(c) = g.call(call("gemini-2.5-flash")).await.unwrap() else {
        panic!("a complete answer")
    };
    assert_eq!(c.usage.unwrap().cached_tokens, 1024);
    let e = g.call(call("busy")).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::UpstreamRejected);
    assert_eq!(
        e.upstream.as_deref().unwrap().retry_after.as_deref(),
        Some("3")
    );
    let seen = seen.lock().clone();
    assert_eq!(
        seen[0],
        (
            "/v1beta/models/gemini-2.5-flash:generateContent".into(),
            Some("k-1".into()),
            None
        )
    );
    assert_eq!(
        g.url("gemini-2.5-flash", true).unwrap(),
        format!("{base}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse")
    );
}

#[tokio::test]
async fn vertex_is_called_at_its_project_and_location_with_a_bearer() {
    let (base, seen) = upstream().await;
    let params = GeminiParams {
        api: GeminiApi::Vertex,
        project: Some("acme".into()),
        location: Some("europe-west4".into()),
        token_env: Some("GOOGLE_TOKEN".into()),
        ..GeminiParams::default()
    };
    let g = Gemini::new("v", settings(&base, params, Some("ya29.tok"))).unwrap();
    g.call(call("gemini-2.5-pro")).await.unwrap();
    let seen = seen.lock().clone();
    assert_eq!(
        seen[0],
        (
            "/v1/projects/acme/locations/europe-west4/publishers/google/models/gemini-2.5-pro:generateContent"
                .into(),
            None,
            Some("Bearer ya29.tok".into())
        )
    );
}
