//! Google Gemini end to end: the simulator serving Gemini's and Vertex AI's URLs (a
//! credential asked for, implicit prompt caching, function calls sent whole, 429s with their
//! delay only in the body's `RetryInfo`) behind a gateway with `kind = "gemini"` providers,
//! reached by a chat completions client and by a Messages client.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod shared;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use sluice_gateway::GatewayBuilder;
use sluice_sim::server::SimServer;
use sluice_sim::spec::UpstreamSpec;

fn gemini() -> UpstreamSpec {
    UpstreamSpec {
        ttft_median: Duration::from_millis(5),
        per_token: Duration::from_millis(1),
        output_tokens_median: 8,
        ..UpstreamSpec::default()
    }
}

/// A gateway on loopback in front of the simulator: group `flash` on the Gemini API with a
/// key, group `vertex` on Vertex AI's URLs with a token file, group `paced` on an upstream
/// that takes 60 requests a minute.
async fn gateway(token: &std::path::Path) -> String {
    let paced = UpstreamSpec {
        rpm: 60,
        rpm_burst: Some(1),
        ..gemini()
    };
    let sim = SimServer::new(
        &[("g".to_string(), gemini()), ("paced".to_string(), paced)],
        1,
    );
    let sim_addr = shared::simulator(sim).await;
    let text = format!(
        r#"
[server]
listen = "127.0.0.1:0"
[ledger]
store = "off"
[providers.gemini]
kind = "gemini"
base_url = "http://{sim_addr}/g/v1beta"
api_key_env = "GEMINI_API_KEY"
[providers.vertex]
kind = "gemini"
api = "vertex"
project = "acme-prod"
location = "europe-west4"
base_url = "http://{sim_addr}/g"
token_file = "{token}"
[providers.gemini-paced]
kind = "gemini"
base_url = "http://{sim_addr}/paced/v1beta"
api_key_env = "GEMINI_API_KEY"
[models.flash]
deployments = [{{ provider = "gemini", model = "gemini-2.5-flash" }}]
[models.vertex]
deployments = [{{ provider = "vertex", model = "gemini-2.5-flash" }}]
[models.paced]
deployments = [{{ provider = "gemini-paced", model = "gemini-2.5-flash" }}]
"#,
        token = token.display()
    );
    let env: BTreeMap<String, String> = [("GEMINI_API_KEY".to_string(), "k".to_string())].into();
    let cfg = sluice_config::gateway::load(&text, &env, &[]).unwrap();
    let gw = GatewayBuilder::from_config(&cfg, &env)
        .unwrap()
        .build()
        .unwrap();
    shared::gateway_url(gw).await
}

async fn post(url: &str, path: &str, body: Value) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(format!("{url}{path}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

async fn stream(url: &str, body: Value) -> Vec<Value> {
    let text = reqwest::Client::new()
        .post(format!("{url}/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let data: Vec<&str> = text
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .collect();
    assert_eq!(data.last(), Some(&"[DONE]"), "{text}");
    data.iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .collect()
}

fn long_prompt(model: &str, stream: bool) -> Value {
    json!({
        "model": model,
        "stream": stream,
        "stream_options": {"include_usage": true},
        "messages": [
            {"role": "system", "content": "You review contracts. ".repeat(400)},
            {"role": "user", "content": "What does clause 4 say?"}
        ]
    })
}

fn token_file() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-sim-gemini-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("token");
    std::fs::write(&path, "ya29.access-token\n").unwrap();
    path
}

#[tokio::test]
async fn both_url_shapes_answer_with_usage_and_cached_tokens_complete_and_streamed() {
    let url = gateway(&token_file()).await;
    for group in ["flash", "vertex"] {
        let ask = long_prompt(group, false);
        let (status, first) = post(&url, "/v1/chat/completions", ask.clone()).await;
        assert_eq!(status, 200, "{group}: {first}");
        assert!(first["choices"][0]["message"]["content"].is_string());
        assert_eq!(first["choices"][0]["finish_reason"], "stop");
        assert!(first["usage"]["prompt_tokens"].as_u64().unwrap() > 1024);
        let (_, again) = post(&url, "/v1/chat/completions", ask).await;
        let cached = again["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap_or(0);
        assert!(
            cached >= 1024,
            "{group}: the prompt cache was read: {again}"
        );
        let chunks = stream(&url, long_prompt(group, true)).await;
        let content: String = chunks
            .iter()
            .filter_map(|v| v["choices"][0]["delta"]["content"].as_str())
            .collect();
        assert!(!content.is_empty(), "{group}: {chunks:?}");
        let usage = chunks.iter().find(|v| v["usage"].is_object()).unwrap();
        assert!(
            usage["usage"]["prompt_tokens_details"]["cached_tokens"]
                .as_u64()
                .unwrap()
                >= 1024,
            "{group}: the stream's usage carries the cached tokens: {usage}"
        );
        assert!(usage["usage"]["completion_tokens"].as_u64().unwrap() > 0);
    }
}

fn lookup(stream: bool) -> Value {
    json!({
        "model": "flash",
        "stream": stream,
        "messages": [{"role": "user", "content": "Look up rule 7."}],
        "tools": [{"type": "function", "function": {"name": "lookup", "description": "a rule",
            "parameters": {"type": "object", "properties": {"rule": {"type": "integer"}},
                "required": ["rule"], "additionalProperties": false}}}],
        "tool_choice": "required"
    })
}

#[tokio::test]
async fn tool_calls_and_json_answers_come_back_in_chat_shape_complete_and_streamed() {
    let url = gateway(&token_file()).await;
    let (status, a) = post(&url, "/v1/chat/completions", lookup(false)).await;
    assert_eq!(status, 200, "{a}");
    let call = &a["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "lookup");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert!(args["rule"].is_i64(), "{args}");
    assert_eq!(a["choices"][0]["finish_reason"], "tool_calls");
    let chunks = stream(&url, lookup(true)).await;
    let streamed = chunks
        .iter()
        .find_map(|v| {
            v["choices"][0]["delta"]["tool_calls"][0]
                .as_object()
                .cloned()
        })
        .unwrap();
    assert_eq!(streamed["function"]["name"], "lookup");
    assert!(
        chunks
            .iter()
            .any(|v| v["choices"][0]["finish_reason"] == "tool_calls")
    );
    // The call answered on the next turn: the result goes back as a functionResponse.
    let mut next = lookup(false);
    next["tool_choice"] = json!("auto");
    next["messages"] = json!([
        {"role": "user", "content": "Look up rule 7."},
        {"role": "assistant", "content": null, "tool_calls": [call.clone()]},
        {"role": "tool", "tool_call_id": call["id"], "content": "rule 7: no auto-renewal"}
    ]);
    let (status, b) = post(&url, "/v1/chat/completions", next).await;
    assert_eq!(status, 200, "{b}");
    assert!(b["choices"][0]["message"]["content"].is_string());
    let schema = json!({"type": "object", "properties": {"verdict": {"type": "string", "enum": ["ok", "risk"]}},
        "required": ["verdict"]});
    let (status, j) = post(
        &url,
        "/v1/chat/completions",
        json!({"model": "vertex", "messages": [{"role": "user", "content": "Judge clause 4."}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "v", "schema": schema}}}),
    )
    .await;
    assert_eq!(status, 200, "{j}");
    let verdict: Value =
        serde_json::from_str(j["choices"][0]["message"]["content"].as_str().unwrap()).unwrap();
    assert_eq!(verdict["verdict"], "ok");
}

#[tokio::test]
async fn messages_and_responses_clients_reach_gemini_and_bad_input_is_named_before_it_is_sent() {
    let url = gateway(&token_file()).await;
    let (status, m) = post(
        &url,
        "/v1/messages",
        json!({"model": "flash", "max_tokens": 64, "system": "Be brief.",
               "messages": [{"role": "user", "content": "hello"}]}),
    )
    .await;
    assert_eq!(status, 200, "{m}");
    assert_eq!(m["type"], "message");
    assert!(m["usage"]["input_tokens"].as_u64().unwrap() > 0);
    assert!(m["content"][0]["text"].is_string());
    // And a Responses client, with its instructions, a tool and a reasoning effort.
    let (status, r) = post(
        &url,
        "/v1/responses",
        json!({"model": "flash", "instructions": "Be brief.", "input": "hello",
               "max_output_tokens": 64, "reasoning": {"effort": "low"},
               "tools": [{"type": "function", "name": "weather",
                          "parameters": {"type": "object"}}]}),
    )
    .await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["status"], "completed", "{r}");
    assert!(r["usage"]["input_tokens"].as_u64().unwrap() > 0);
    let (status, e) = post(
        &url,
        "/v1/chat/completions",
        json!({"model": "flash", "messages": [{"role": "user", "content": "hi"}],
               "logprobs_of_the_future": true}),
    )
    .await;
    assert_eq!(status, 400, "{e}");
    assert_eq!(e["error"]["param"], "logprobs_of_the_future", "{e}");
}

#[tokio::test]
async fn throttling_with_the_delay_only_in_the_body_is_paced_not_passed_on() {
    let url = gateway(&token_file()).await;
    let asks = (0..3).map(|i| {
        let url = url.clone();
        async move {
            post(
                &url,
                "/v1/chat/completions",
                json!({"model": "paced", "messages": [{"role": "user", "content": format!("q{i}")}]}),
            )
            .await
        }
    });
    let answers = futures::future::join_all(asks).await;
    for (status, body) in &answers {
        assert_eq!(*status, 200, "{body}");
    }
}

fn gemini_ask() -> Value {
    json!({
        "systemInstruction": {"parts": [{"text": "You review contracts. ".repeat(400)}]},
        "contents": [{"role": "user", "parts": [{"text": "What does clause 4 say?"}]}],
        "generationConfig": {"maxOutputTokens": 64}
    })
}

#[tokio::test]
async fn a_gemini_client_reaches_a_gemini_upstream_through_sluice_complete_and_streamed() {
    let url = gateway(&token_file()).await;
    let path = "/v1beta/models/vertex:generateContent";
    let (status, first) = post(&url, path, gemini_ask()).await;
    assert_eq!(status, 200, "{first}");
    assert!(first["candidates"][0]["content"]["parts"][0]["text"].is_string());
    assert_eq!(first["candidates"][0]["finishReason"], "STOP");
    let (_, again) = post(&url, path, gemini_ask()).await;
    let cached = again["usageMetadata"]["cachedContentTokenCount"]
        .as_u64()
        .unwrap_or(0);
    assert!(cached >= 1024, "the prompt cache was read: {again}");
    let text = reqwest::Client::new()
        .post(format!(
            "{url}/v1beta/models/flash:streamGenerateContent?alt=sse"
        ))
        .json(&gemini_ask())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events: Vec<Value> = text
        .split("\r\n\r\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let said: String = events
        .iter()
        .filter_map(|e| e["candidates"][0]["content"]["parts"][0]["text"].as_str())
        .collect();
    assert!(!said.is_empty(), "{text}");
    let last = events.last().unwrap();
    assert_eq!(last["candidates"][0]["finishReason"], "STOP", "{text}");
    assert!(
        last["usageMetadata"]["candidatesTokenCount"]
            .as_u64()
            .unwrap()
            > 0
    );
    let (status, e) = post(&url, "/v1beta/models/flash:embedContent", gemini_ask()).await;
    assert_eq!(status, 400, "{e}");
    assert_eq!(e["error"]["status"], "INVALID_ARGUMENT");
}
