//! Azure OpenAI end to end: the simulator serving Azure's URLs (deployment URLs that need an
//! `api-version`, the v1 URLs, a credential asked for, a content filter, 429s with
//! `retry-after-ms`) behind a gateway with `kind = "azure"` providers, reached by a chat
//! completions client and by a Messages client.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod shared;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use sluice_gateway::GatewayBuilder;
use sluice_sim::server::SimServer;
use sluice_sim::spec::UpstreamSpec;

fn azure() -> UpstreamSpec {
    UpstreamSpec {
        ttft_median: Duration::from_millis(5),
        per_token: Duration::from_millis(1),
        output_tokens_median: 8,
        content_filter: vec!["forbidden-topic".into()],
        ..UpstreamSpec::default()
    }
}

/// A gateway on loopback in front of the simulator's `az` resource: group `chat` by its
/// deployment URLs and `api-key`, group `v1` by its v1 URLs and a token file, group
/// `paced` on a resource that takes 60 requests a minute.
async fn gateway(token: &std::path::Path) -> String {
    let paced = UpstreamSpec {
        rpm: 60,
        rpm_burst: Some(1),
        ..azure()
    };
    let sim = SimServer::new(
        &[("az".to_string(), azure()), ("paced".to_string(), paced)],
        1,
    );
    let sim_addr = shared::simulator(sim).await;
    let text = format!(
        r#"
[server]
listen = "127.0.0.1:0"
[ledger]
store = "off"
[providers.az-east]
kind = "azure"
base_url = "http://{sim_addr}/az"
api_key_env = "AZURE_OPENAI_API_KEY"
[providers.az-v1]
kind = "azure"
base_url = "http://{sim_addr}/az"
api = "v1"
token_file = "{token}"
[providers.az-paced]
kind = "azure"
base_url = "http://{sim_addr}/paced"
api_key_env = "AZURE_OPENAI_API_KEY"
[models.chat]
deployments = [{{ provider = "az-east", model = "gpt-4o" }}]
[models.v1]
deployments = [{{ provider = "az-v1", model = "gpt-4o" }}]
[models.paced]
deployments = [{{ provider = "az-paced", model = "gpt-4o" }}]
"#,
        token = token.display()
    );
    let env: BTreeMap<String, String> =
        [("AZURE_OPENAI_API_KEY".to_string(), "k".to_string())].into();
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

fn long_prompt(model: &str, stream: bool) -> Value {
    json!({
        "model": model,
        "stream": stream,
        "messages": [
            {"role": "system", "content": "You review contracts. ".repeat(400)},
            {"role": "user", "content": "What does clause 4 say?"}
        ]
    })
}

fn token_file() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-sim-azure-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("token");
    std::fs::write(&path, "entra-token\n").unwrap();
    path
}

#[tokio::test]
async fn both_url_shapes_answer_with_usage_and_cached_tokens_complete_and_streamed() {
    let url = gateway(&token_file()).await;
    for group in ["chat", "v1"] {
        let (status, first) = post(&url, "/v1/chat/completions", long_prompt(group, false)).await;
        assert_eq!(status, 200, "{group}: {first}");
        assert!(first["choices"][0]["message"]["content"].is_string());
        assert!(first["usage"]["prompt_tokens"].as_u64().unwrap() > 1024);
        let (_, again) = post(&url, "/v1/chat/completions", long_prompt(group, false)).await;
        let cached = again["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap_or(0);
        assert!(
            cached >= 1024,
            "{group}: the prompt cache was read: {again}"
        );
        let text = reqwest::Client::new()
            .post(format!("{url}/v1/chat/completions"))
            .json(&long_prompt(group, true))
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
        assert_eq!(data.last(), Some(&"[DONE]"), "{group}");
        let content: String = data
            .iter()
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .filter_map(|v| {
                v["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_string)
            })
            .collect();
        assert!(!content.is_empty(), "{group}: {text}");
    }
    // Embeddings go to the deployment's `/embeddings`.
    let (status, e) = post(
        &url,
        "/v1/embeddings",
        json!({"model": "chat", "input": ["How do I reset my password?", "hello"]}),
    )
    .await;
    assert_eq!(status, 200, "{e}");
    assert_eq!(e["data"].as_array().unwrap().len(), 2);
    assert!(e["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    // A Messages client reaches the same deployment, translated both ways.
    let (status, m) = post(
        &url,
        "/v1/messages",
        json!({"model": "chat", "max_tokens": 64,
               "messages": [{"role": "user", "content": "hello"}]}),
    )
    .await;
    assert_eq!(status, 200, "{m}");
    assert_eq!(m["type"], "message");
    assert!(m["usage"]["input_tokens"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn a_content_filter_refusal_is_named_in_each_clients_shape_and_counted() {
    let url = gateway(&token_file()).await;
    let ask = json!({"model": "chat", "messages": [{"role": "user", "content": "Tell me about the Forbidden-Topic."}]});
    let (status, e) = post(&url, "/v1/chat/completions", ask).await;
    assert_eq!(status, 400);
    assert_eq!(e["error"]["code"], "content_filter", "{e}");
    assert_eq!(
        e["error"]["innererror"]["code"], "ResponsibleAIPolicyViolation",
        "Azure's own body passes through"
    );
    let (status, m) = post(
        &url,
        "/v1/messages",
        json!({"model": "chat", "max_tokens": 64,
               "messages": [{"role": "user", "content": "the forbidden-topic"}]}),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(m["type"], "error");
    assert_eq!(m["error"]["type"], "invalid_request_error");
    assert!(
        m["error"]["message"]
            .as_str()
            .unwrap()
            .contains("content management policy"),
        "{m}"
    );
    let metrics = reqwest::get(format!("{url}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("sluice_requests_total{")
                && l.contains("code=\"content_filter\"")
                && l.contains("status=\"400\"")),
        "the refusal is counted by its own code"
    );
}

#[tokio::test]
async fn throttling_is_paced_not_passed_on() {
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
