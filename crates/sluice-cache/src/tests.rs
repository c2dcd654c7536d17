use super::*;

fn req(body: &str) -> ChatRequest {
    ChatRequest::parse(body.as_bytes()).unwrap()
}

const BASE: &str =
    r#"{"model":"chat","messages":[{"role":"user","content":"hi"}],"temperature":0}"#;

#[test]
fn field_order_and_delivery_fields_do_not_change_the_key() {
    let k = key(Some("acme"), "chat", &req(BASE));
    let reordered =
        r#"{"temperature":0, "messages":[{"role":"user","content":"hi"}], "model":"chat"}"#;
    assert_eq!(key(Some("acme"), "chat", &req(reordered)), k);
    let streamed = r#"{"model":"chat","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}],"temperature":0}"#;
    assert_eq!(key(Some("acme"), "chat", &req(streamed)), k);
}

#[test]
fn every_other_difference_changes_the_key() {
    let k = key(Some("acme"), "chat", &req(BASE));
    let others = [
        r#"{"model":"chat","messages":[{"role":"user","content":"hi!"}],"temperature":0}"#,
        r#"{"model":"chat","messages":[{"role":"user","content":"hi"}],"temperature":1}"#,
        r#"{"model":"chat","messages":[{"role":"user","content":"hi"}],"temperature":0,"seed":1}"#,
        r#"{"model":"chat","messages":[{"role":"user","content":"hi"}]}"#,
    ];
    for o in others {
        assert_ne!(key(Some("acme"), "chat", &req(o)), k, "{o}");
    }
    assert_ne!(key(Some("globex"), "chat", &req(BASE)), k);
    assert_ne!(key(None, "chat", &req(BASE)), k);
    assert_ne!(
        key(Some(""), "chat", &req(BASE)),
        key(None, "chat", &req(BASE))
    );
    assert_ne!(key(Some("acme"), "other", &req(BASE)), k);
}

#[test]
fn cache_control_is_read() {
    let with = |v: &[&str]| {
        let mut h = HeaderMap::new();
        for x in v {
            h.append(header::CACHE_CONTROL, x.parse().unwrap());
        }
        Directive::of(&h)
    };
    assert_eq!(with(&[]), Directive::Use);
    assert_eq!(with(&["max-age=60"]), Directive::Use);
    assert_eq!(with(&["No-Cache"]), Directive::Refresh);
    assert_eq!(with(&["max-age=0, no-cache"]), Directive::Refresh);
    assert_eq!(with(&["no-cache", "no-store"]), Directive::Skip);
    assert_eq!(with(&["no-store"]), Directive::Skip);
}

fn stored(body: &str, at: Instant) -> Stored {
    Stored {
        body: Bytes::from(body.to_string()),
        cost_micros: 5,
        stored_at: at,
    }
}

#[tokio::test]
async fn an_answer_is_served_until_it_expires() {
    let cache = AnswerCache::new(Duration::from_secs(60), 1 << 20);
    let t0 = Instant::now();
    let k = key(None, "chat", &req(BASE));
    assert!(cache.get(&k, t0).await.is_none());
    cache.put(k, stored("{}", t0));
    let hit = cache.get(&k, t0 + Duration::from_secs(59)).await.unwrap();
    assert_eq!(hit.body, Bytes::from("{}"));
    assert!(cache.get(&k, t0 + Duration::from_secs(60)).await.is_none());
    // Expired entries are gone, not revived by an earlier clock.
    assert!(cache.get(&k, t0).await.is_none());
}

#[test]
fn the_cache_keeps_within_its_bytes() {
    let cache = AnswerCache::new(Duration::from_secs(60), 64 * 1024);
    let t0 = Instant::now();
    let big = "x".repeat(4000);
    for i in 0..200 {
        let body = format!(r#"{{"model":"chat","messages":[{{"role":"user","content":"{i}"}}]}}"#);
        cache.put(key(None, "chat", &req(&body)), stored(&big, t0));
    }
    let (entries, bytes) = cache.size();
    assert!(bytes <= 64 * 1024);
    assert!(entries < 200);
}

mod replayed {
    use super::super::replay::frames;
    use serde_json::Value;

    fn events(sse: &[u8]) -> Vec<String> {
        std::str::from_utf8(sse)
            .unwrap()
            .split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| e.strip_prefix("data: ").unwrap().to_string())
            .collect()
    }

    #[test]
    fn a_completion_becomes_chunks_usage_and_done() {
        let answer = r#"{"id":"c1","object":"chat.completion","created":7,"model":"m",
            "choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"},
                       {"index":1,"message":{"role":"assistant","content":null,
                        "tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{}"}}]},
                        "finish_reason":"tool_calls"}],
            "usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}"#;
        let ev = events(&frames(answer.as_bytes(), true).unwrap());
        assert_eq!(ev.len(), 4, "{ev:?}");
        assert_eq!(ev[3], "[DONE]");
        let first: Value = serde_json::from_str(&ev[0]).unwrap();
        assert_eq!(first["object"], "chat.completion.chunk");
        assert_eq!(first["id"], "c1");
        assert_eq!(first["choices"][0]["delta"]["content"], "Hello");
        assert_eq!(first["choices"][0]["finish_reason"], "stop");
        assert!(first["usage"].is_null());
        let second: Value = serde_json::from_str(&ev[1]).unwrap();
        assert_eq!(second["choices"][0]["index"], 1);
        assert_eq!(second["choices"][0]["delta"]["tool_calls"][0]["index"], 0);
        assert_eq!(
            second["choices"][0]["delta"]["tool_calls"][0]["function"]["name"],
            "f"
        );
        let usage: Value = serde_json::from_str(&ev[2]).unwrap();
        assert_eq!(usage["choices"], serde_json::json!([]));
        assert_eq!(usage["usage"]["total_tokens"], 5);

        let without = events(&frames(answer.as_bytes(), false).unwrap());
        assert_eq!(without.len(), 3);
        assert!(!without[0].contains("usage"));
    }

    #[test]
    fn what_is_not_a_completion_is_refused() {
        assert!(frames(b"not json", false).is_err());
        assert!(frames(b"[1,2]", false).is_err());
        assert!(frames(br#"{"id":"x"}"#, false).is_err());
    }
}

mod assembled {
    use serde_json::{Value, json};
    use sluice_core::Usage;

    use super::super::assemble::Assembler;

    fn frame(v: &Value) -> Vec<u8> {
        format!("data: {v}\n\n").into_bytes()
    }

    fn chunk(choices: Value) -> Vec<u8> {
        frame(
            &json!({"id": "c9", "object": "chat.completion.chunk", "created": 3,
            "model": "m", "choices": choices}),
        )
    }

    const DONE: &[u8] = b"data: [DONE]\n\n";

    #[test]
    fn deltas_are_joined_into_a_completion() {
        let mut a = Assembler::default();
        a.frame(&chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "content": ""}}]),
        ));
        a.frame(&chunk(
            json!([{"index": 0, "delta": {"reasoning_content": "think"}, "finish_reason": null}]),
        ));
        a.frame(&chunk(json!([{"index": 0, "delta": {"content": "Hel"}}])));
        a.frame(&chunk(json!([{"index": 0, "delta": {"content": "lo"}}])));
        a.frame(&chunk(json!([{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "t1", "type": "function", "function": {"name": "look", "arguments": "{\"q\":"}}]}}])));
        a.frame(&chunk(json!([{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": "1}"}}]}}])));
        a.frame(&chunk(
            json!([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]),
        ));
        a.frame(&frame(
            &json!({"id": "c9", "choices": [], "usage": {"prompt_tokens": 5}}),
        ));
        a.usage(Usage {
            prompt_tokens: 5,
            completion_tokens: 4,
            cached_tokens: 2,
            ..Usage::default()
        });
        a.frame(DONE);
        let v: Value = serde_json::from_slice(&a.finish().unwrap()).unwrap();
        assert_eq!(v["object"], "chat.completion");
        assert_eq!(v["id"], "c9");
        assert_eq!(v["created"], 3);
        let m = &v["choices"][0]["message"];
        assert_eq!(m["role"], "assistant");
        assert_eq!(m["content"], "Hello");
        assert_eq!(m["reasoning_content"], "think");
        assert_eq!(m["tool_calls"][0]["id"], "t1");
        assert_eq!(m["tool_calls"][0]["function"]["name"], "look");
        assert_eq!(m["tool_calls"][0]["function"]["arguments"], "{\"q\":1}");
        assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(v["usage"]["total_tokens"], 9);
        assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
    }

    #[test]
    fn a_stream_that_cannot_be_rebuilt_gives_nothing() {
        let good = || {
            let mut a = Assembler::default();
            a.frame(&chunk(json!([{"index": 0, "delta": {"content": "x"}}])));
            a
        };
        let ending = chunk(json!([{"index": 0, "delta": {}, "finish_reason": "stop"}]));
        // Baseline: this one is stored.
        let mut a = good();
        a.frame(&ending);
        a.frame(DONE);
        assert!(a.finish().is_some());

        let spoilers = [
            chunk(json!([{"index": 0, "delta": {"audio": {"id": "a"}}}])),
            chunk(json!([{"index": 0, "delta": {"content": "y"}, "logprobs": {"content": []}}])),
            chunk(json!([{"delta": {"content": "no index"}}])),
            frame(&json!({"error": {"message": "upstream failed"}})),
            b"data: not json\n\n".to_vec(),
        ];
        for s in spoilers {
            let mut a = good();
            a.frame(&s);
            a.frame(&ending);
            a.frame(DONE);
            assert!(a.finish().is_none(), "{}", String::from_utf8_lossy(&s));
        }
        // No [DONE]; a choice with no finish reason; nothing at all.
        let mut a = good();
        a.frame(&ending);
        assert!(a.finish().is_none());
        let mut a = good();
        a.frame(DONE);
        assert!(a.finish().is_none());
        let mut a = Assembler::default();
        a.frame(DONE);
        assert!(a.finish().is_none());
    }

    #[test]
    fn an_oversized_answer_is_not_kept() {
        let mut a = Assembler::default();
        let big = "x".repeat(64 * 1024);
        for _ in 0..(super::super::assemble::MAX_BYTES / big.len() + 1) {
            a.frame(&chunk(json!([{"index": 0, "delta": {"content": big}}])));
        }
        a.frame(&chunk(
            json!([{"index": 0, "delta": {}, "finish_reason": "stop"}]),
        ));
        a.frame(DONE);
        assert!(a.finish().is_none());
    }
}
