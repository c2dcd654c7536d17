//! Tool calls and structured output offline: the simulator's HTTP server behind a gateway
//! served on loopback, an OpenAI-shaped upstream and an Anthropic one (translated both ways).
//! A forced tool comes back as a call whose arguments match the tool's schema, a JSON schema
//! as JSON of that schema, complete and streamed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod shared;

use std::collections::BTreeMap;

use serde_json::{Value, json};
use sluice_gateway::GatewayBuilder;
use sluice_sim::server::SimServer;
use sluice_sim::spec::UpstreamSpec;

fn fast() -> UpstreamSpec {
    UpstreamSpec {
        ttft_median: std::time::Duration::from_millis(5),
        per_token: std::time::Duration::from_millis(1),
        ..UpstreamSpec::default()
    }
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "clause": {"type": "string"},
            "risk": {"type": "string", "enum": ["low", "medium", "high"]},
            "amount": {"type": "number", "minimum": 100},
            "parties": {"type": "array", "items": {"type": "string"}, "minItems": 2}
        },
        "required": ["clause", "risk", "amount", "parties"],
        "additionalProperties": false
    })
}

fn valid(v: &Value) -> bool {
    jsonschema::validator_for(&schema()).unwrap().is_valid(v)
}

/// A gateway on loopback in front of the simulator's `openai` and `claude` upstreams.
async fn gateway() -> String {
    let sim = SimServer::new(
        &[
            ("deepseek".to_string(), fast()),
            ("claude".to_string(), fast()),
        ],
        1,
    );
    let sim_addr = shared::simulator(sim).await;
    let text = format!(
        r#"
[server]
listen = "127.0.0.1:0"
[ledger]
store = "off"
[providers.sim-openai]
kind = "openai"
base_url = "http://{sim_addr}/deepseek/v1"
[providers.sim-claude]
kind = "anthropic"
base_url = "http://{sim_addr}/claude/v1"
[models.chat]
deployments = [{{ provider = "sim-openai", model = "deepseek-chat" }}]
[models.claude]
deployments = [{{ provider = "sim-claude", model = "claude-sonnet-4-5" }}]
"#
    );
    let env = BTreeMap::new();
    let cfg = sluice_config::gateway::load(&text, &env, &[]).unwrap();
    let gw = GatewayBuilder::from_config(&cfg, &env)
        .unwrap()
        .build()
        .unwrap();
    shared::gateway_url(gw).await
}

async fn ask(url: &str, body: Value) -> Value {
    let resp = reqwest::Client::new()
        .post(format!("{url}/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    resp.json().await.unwrap()
}

/// The tool calls of a streamed answer, assembled from its chunks as an SDK does.
async fn streamed_tool_call(url: &str, body: Value) -> (String, String, String) {
    let text = reqwest::Client::new()
        .post(format!("{url}/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let (mut name, mut args, mut finish) = (String::new(), String::new(), String::new());
    for data in text.split("\n\n").filter_map(|e| e.strip_prefix("data: ")) {
        if data == "[DONE]" {
            continue;
        }
        let v: Value = serde_json::from_str(data).unwrap();
        let choice = &v["choices"][0];
        if let Some(calls) = choice["delta"]["tool_calls"].as_array() {
            for c in calls {
                name.push_str(c["function"]["name"].as_str().unwrap_or(""));
                args.push_str(c["function"]["arguments"].as_str().unwrap_or(""));
            }
        }
        if let Some(f) = choice["finish_reason"].as_str() {
            finish = f.to_string();
        }
    }
    (name, args, finish)
}

fn tool_request(model: &str, stream: bool) -> Value {
    json!({
        "model": model,
        "stream": stream,
        "messages": [{"role": "user", "content": "Flag the indemnity clause."}],
        "tools": [
            {"type": "function", "function": {"name": "summarise", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "flag_clause", "description": "Flag a risky clause", "parameters": schema()}}
        ],
        "tool_choice": {"type": "function", "function": {"name": "flag_clause"}}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_tool_is_called_with_arguments_of_its_schema_from_either_upstream() {
    let url = gateway().await;
    for model in ["chat", "claude"] {
        let v = ask(&url, tool_request(model, false)).await;
        let choice = &v["choices"][0];
        assert_eq!(choice["finish_reason"], "tool_calls", "{model}: {v}");
        let call = &choice["message"]["tool_calls"][0];
        assert_eq!(call["type"], "function", "{model}: {v}");
        assert_eq!(call["function"]["name"], "flag_clause", "{model}: {v}");
        let args: Value =
            serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
        assert!(valid(&args), "{model}: {args}");

        let (name, args, finish) = streamed_tool_call(&url, tool_request(model, true)).await;
        assert_eq!(
            (name.as_str(), finish.as_str()),
            ("flag_clause", "tool_calls"),
            "{model}"
        );
        assert!(
            valid(&serde_json::from_str(&args).unwrap()),
            "{model} streamed: {args}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_schema_gets_json_of_it_and_json_object_gets_an_object() {
    let url = gateway().await;
    let v = ask(
        &url,
        json!({
            "model": "chat",
            "messages": [{"role": "user", "content": "Review the clause as JSON."}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "review", "strict": true, "schema": schema()}}
        }),
    )
    .await;
    let content = v["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(valid(&serde_json::from_str(content).unwrap()), "{content}");
    let v = ask(
        &url,
        json!({
            "model": "chat",
            "messages": [{"role": "user", "content": "As JSON."}],
            "response_format": {"type": "json_object"}
        }),
    )
    .await;
    let content = v["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(
        serde_json::from_str::<Value>(content).unwrap().is_object(),
        "{content}"
    );
}
