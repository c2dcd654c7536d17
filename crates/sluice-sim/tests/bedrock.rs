//! AWS Bedrock end to end: the simulator serving Converse and ConverseStream (a SigV4
//! signature asked for, the binary event stream, prompt caching, bare 429
//! `ThrottlingException`s) behind a gateway with `kind = "bedrock"` providers signing with
//! credentials from the environment, reached by a chat completions client and by a Messages
//! client.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod shared;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use sluice_gateway::GatewayBuilder;
use sluice_sim::server::SimServer;
use sluice_sim::spec::UpstreamSpec;

fn bedrock() -> UpstreamSpec {
    UpstreamSpec {
        ttft_median: Duration::from_millis(5),
        per_token: Duration::from_millis(1),
        output_tokens_median: 8,
        ..UpstreamSpec::default()
    }
}

/// A gateway in front of the simulator: group `nova` signed with SigV4, group `keyed` with a
/// Bedrock API key, group `paced` on an upstream that takes 60 requests a minute.
async fn gateway() -> String {
    let paced = UpstreamSpec {
        rpm: 60,
        rpm_burst: Some(1),
        ..bedrock()
    };
    let sim = SimServer::new(
        &[("b".to_string(), bedrock()), ("paced".to_string(), paced)],
        1,
    );
    let sim_addr = shared::simulator(sim).await;
    let text = format!(
        r#"
[server]
listen = "127.0.0.1:0"
[ledger]
store = "off"
[providers.bedrock]
kind = "bedrock"
base_url = "http://{sim_addr}/b"
region = "us-east-1"
[providers.bedrock-key]
kind = "bedrock"
base_url = "http://{sim_addr}/b"
region = "us-east-1"
api_key_env = "AWS_BEARER_TOKEN_BEDROCK"
[providers.bedrock-paced]
kind = "bedrock"
base_url = "http://{sim_addr}/paced"
region = "us-east-1"
[models.nova]
deployments = [{{ provider = "bedrock", model = "amazon.nova-pro-v1:0" }}]
[models.keyed]
deployments = [{{ provider = "bedrock-key", model = "amazon.nova-lite-v1:0" }}]
[models.paced]
deployments = [{{ provider = "bedrock-paced", model = "amazon.nova-pro-v1:0" }}]
"#
    );
    let env: BTreeMap<String, String> = [
        ("AWS_ACCESS_KEY_ID", "AKIDTEST"),
        ("AWS_SECRET_ACCESS_KEY", "secret"),
        ("AWS_BEARER_TOKEN_BEDROCK", "bedrock-api-key"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
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

#[tokio::test]
async fn signed_and_keyed_calls_answer_with_usage_and_cached_tokens_complete_and_streamed() {
    let url = gateway().await;
    for group in ["nova", "keyed"] {
        let (status, first) = post(&url, "/v1/chat/completions", long_prompt(group, false)).await;
        assert_eq!(status, 200, "{group}: {first}");
        assert!(first["choices"][0]["message"]["content"].is_string());
        assert_eq!(first["choices"][0]["finish_reason"], "stop");
        let (_, again) = post(&url, "/v1/chat/completions", long_prompt(group, false)).await;
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
            "{group}: {usage}"
        );
    }
}

fn lookup(stream: bool) -> Value {
    json!({
        "model": "nova",
        "stream": stream,
        "messages": [{"role": "user", "content": "Look up rule 7."}],
        "tools": [{"type": "function", "function": {"name": "lookup",
            "parameters": {"type": "object", "properties": {"rule": {"type": "integer"}},
                "required": ["rule"]}}}],
        "tool_choice": "required"
    })
}

#[tokio::test]
async fn tool_calls_come_back_complete_and_streamed_and_a_messages_client_is_served() {
    let url = gateway().await;
    let (status, a) = post(&url, "/v1/chat/completions", lookup(false)).await;
    assert_eq!(status, 200, "{a}");
    let call = &a["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "lookup");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert!(args["rule"].is_i64(), "{args}");
    assert_eq!(a["choices"][0]["finish_reason"], "tool_calls");
    let chunks = stream(&url, lookup(true)).await;
    let args: String = chunks
        .iter()
        .filter_map(|v| v["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert!(
        serde_json::from_str::<Value>(&args).unwrap()["rule"].is_i64(),
        "{args}"
    );
    let (status, m) = post(
        &url,
        "/v1/messages",
        json!({"model": "nova", "max_tokens": 64, "system": "Be brief.",
               "messages": [{"role": "user", "content": "hello"}]}),
    )
    .await;
    assert_eq!(status, 200, "{m}");
    assert_eq!(m["type"], "message");
    assert!(m["usage"]["input_tokens"].as_u64().unwrap() > 0);
    let (status, e) = post(
        &url,
        "/v1/chat/completions",
        json!({"model": "nova", "n": 2, "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(status, 400, "{e}");
    assert_eq!(e["error"]["param"], "n", "{e}");
}

#[tokio::test]
async fn throttling_exceptions_are_paced_not_passed_on() {
    let url = gateway().await;
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
    for (status, body) in futures::future::join_all(asks).await {
        assert_eq!(status, 200, "{body}");
    }
}
