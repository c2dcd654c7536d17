//! The Anthropic adapter end to end: translation out, translation back, streams and errors.

use serde_json::{Value, json};

use crate::support::{body, sse_data, start};

#[tokio::test]
async fn a_chat_request_reaches_anthropic_translated_and_comes_back_openai_shaped() {
    let gw = start().await;
    let resp = gw
        .chat(json!({
            "model": "claude",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "hi"}
            ],
            "temperature": 0.1
        }))
        .await;
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["choices"][0]["message"]["content"], "Bonjour");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["usage"]["prompt_tokens"], 912);
    assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 900);
    let sent = gw.upstream.fake.bodies.lock()[0].clone();
    assert_eq!(sent["model"], "claude-sonnet");
    assert_eq!(
        sent["system"],
        json!([{"type": "text", "text": "Be brief."}])
    );
    assert_eq!(
        sent["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    );
    assert_eq!(sent["max_tokens"], 777, "the configured default");
    let h = gw.upstream.fake.headers.lock()[0].clone();
    assert_eq!(h["x-api-key"], "sk-test");
    assert_eq!(h["anthropic-version"], "2023-06-01");
    let rec = gw.next_record().await;
    assert_eq!(rec.usage.unwrap().cached_tokens, 900);
}

#[tokio::test]
async fn an_anthropic_stream_comes_back_as_openai_chunks() {
    let gw = start().await;
    let mut b = body("claude", true);
    b["stream_options"] = json!({"include_usage": true});
    let resp = gw.chat(b).await;
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    let data = sse_data(&text);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let content: String = chunks
        .iter()
        .filter_map(|c| {
            c.pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
        })
        .collect();
    assert_eq!(content, "Bonjour");
    let usage = chunks.iter().find(|c| c.get("usage").is_some()).unwrap();
    assert_eq!(usage["usage"]["completion_tokens"], 42);
    let rec = gw.next_record().await;
    assert_eq!(rec.usage.unwrap().completion_tokens, 42);
    assert_eq!(gw.upstream.fake.bodies.lock()[0]["stream"], true);
}

#[tokio::test]
async fn anthropic_errors_keep_their_status_in_openai_shape() {
    let gw = start().await;
    let resp = gw.chat(body("claude-limited", false)).await;
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "3");
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["type"], "rate_limit_error");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("rate limit")
    );
}

#[tokio::test]
async fn prompt_cache_breakpoints_are_marked_for_clients_that_mark_none() {
    let gw = start().await;
    let rules = "Rule: every clause names its parties. ".repeat(200);
    let conversation = |model: &str| {
        json!({
            "model": model,
            "messages": [
                {"role": "system", "content": rules},
                {"role": "user", "content": "Review clause 1."},
                {"role": "assistant", "content": "Clause 1 is fine."},
                {"role": "user", "content": "And clause 2?"}
            ]
        })
    };
    assert_eq!(gw.chat(conversation("claude")).await.status(), 200);
    let sent = gw.upstream.fake.bodies.lock()[0].clone();
    assert_eq!(
        sent["system"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    // The conversation so far (up to the last answer) is marked; the new question is not.
    assert_eq!(
        sent["messages"][1]["content"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert!(
        sent["messages"][2]["content"][0]
            .get("cache_control")
            .is_none()
    );
    assert!(
        sent["messages"][0]["content"][0]
            .get("cache_control")
            .is_none()
    );

    // A provider configured with `cache_breakpoints = false` sends the prompt unmarked.
    assert_eq!(gw.chat(conversation("claude-unmarked")).await.status(), 200);
    let sent = gw.upstream.fake.bodies.lock()[1].clone();
    assert!(!sent.to_string().contains("cache_control"), "{sent}");
}
