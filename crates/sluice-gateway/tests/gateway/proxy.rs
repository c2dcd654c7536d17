//! Pass-through of complete and streamed answers, usage, headers and unknown fields.

use futures::StreamExt;
use serde_json::{Value, json};
use sluice_core::{AttemptOutcome, Usage};

use crate::support::{body, sse_data, start};

#[tokio::test]
async fn non_stream_answer_passes_through_with_headers() {
    let gw = start().await;
    let resp = gw
        .client
        .post(format!("{}/v1/chat/completions", gw.url))
        .header("x-request-id", "req-42")
        .json(&body("ok", false))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let h = resp.headers().clone();
    assert_eq!(h["x-request-id"], "req-42");
    assert_eq!(h["x-sluice-upstream"], "fake-ok");
    let timing = h["server-timing"].to_str().unwrap().to_string();
    for part in ["queue;dur=", "upstream_ttfb;dur=", "total;dur="] {
        assert!(timing.contains(part), "{timing}");
    }
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "Hello from upstream");
    // The upstream saw the upstream model name, the key, the extra header and the request id.
    let seen = gw.upstream.fake.headers.lock()[0].clone();
    assert_eq!(seen["authorization"], "Bearer sk-test");
    assert_eq!(seen["x-tenant"], "acme");
    assert_eq!(seen["x-request-id"], "req-42");
}

#[tokio::test]
async fn a_request_id_is_generated_when_the_client_sends_none() {
    let gw = start().await;
    let resp = gw.chat(body("ok", false)).await;
    let id = resp.headers()["x-request-id"].to_str().unwrap();
    assert_eq!(id.len(), 36);
}

#[tokio::test]
async fn unknown_fields_are_forwarded_untouched_and_the_model_is_swapped() {
    let gw = start().await;
    let mut b = body("echo", false);
    b["top_k"] = json!(7);
    b["chat_template_kwargs"] = json!({"enable_thinking": false});
    let resp = gw.chat(b).await;
    assert_eq!(resp.status(), 200);
    let seen = gw.upstream.fake.bodies.lock()[0].clone();
    assert_eq!(seen["model"], "echo");
    assert_eq!(seen["top_k"], 7);
    assert_eq!(
        seen["chat_template_kwargs"],
        json!({"enable_thinking": false})
    );
    assert_eq!(seen["messages"], json!([{"role": "user", "content": "hi"}]));
}

#[tokio::test]
async fn fields_reach_the_upstream_byte_for_byte() {
    let gw = start().await;
    // Number formats, escapes, key order and nesting a JSON tree would have rewritten.
    let sent = concat!(
        r#"{"temperature":0.70,"model":"echo","top_p":1e0,"#,
        r#""messages":[{"role":"user","content":"caf\u00e9 \"quoted\" \/ slash"}],"#,
        r#""logit_bias":{"50256":-100,"1":+0},"seed":12345678901234567890,"#,
        r#""metadata":{"z":1,"a":[true,null,{}]}}"#
    );
    // `+0` is not JSON: the gateway must refuse it rather than pass it on.
    let refused = gw
        .client
        .post(format!("{}/v1/chat/completions", gw.url))
        .header("content-type", "application/json")
        .body(sent)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let sent = sent.replace("+0", "0");
    let resp = gw
        .client
        .post(format!("{}/v1/chat/completions", gw.url))
        .header("content-type", "application/json")
        .body(sent.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    let seen = gw.upstream.fake.raw_bodies.lock()[0].clone();
    // The upstream model of group `echo` is `echo`: the body arrives exactly as sent.
    assert_eq!(std::str::from_utf8(&seen).unwrap(), sent);
}

async fn usage_of(model: &str, stream: bool) -> Usage {
    let gw = start().await;
    let resp = gw.chat(body(model, stream)).await;
    assert_eq!(resp.status(), 200);
    let _ = resp.bytes().await.unwrap();
    let rec = gw.next_record().await;
    assert_eq!(rec.model_group.as_deref(), Some(model));
    assert_eq!(
        rec.upstream.as_deref(),
        Some(format!("fake-{model}").as_str())
    );
    assert_eq!(rec.status, 200);
    assert!(rec.is_success());
    rec.usage.expect("usage recorded")
}

#[tokio::test]
async fn cached_tokens_are_read_in_each_provider_format() {
    let openai = usage_of("ok", false).await;
    assert_eq!(
        (
            openai.prompt_tokens,
            openai.completion_tokens,
            openai.cached_tokens
        ),
        (2006, 300, 1920)
    );
    let deepseek = usage_of("deepseek", false).await;
    assert_eq!(
        (deepseek.prompt_tokens, deepseek.cached_tokens),
        (1000, 768)
    );
    let kimi = usage_of("kimi", false).await;
    assert_eq!((kimi.prompt_tokens, kimi.cached_tokens), (500, 256));
}

#[tokio::test]
async fn streams_report_usage_from_the_final_chunk() {
    let openai = usage_of("ok", true).await;
    assert_eq!(openai.cached_tokens, 1920);
    let deepseek = usage_of("deepseek", true).await;
    assert_eq!(deepseek.cached_tokens, 768);
}

#[tokio::test]
async fn stream_chunks_arrive_before_the_upstream_finishes() {
    let gw = start().await;
    let resp = gw.chat(body("gated", true)).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    assert!(
        resp.headers()["server-timing"]
            .to_str()
            .unwrap()
            .contains("upstream_ttfb")
    );
    let mut chunks = resp.bytes_stream();
    // The upstream is blocked after its first chunk: the client must already have it.
    let first = chunks.next().await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&first);
    assert!(text.contains("\"Hel\""), "{text}");
    assert_eq!(gw.upstream.fake.gate.available_permits(), 0);
    gw.upstream.fake.gate.add_permits(1);
    let mut rest = String::new();
    while let Some(c) = chunks.next().await {
        rest.push_str(&String::from_utf8_lossy(&c.unwrap()));
    }
    let data = sse_data(&rest);
    assert!(data.iter().any(|d| d.contains("\"lo\"")));
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
}

#[tokio::test]
async fn the_usage_chunk_reaches_only_clients_that_asked() {
    let gw = start().await;
    let text = gw.chat(body("ok", true)).await.text().await.unwrap();
    assert!(
        !sse_data(&text).iter().any(|d| d.contains("\"usage\":{")),
        "{text}"
    );
    let mut asked = body("ok", true);
    asked["stream_options"] = json!({"include_usage": true});
    let text = gw.chat(asked).await.text().await.unwrap();
    let usage: Vec<Value> = sse_data(&text)
        .iter()
        .filter(|d| d.contains("\"usage\":{"))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(usage.len(), 1, "{text}");
    assert_eq!(
        usage[0]["usage"]["prompt_tokens_details"]["cached_tokens"],
        1920
    );
    // Either way the upstream was asked for usage.
    for b in gw.upstream.fake.bodies.lock().iter() {
        assert_eq!(b["stream_options"]["include_usage"], true);
    }
}

#[tokio::test]
async fn the_call_record_has_timings_and_attempts() {
    let gw = start().await;
    let resp = gw
        .client
        .post(format!("{}/v1/chat/completions", gw.url))
        .header("x-request-id", "rec-1")
        .json(&body("ok", true))
        .send()
        .await
        .unwrap();
    let _ = resp.text().await.unwrap();
    let rec = gw.next_record().await;
    assert_eq!(rec.request_id.as_str(), "rec-1");
    assert!(rec.stream);
    assert_eq!(rec.attempts.len(), 1);
    assert_eq!(rec.attempts[0].outcome, AttemptOutcome::Ok);
    let t = &rec.timings;
    let (d, f, e) = (
        t.dispatched.unwrap(),
        t.first_byte.unwrap(),
        t.done.unwrap(),
    );
    assert!(t.received <= d && d <= f && f <= e);
}

#[tokio::test]
async fn the_remaining_deadline_is_forwarded_upstream() {
    let gw = start().await;
    let resp = gw
        .client
        .post(format!("{}/v1/chat/completions", gw.url))
        .header("x-sluice-timeout-ms", "5000")
        .json(&body("ok", false))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let seen = gw.upstream.fake.headers.lock()[0].clone();
    let left: u64 = seen["x-sluice-timeout-ms"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((4_000..=5_000).contains(&left), "{left}");
    // Without a deadline nothing is forwarded.
    gw.chat(body("ok", false)).await;
    assert!(
        !gw.upstream.fake.headers.lock()[1].contains_key("x-sluice-timeout-ms"),
        "no budget, no header"
    );
}
