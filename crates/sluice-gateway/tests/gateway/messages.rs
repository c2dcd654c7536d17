//! Anthropic Messages as ingress: a Messages request walks like any other, to an
//! OpenAI-compatible upstream (translated both ways) or an Anthropic one, and its answer,
//! stream and errors come back in Messages' shape.

use serde_json::{Value, json};

use crate::support::{Running, start, start_with};

async fn messages(gw: &Running, body: Value) -> reqwest::Response {
    gw.client
        .post(format!("{}/v1/messages", gw.url))
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .unwrap()
}

fn ask(model: &str, stream: bool) -> Value {
    json!({
        "model": model, "max_tokens": 64, "stream": stream,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    })
}

async fn responses(gw: &Running, body: Value) -> reqwest::Response {
    gw.post("/v1/responses", body).await
}

async fn embed(gw: &Running, body: Value) -> reqwest::Response {
    gw.post("/v1/embeddings", body).await
}

/// Each SSE event's name and data.
fn events(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let mut name = String::new();
            let mut data = Value::Null;
            for line in e.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = n.to_string();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(d).unwrap();
                }
            }
            (name, data)
        })
        .collect()
}

#[tokio::test]
async fn a_message_to_an_openai_upstream_is_translated_both_ways() {
    let gw = start().await;
    let resp = messages(&gw, ask("ok", false)).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-sluice-upstream"], "fake-ok");
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["type"], "message");
    assert_eq!(v["role"], "assistant");
    assert_eq!(
        v["content"],
        json!([{"type": "text", "text": "Hello from upstream"}])
    );
    assert_eq!(v["stop_reason"], "end_turn");
    // 2006 prompt tokens of which 1920 cached: Messages counts the uncached apart.
    assert_eq!(v["usage"]["input_tokens"], 86);
    assert_eq!(v["usage"]["cache_read_input_tokens"], 1920);
    assert_eq!(v["usage"]["output_tokens"], 300);
    let sent = gw.upstream.fake.bodies.lock()[0].clone();
    assert_eq!(sent["model"], "ok");
    assert_eq!(sent["max_tokens"], 64);
    assert_eq!(sent["messages"][0]["role"], "system");
    assert_eq!(
        sent["messages"][1],
        json!({"role": "user", "content": "hi"})
    );
    // The call is recorded and billed like any other.
    let rec = gw.next_record().await;
    assert_eq!(rec.status, 200);
    assert_eq!(rec.usage.unwrap().cached_tokens, 1920);
}

#[tokio::test]
async fn a_message_to_an_anthropic_upstream_passes_through_unchanged() {
    let gw = start().await;
    // A history with a signed thinking block, which a chat history could not carry.
    let mut body = ask("claude", false);
    body["thinking"] = json!({"type": "enabled", "budget_tokens": 2048});
    body["messages"] = json!([
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "use the tool", "signature": "sig-0"},
            {"type": "tool_use", "id": "tu_1", "name": "weather", "input": {"city": "Oslo"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "-3C"}]}
    ]);
    let resp = gw
        .client
        .post(format!("{}/v1/messages", gw.url))
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "interleaved-thinking-2025-05-14")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    // The upstream's own answer: its thinking block keeps its signature.
    assert_eq!(
        v["content"][0],
        json!({"type": "thinking", "thinking": "hmm", "signature": "sig-1"})
    );
    assert_eq!(v["content"][1]["text"], "Bonjour");
    assert_eq!(v["usage"]["cache_read_input_tokens"], 900);
    let mut sent = gw.upstream.fake.bodies.lock()[0].clone();
    assert_eq!(sent["model"], "claude-sonnet");
    sent["model"] = body["model"].clone();
    assert_eq!(sent, body, "the client's body, only its model swapped");
    let h = gw.upstream.fake.headers.lock()[0].clone();
    assert_eq!(h["anthropic-beta"], "interleaved-thinking-2025-05-14");
    assert_eq!(h["anthropic-version"], "2023-06-01");
    assert_eq!(
        h["x-api-key"], "sk-test",
        "the upstream's key, not the client's"
    );
    // Billed from the upstream's usage like any call.
    let rec = gw.next_record().await;
    assert_eq!(rec.usage.unwrap().cached_tokens, 900);
}

#[tokio::test]
async fn a_streamed_message_comes_back_as_messages_events() {
    let gw = start().await;
    for model in ["ok", "claude"] {
        let resp = messages(&gw, ask(model, true)).await;
        assert_eq!(resp.status(), 200, "{model}");
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        let evs = events(&resp.text().await.unwrap());
        let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
        if model == "ok" {
            assert_eq!(names.first(), Some(&"message_start"), "{model}: {names:?}");
            assert_eq!(names.get(1), Some(&"ping"));
            assert_eq!(&names[names.len() - 2..], ["message_delta", "message_stop"]);
        } else {
            // An Anthropic upstream's own events, as it sent them (it sends no ping).
            assert_eq!(
                names,
                [
                    "message_start",
                    "content_block_start",
                    "content_block_delta",
                    "content_block_delta",
                    "content_block_stop",
                    "message_delta",
                    "message_stop"
                ]
            );
            assert_eq!(evs[0].1["message"]["model"], "claude-x");
        }
        let text: String = evs
            .iter()
            .filter_map(|(_, d)| d.pointer("/delta/text").and_then(Value::as_str))
            .collect();
        let want = if model == "ok" { "Hello" } else { "Bonjour" };
        assert_eq!(text, want, "{model}");
        let delta = &evs[evs.len() - 2].1;
        assert_eq!(delta["delta"]["stop_reason"], "end_turn");
        assert!(delta["usage"]["output_tokens"].as_u64().unwrap() > 0);
        let rec = gw.next_record().await;
        assert!(
            rec.usage.unwrap().completion_tokens > 0,
            "{model}: usage recorded"
        );
    }
}

#[tokio::test]
async fn a_cut_stream_ends_with_an_error_event() {
    let gw = start().await;
    let resp = messages(&gw, ask("truncate", true)).await;
    assert_eq!(resp.status(), 200);
    let evs = events(&resp.text().await.unwrap());
    let (name, data) = evs.last().unwrap();
    assert_eq!(name, "error");
    assert_eq!(data["type"], "error");
    assert!(data["error"]["message"].as_str().unwrap().len() > 5);
}

#[tokio::test]
async fn refusals_are_in_messages_error_shape_with_its_statuses() {
    let gw = start().await;
    let mut no_max = ask("ok", false);
    no_max.as_object_mut().unwrap().remove("max_tokens");
    let resp = messages(&gw, no_max).await;
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "invalid_request_error");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_tokens")
    );

    let resp = messages(&gw, ask("limited", false)).await;
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "7");
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["type"], "rate_limit_error");
    assert_eq!(v["error"]["message"], "Rate limit reached");

    let resp = messages(&gw, ask("no-such-model", false)).await;
    assert_eq!(resp.status(), 404);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["type"], "not_found_error");

    let resp = gw
        .client
        .post(format!("{}/v1/messages", gw.url))
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["type"], "invalid_request_error");
    // Nothing refused went upstream.
    assert!(
        gw.upstream
            .fake
            .bodies
            .lock()
            .iter()
            .all(|b| b["model"] != "ok")
    );
}

#[tokio::test]
async fn a_cached_answer_is_served_in_messages_shape() {
    let gw = start_with("\n[cache]\nenabled = true\nttl = \"1m\"\nmax_bytes = 1048576\n").await;
    // Stored in the internal form from a Messages request, served again as a message, and
    // replayed as Messages events to the same asked as a stream. A request written in another
    // API is keyed whole (what its chat form leaves out, thinking blocks say, counts), so a
    // chat request with the same content is another key.
    let ask_it = json!({"model": "ok", "max_tokens": 64, "temperature": 0,
        "messages": [{"role": "user", "content": "same question"}]});
    let first = messages(&gw, ask_it).await;
    assert_eq!(first.status(), 200);
    assert_eq!(first.headers()["x-sluice-cache"], "miss");
    let _ = first.text().await;
    let _ = gw.next_record().await;
    let resp = messages(
        &gw,
        json!({"model": "ok", "max_tokens": 64, "temperature": 0,
            "messages": [{"role": "user", "content": "same question"}]}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let hit = resp.headers().get("x-sluice-cache").cloned();
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["type"], "message");
    assert_eq!(v["content"][0]["text"], "Hello from upstream");
    assert_eq!(hit.unwrap(), "hit");
    // The same asked as a stream: the stored answer replayed as Messages events.
    let resp = messages(
        &gw,
        json!({"model": "ok", "max_tokens": 64, "temperature": 0, "stream": true,
            "messages": [{"role": "user", "content": "same question"}]}),
    )
    .await;
    assert_eq!(resp.headers()["x-sluice-cache"], "hit");
    let evs = events(&resp.text().await.unwrap());
    assert_eq!(evs.last().unwrap().0, "message_stop");
    assert_eq!(gw.upstream.fake.bodies.lock().len(), 1);
}

#[tokio::test]
async fn count_tokens_counts_the_prompt() {
    let gw = start().await;
    let count = |body: Value| {
        gw.client
            .post(format!("{}/v1/messages/count_tokens", gw.url))
            .json(&body)
            .send()
    };
    let short = count(json!({"model": "ok", "messages": [{"role": "user", "content": "hi"}]}))
        .await
        .unwrap();
    assert_eq!(short.status(), 200);
    let short: Value = short.json().await.unwrap();
    let long = count(json!({"model": "ok",
        "messages": [{"role": "user", "content": "hello there ".repeat(50)}]}))
    .await
    .unwrap()
    .json::<Value>()
    .await
    .unwrap();
    let (s, l) = (
        short["input_tokens"].as_u64().unwrap(),
        long["input_tokens"].as_u64().unwrap(),
    );
    assert!(s > 0 && l > s + 90, "{s} {l}");
    let bad = count(json!({"model": "ok"})).await.unwrap();
    assert_eq!(bad.status(), 400);
    let v: Value = bad.json().await.unwrap();
    assert_eq!(v["error"]["type"], "invalid_request_error");
    assert!(
        gw.upstream.fake.bodies.lock().is_empty(),
        "counting sends nothing upstream"
    );
}

#[tokio::test]
async fn a_responses_request_walks_like_a_chat_one() {
    let gw = start().await;
    for model in ["ok", "claude"] {
        let resp = responses(
            &gw,
            json!({"model": model, "instructions": "Be brief.", "input": "hi",
                "max_output_tokens": 40}),
        )
        .await;
        assert_eq!(resp.status(), 200, "{model}");
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["object"], "response");
        assert_eq!(v["status"], "completed");
        let want = if model == "ok" {
            "Hello from upstream"
        } else {
            "Bonjour"
        };
        assert_eq!(v["output"][0]["content"][0]["text"], want);
        assert!(v["usage"]["input_tokens"].as_u64().unwrap() > 0);
        let rec = gw.next_record().await;
        assert_eq!(rec.status, 200);
    }
    let sent = gw.upstream.fake.bodies.lock()[0].clone();
    assert_eq!(
        sent["messages"][0],
        json!({"role": "system", "content": "Be brief."})
    );
    assert_eq!(sent["max_tokens"], 40);

    let resp = responses(&gw, json!({"model": "ok", "input": "hi", "stream": true})).await;
    assert_eq!(resp.status(), 200);
    let evs = events(&resp.text().await.unwrap());
    assert_eq!(evs[0].0, "response.created");
    let (last, data) = evs.last().unwrap();
    assert_eq!(last, "response.completed");
    assert_eq!(data["response"]["output"][0]["content"][0]["text"], "Hello");

    let resp = responses(
        &gw,
        json!({"model": "ok", "input": "hi", "previous_response_id": "resp_1"}),
    )
    .await;
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["param"], "previous_response_id");
}

#[tokio::test]
async fn embeddings_go_through_a_model_group_as_they_came() {
    let gw = start_with(
        "\n[cache]\nenabled = true\nttl = \"1m\"\nmax_bytes = 1048576\n\
         [models.embed]\ndeployments = [{ provider = \"fake\", model = \"text-embed\" }]\n\
         [models.embed-down]\ndeployments = [{ provider = \"fake\", model = \"broken-embed\" }]\n\
         fallbacks = [\"embed\"]\n\
         [models.embed-claude]\ndeployments = [{ provider = \"claude\", model = \"claude-sonnet\" }]\n",
    )
    .await;
    let resp = embed(&gw, json!({"model": "embed", "input": ["a", "b"]})).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-sluice-cache"], "miss");
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["data"].as_array().unwrap().len(), 2);
    assert_eq!(v["data"][1]["embedding"], json!(crate::support::VECTOR));
    assert_eq!(v["usage"]["prompt_tokens"], 10);
    let sent = gw.upstream.fake.bodies.lock()[0].clone();
    assert_eq!(
        sent,
        json!({"model": "text-embed", "input": ["a", "b"]}),
        "as it came"
    );
    let rec = gw.next_record().await;
    assert_eq!(rec.status, 200);
    let usage = rec.usage.unwrap();
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (10, 0));

    // The same asked again: from the answer cache; in base64: another answer, as it came.
    let again = embed(&gw, json!({"model": "embed", "input": ["a", "b"]})).await;
    assert_eq!(again.headers()["x-sluice-cache"], "hit");
    let b64 = embed(
        &gw,
        json!({"model": "embed", "input": "a", "encoding_format": "base64", "dimensions": 3}),
    )
    .await;
    assert_eq!(b64.headers()["x-sluice-cache"], "miss");
    let v: Value = b64.json().await.unwrap();
    assert_eq!(v["data"][0]["embedding"], "AAAAPwAAgL4AAIA/");
    // Tokens in, and a failing group falls back to the next.
    let resp = embed(&gw, json!({"model": "embed-down", "input": [[1, 2], [3]]})).await;
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["x-sluice-route"]
            .to_str()
            .unwrap()
            .contains("fallback embed-down -> embed")
    );
    // Refusals name the field; an Anthropic upstream serves no embeddings.
    let resp = embed(&gw, json!({"model": "embed", "input": ""})).await;
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["param"], "input");
    let resp = embed(&gw, json!({"model": "embed-claude", "input": "a"})).await;
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("serves no embeddings")
    );
}

#[tokio::test]
async fn a_responses_request_to_an_upstream_that_serves_it_passes_through() {
    let gw = start().await;
    let body = json!({"model": "native", "input": [{"role": "user", "content": "hi"}],
        "reasoning": {"effort": "low"}, "include": ["reasoning.encrypted_content"]});
    let resp = responses(&gw, body.clone()).await;
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    // The upstream's own response, as it came.
    assert_eq!(v["id"], "resp_up");
    assert_eq!(v["output"][0]["content"][0]["text"], "Hello from responses");
    let mut sent = gw.upstream.fake.bodies.lock()[0].clone();
    sent["model"] = body["model"].clone();
    assert_eq!(sent, body, "the client's body, only its model swapped");
    let rec = gw.next_record().await;
    let usage = rec.usage.unwrap();
    assert_eq!(
        (
            usage.prompt_tokens,
            usage.cached_tokens,
            usage.completion_tokens
        ),
        (40, 32, 6)
    );

    let resp = responses(
        &gw,
        json!({"model": "native", "input": "hi", "stream": true}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let evs = events(&resp.text().await.unwrap());
    // The upstream's own nine events, numbered as it numbered them (sluice's own
    // translation would add `response.in_progress`).
    assert_eq!(evs.len(), 9, "{evs:?}");
    for (i, (name, data)) in evs.iter().enumerate() {
        assert_eq!(data["type"], name.as_str());
        assert_eq!(data["sequence_number"], i);
    }
    assert_eq!(evs[8].0, "response.completed");
    assert_eq!(evs[0].1["response"]["id"], "resp_up");
    let rec = gw.next_record().await;
    assert_eq!(rec.usage.unwrap().completion_tokens, 6);
}
