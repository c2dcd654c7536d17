//! The answer cache over real HTTP, configured from TOML: a repeated request is answered by
//! sluice alone, as JSON or replayed as SSE, for OpenAI and (translated) Anthropic upstreams,
//! whether the stored answer came complete or was assembled from a stream.

use crate::support::{Running, body, sse_data, start_with};

const CACHE: &str = "\n[cache]\nenabled = true\nttl = \"1m\"\nmax_bytes = 1048576\n";

#[tokio::test]
async fn a_configured_cache_answers_repeats_without_the_upstream() {
    let gw = start_with(CACHE).await;
    let first = gw.chat(body("ok", false)).await;
    assert_eq!(first.status(), 200);
    assert_eq!(first.headers()["x-sluice-cache"], "miss");
    let first_text = first.text().await.unwrap();
    let again = gw.chat(body("ok", false)).await;
    assert_eq!(again.status(), 200);
    assert_eq!(again.headers()["x-sluice-cache"], "hit");
    assert_eq!(again.headers()["x-sluice-upstream"], "none");
    assert_eq!(again.text().await.unwrap(), first_text);
    assert_eq!(gw.upstream.fake.bodies.lock().len(), 1);

    // The same request asking for a stream: the stored answer, replayed as SSE.
    let streamed = gw.chat(body("ok", true)).await;
    assert_eq!(streamed.status(), 200);
    assert_eq!(streamed.headers()["x-sluice-cache"], "hit");
    assert_eq!(streamed.headers()["content-type"], "text/event-stream");
    let events = sse_data(&streamed.text().await.unwrap());
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let first: serde_json::Value = serde_json::from_str(&first_text).unwrap();
    let chunk: serde_json::Value = serde_json::from_str(&events[0]).unwrap();
    assert_eq!(
        chunk["choices"][0]["delta"]["content"],
        first["choices"][0]["message"]["content"]
    );
    assert_eq!(gw.upstream.fake.bodies.lock().len(), 1);
}

#[tokio::test]
async fn a_translated_answer_is_stored_as_the_client_got_it() {
    let gw = start_with(CACHE).await;
    let first = gw.chat(body("claude", false)).await;
    assert_eq!(first.status(), 200);
    let first_text = first.text().await.unwrap();
    let again = gw.chat(body("claude", false)).await;
    assert_eq!(again.headers()["x-sluice-cache"], "hit");
    let text = again.text().await.unwrap();
    assert_eq!(text, first_text);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["object"], "chat.completion", "{v}");
    assert_eq!(gw.upstream.fake.bodies.lock().len(), 1);
}

/// Streams `model`'s answer to a request that misses the cache; returns its text, joined.
async fn streamed_miss(gw: &Running, model: &str) -> String {
    let first = gw.chat(body(model, true)).await;
    assert_eq!(first.headers()["x-sluice-cache"], "miss");
    let text: String = sse_data(&first.text().await.unwrap())
        .iter()
        .filter_map(|e| serde_json::from_str::<serde_json::Value>(e).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(String::from)
        })
        .collect();
    assert!(!text.is_empty());
    text
}

/// The same request, complete: a hit holding the stream's text, joined.
async fn complete_hit(gw: &Running, model: &str, streamed: &str) -> serde_json::Value {
    let again = gw.chat(body(model, false)).await;
    assert_eq!(again.headers()["x-sluice-cache"], "hit");
    let v: serde_json::Value = again.json().await.unwrap();
    assert_eq!(v["object"], "chat.completion", "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], streamed, "{v}");
    assert_eq!(gw.upstream.fake.bodies.lock().len(), 1);
    v
}

#[tokio::test]
async fn a_streamed_answer_is_assembled_and_stored() {
    let gw = start_with(CACHE).await;
    let streamed = streamed_miss(&gw, "ok").await;
    let v = complete_hit(&gw, "ok", &streamed).await;
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["usage"]["total_tokens"], 2306);
    assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 1920);
}

#[tokio::test]
async fn a_translated_stream_is_assembled_too() {
    let gw = start_with(CACHE).await;
    let streamed = streamed_miss(&gw, "claude").await;
    complete_hit(&gw, "claude", &streamed).await;
}
