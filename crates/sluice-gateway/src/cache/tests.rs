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

#[test]
fn an_answer_is_served_until_it_expires() {
    let cache = AnswerCache::new(Duration::from_secs(60), 1 << 20);
    let t0 = Instant::now();
    let k = key(None, "chat", &req(BASE));
    assert!(cache.get(&k, t0).is_none());
    cache.put(k, stored("{}", t0));
    let hit = cache.get(&k, t0 + Duration::from_secs(59)).unwrap();
    assert_eq!(hit.body, Bytes::from("{}"));
    assert!(cache.get(&k, t0 + Duration::from_secs(60)).is_none());
    // Expired entries are gone, not revived by an earlier clock.
    assert!(cache.get(&k, t0).is_none());
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
    cache.entries.run_pending_tasks();
    assert!(cache.entries.weighted_size() <= 64 * 1024);
    assert!(cache.entries.entry_count() < 200);
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
