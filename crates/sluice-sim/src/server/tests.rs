use super::*;

async fn start(text: &str) -> (SocketAddr, SimServer) {
    let cfg = SimConfig::parse(text).unwrap();
    let server = SimServer::new(&cfg.upstreams, cfg.sim.seed);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_on(server.clone(), listener, std::future::pending()));
    (addr, server)
}

const CONFIG: &str = r#"
[sim]
seed = 5
[upstreams.fast]
ttft_median = "20ms"
ttft_sigma = 0.0
per_token = "1ms"
output_tokens_median = 8
output_tokens_sigma = 0.0
rpm = 3
[upstreams.claude]
api = "anthropic"
ttft_median = "20ms"
ttft_sigma = 0.0
per_token = "1ms"
rpm = 1
"#;

async fn post(client: &reqwest::Client, url: &str, id: &str, body: &Value) -> reqwest::Response {
    client
        .post(url)
        .header("x-request-id", id)
        .json(body)
        .send()
        .await
        .unwrap()
}

fn chat(stream: bool) -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content": "hello"}], "stream": stream,
           "stream_options": {"include_usage": true}})
}

#[tokio::test]
async fn serves_openai_answers_streams_and_429s() {
    let (addr, _) = start(CONFIG).await;
    let client = reqwest::Client::new();
    let url = format!("http://{addr}/fast/v1/chat/completions");
    let r = post(&client, &url, "a", &chat(false)).await;
    assert_eq!(r.status(), 200);
    assert!(r.headers().contains_key("x-ratelimit-remaining-requests"));
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["usage"]["completion_tokens"], 8);
    let r = post(&client, &url, "b", &chat(true)).await;
    let text = r.text().await.unwrap();
    assert!(text.contains("\"usage\":{"), "{text}");
    assert!(text.trim_end().ends_with("data: [DONE]"));
    // The same id again counts as a duplicate; the fourth request in a minute is refused.
    let _ = post(&client, &url, "b", &chat(false)).await;
    let r = post(&client, &url, "c", &chat(false)).await;
    assert_eq!(r.status(), 429);
    assert!(
        r.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 1
    );
    assert_eq!(r.headers()["x-ratelimit-remaining-requests"], "0");
    let stats: Value = client
        .get(format!("http://{addr}/stats"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let fast = &stats["upstreams"]["fast"];
    assert_eq!(fast["requests"], 4);
    assert_eq!(fast["duplicate_requests"], 1);
    assert_eq!(fast["rate_limited"], 1);
    assert_eq!(fast["request_ids"]["b"], 2);
}

#[tokio::test]
async fn anthropic_emulation_uses_its_wire_format_and_headers() {
    let (addr, _) = start(CONFIG).await;
    let client = reqwest::Client::new();
    let url = format!("http://{addr}/claude/v1/messages");
    let body = json!({"model": "claude", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]});
    let v: Value = client
        .post(&url)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["type"], "message");
    let r = client.post(&url).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 429);
    assert!(
        r.headers()
            .contains_key("anthropic-ratelimit-requests-reset")
    );
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["type"], "rate_limit_error");
}

#[tokio::test]
async fn a_reset_is_seen_as_a_broken_connection() {
    let (addr, _) =
        start("[upstreams.bad]\nfaults = { reset = 1.0, error_delay = \"1ms\" }\n").await;
    let r = reqwest::Client::new()
        .post(format!("http://{addr}/bad/v1/chat/completions"))
        .json(&chat(false))
        .send()
        .await;
    let failed = match r {
        Err(_) => true,
        Ok(resp) => resp.bytes().await.is_err(),
    };
    assert!(failed);
}

#[test]
fn config_errors_are_all_reported() {
    let err = SimConfig::parse(
        "[sim]\nlisten = \"x\"\n[upstreams.a]\nstall_probability = 2.0\nfoo = 1\n",
    )
    .unwrap_err();
    assert_eq!(err.len(), 3, "{err}");
}

#[tokio::test]
async fn serves_embeddings_and_names_what_it_cannot_embed() {
    let (addr, _) = start(CONFIG).await;
    let client = reqwest::Client::new();
    let url = format!("http://{addr}/fast/v1/embeddings");
    let r = post(
        &client,
        &url,
        "e",
        &json!({"model": "e", "input": ["a b", "a b", "c"]}),
    )
    .await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    let data = v["data"].as_array().unwrap();
    assert_eq!(data.len(), 3);
    assert_eq!(data[1]["index"], 1);
    assert_eq!(
        data[0]["embedding"], data[1]["embedding"],
        "the same text, the same vector"
    );
    assert_ne!(data[0]["embedding"], data[2]["embedding"]);
    assert_eq!(
        data[0]["embedding"].as_array().unwrap().len(),
        crate::faq::DIMENSIONS
    );
    assert!(v["usage"]["prompt_tokens"].as_u64().unwrap() >= 3);
    for bad in [json!({"input": 7}), json!({"input": ["a", 7]}), json!({})] {
        let r = post(&client, &url, "e", &bad).await;
        assert_eq!(r.status(), 400, "{bad}");
        let e: Value = r.json().await.unwrap();
        assert!(
            e["error"]["message"].as_str().unwrap().contains("`input`"),
            "{e}"
        );
    }
    let r = post(
        &client,
        &format!("http://{addr}/nobody/v1/embeddings"),
        "e",
        &json!({"input": "a"}),
    )
    .await;
    assert_eq!(r.status(), 404);
}
