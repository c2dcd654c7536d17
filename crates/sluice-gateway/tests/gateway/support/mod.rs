//! Test support: a fake upstream (OpenAI and Anthropic shapes) on port 0 whose behaviour is
//! chosen by the model name, and a gateway started in front of it.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::{Value, json};
use sluice_gateway::server::Stopped;
use sluice_gateway::{Gateway, GatewayBuilder, Server, ShutdownHandle};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;

/// What the fake upstream saw and the gate tests open.
pub struct Fake {
    pub bodies: Mutex<Vec<Value>>,
    /// The same bodies as they arrived, byte for byte.
    pub raw_bodies: Mutex<Vec<Bytes>>,
    pub headers: Mutex<Vec<HeaderMap>>,
    /// Streams of model `gated` pause after their first chunk until a permit is added.
    pub gate: Semaphore,
    /// Signalled when a `gated` stream's reader (the gateway) goes away while it pauses.
    pub gated_left: tokio::sync::Notify,
}

impl Default for Fake {
    fn default() -> Self {
        Self {
            bodies: Mutex::default(),
            raw_bodies: Mutex::default(),
            headers: Mutex::default(),
            gate: Semaphore::new(0),
            gated_left: tokio::sync::Notify::new(),
        }
    }
}

pub struct Upstream {
    pub addr: SocketAddr,
    pub fake: Arc<Fake>,
}

pub async fn upstream() -> Upstream {
    let fake = Arc::new(Fake::default());
    let app = Router::new()
        .route("/v1/chat/completions", post(openai))
        .route("/v1/messages", post(anthropic))
        .route("/v1/embeddings", post(embeddings))
        .route("/v1/responses", post(responses))
        .with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Upstream { addr, fake }
}

fn chunk(content: &str) -> String {
    let v = json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "up",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]});
    format!("data: {v}\n\n")
}

fn finish_chunk() -> String {
    let v = json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "up",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    format!("data: {v}\n\n")
}

fn usage_chunk(usage: Value) -> String {
    let v = json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "up",
        "choices": [], "usage": usage});
    format!("data: {v}\n\n")
}

/// The usage object each model name reports, in its provider's format.
fn usage_for(model: &str) -> Value {
    match model {
        "deepseek" => json!({"prompt_tokens": 1000, "completion_tokens": 20, "total_tokens": 1020,
            "prompt_cache_hit_tokens": 768, "prompt_cache_miss_tokens": 232}),
        "kimi" => {
            json!({"prompt_tokens": 500, "completion_tokens": 7, "total_tokens": 507, "cached_tokens": 256})
        }
        _ => json!({"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
            "prompt_tokens_details": {"cached_tokens": 1920}}),
    }
}

type Tx = mpsc::Sender<Result<Bytes, Infallible>>;

fn sse_response(rx: mpsc::Receiver<Result<Bytes, Infallible>>) -> Response {
    let stream = tokio_stream_from(rx);
    let mut r = Response::new(Body::from_stream(stream));
    r.headers_mut()
        .insert("content-type", "text/event-stream".parse().unwrap());
    r
}

fn tokio_stream_from(
    mut rx: mpsc::Receiver<Result<Bytes, Infallible>>,
) -> impl futures::Stream<Item = Result<Bytes, Infallible>> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

async fn send(tx: &Tx, s: String) {
    let _ = tx.send(Ok(Bytes::from(s))).await;
}

async fn openai(State(fake): State<Arc<Fake>>, headers: HeaderMap, body: Bytes) -> Response {
    let v: Value = serde_json::from_slice(&body).unwrap();
    fake.bodies.lock().push(v.clone());
    fake.raw_bodies.lock().push(body.clone());
    fake.headers.lock().push(headers);
    let model = v["model"].as_str().unwrap_or_default().to_string();
    let stream = v["stream"].as_bool().unwrap_or(false);
    match model.as_str() {
        "reject" => {
            return (StatusCode::UNPROCESSABLE_ENTITY,
                [("content-type", "application/json")],
                r#"{"error":{"message":"temperature too high","type":"invalid_request_error","param":"temperature","code":null}}"#)
                .into_response();
        }
        "limited" => {
            return (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "7"), ("content-type", "application/json")],
                r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#)
                .into_response();
        }
        "limited-1s" => {
            return (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "1"), ("content-type", "application/json")],
                r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#)
                .into_response();
        }
        "limited-now" => {
            return (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "0"), ("content-type", "application/json")],
                r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#)
                .into_response();
        }
        "broken" => return (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response(),
        "bad-gateway" => return (StatusCode::BAD_GATEWAY, "bad gateway").into_response(),
        "unavailable" => {
            return (StatusCode::SERVICE_UNAVAILABLE, "overloaded").into_response();
        }
        "hang" => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        // A 200 whose body is an error object.
        "error-200" => {
            return ([("content-type", "application/json")],
                r#"{"error":{"message":"The server had an error while processing your request","type":"server_error"}}"#)
                .into_response();
        }
        // A head of a megabyte: past what sluice's client reads.
        "huge-headers" => {
            return ([("x-filler", "a".repeat(1 << 20))], "{}").into_response();
        }
        // A gzip bomb sluice never asked for: 10 MB of zeros in 10 kB.
        "gzip" => {
            use std::io::Write;
            let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            z.write_all(&vec![0u8; 10 << 20]).unwrap();
            let packed = z.finish().unwrap();
            return (
                [
                    ("content-type", "application/json"),
                    ("content-encoding", "gzip"),
                ],
                packed,
            )
                .into_response();
        }
        _ => {}
    }
    if !stream {
        if model == "hang-body" {
            let (tx, rx) = mpsc::channel(4);
            tokio::spawn(async move {
                send(&tx, "{\"id\":\"x\",".into()).await;
                tokio::time::sleep(Duration::from_secs(3600)).await;
                drop(tx);
            });
            let mut r = Response::new(Body::from_stream(tokio_stream_from(rx)));
            r.headers_mut()
                .insert("content-type", "application/json".parse().unwrap());
            return r;
        }
        let content = if model == "echo" {
            v.to_string()
        } else {
            "Hello from upstream".into()
        };
        let out = json!({"id": "cmpl-1", "object": "chat.completion", "created": 1, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": usage_for(&model)});
        return ([("content-type", "application/json")], out.to_string()).into_response();
    }
    let (tx, rx) = mpsc::channel(16);
    let include_usage = v["stream_options"]["include_usage"]
        .as_bool()
        .unwrap_or(false);
    tokio::spawn(async move {
        send(&tx, chunk("Hel")).await;
        match model.as_str() {
            "gated" => {
                tokio::select! {
                    permit = fake.gate.acquire() => permit.unwrap().forget(),
                    () = tx.closed() => {
                        fake.gated_left.notify_one();
                        return;
                    }
                }
            }
            "stall" => tokio::time::sleep(Duration::from_secs(3600)).await,
            "truncate" => return,
            // The rest a byte every 150 ms (inside the idle timeout) until sluice leaves.
            "trickle" => {
                for b in chunk("lo and more and more and more")
                    .into_bytes()
                    .into_iter()
                    .cycle()
                {
                    tokio::time::sleep(Duration::from_millis(150)).await;
                    if tx.send(Ok(Bytes::from(vec![b]))).await.is_err() {
                        fake.gated_left.notify_one();
                        return;
                    }
                }
            }
            // A line that never ends.
            "endless-line" => {
                send(&tx, "data: ".into()).await;
                for _ in 0..40 {
                    if tx.send(Ok(Bytes::from(vec![b'x'; 1 << 20]))).await.is_err() {
                        return;
                    }
                }
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            _ => {}
        }
        send(&tx, chunk("lo")).await;
        send(&tx, finish_chunk()).await;
        if include_usage {
            send(&tx, usage_chunk(usage_for(&model))).await;
        }
        send(&tx, "data: [DONE]\n\n".into()).await;
    });
    sse_response(rx)
}

/// OpenAI's Responses API, as OpenAI answers it: "Hello from responses" whole, "Hi!" as
/// events.
async fn responses(State(fake): State<Arc<Fake>>, headers: HeaderMap, body: Bytes) -> Response {
    let v: Value = serde_json::from_slice(&body).unwrap();
    fake.bodies.lock().push(v.clone());
    fake.headers.lock().push(headers);
    let usage = json!({"input_tokens": 40, "input_tokens_details": {"cached_tokens": 32},
        "output_tokens": 6, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 46});
    let model = v["model"].clone();
    let response = move |status: &str, text: &str, usage: Value| {
        let output = if text.is_empty() {
            json!([])
        } else {
            json!([{"type": "message", "id": "msg_r", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}])
        };
        json!({"id": "resp_up", "object": "response", "created_at": 1, "status": status,
            "model": model, "output": output, "usage": usage})
    };
    if v["stream"] != true {
        let out = response("completed", "Hello from responses", usage);
        return ([("content-type", "application/json")], out.to_string()).into_response();
    }
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        let ev = |n: u64, kind: &str, mut data: Value| {
            data["type"] = json!(kind);
            data["sequence_number"] = json!(n);
            format!("event: {kind}\ndata: {data}\n\n")
        };
        let at = json!({"item_id": "msg_r", "output_index": 0, "content_index": 0});
        let delta = |d: &str| {
            let mut x = at.clone();
            x["delta"] = json!(d);
            x
        };
        let steps = vec![
            (
                "response.created",
                json!({"response": response("in_progress", "", Value::Null)}),
            ),
            (
                "response.output_item.added",
                json!({"output_index": 0, "item":
                {"type": "message", "id": "msg_r", "status": "in_progress", "role": "assistant", "content": []}}),
            ),
            (
                "response.content_part.added",
                json!({"item_id": "msg_r", "output_index": 0, "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []}}),
            ),
            ("response.output_text.delta", delta("Hi")),
            ("response.output_text.delta", delta("!")),
            (
                "response.output_text.done",
                json!({"item_id": "msg_r", "output_index": 0, "content_index": 0, "text": "Hi!"}),
            ),
            (
                "response.content_part.done",
                json!({"item_id": "msg_r", "output_index": 0, "content_index": 0,
                    "part": {"type": "output_text", "text": "Hi!", "annotations": []}}),
            ),
            (
                "response.output_item.done",
                json!({"output_index": 0, "item": response("completed", "Hi!", Value::Null)["output"][0]}),
            ),
            (
                "response.completed",
                json!({"response": response("completed", "Hi!", usage)}),
            ),
        ];
        for (n, (kind, data)) in steps.into_iter().enumerate() {
            send(&tx, ev(n as u64, kind, data)).await;
        }
    });
    sse_response(rx)
}

/// The vector every input gets, and the same as base64 of its little-endian floats.
pub const VECTOR: [f32; 3] = [0.5, -0.25, 1.0];
const VECTOR_BASE64: &str = "AAAAPwAAgL4AAIA/";

/// Embeddings: one vector an input (a string, strings, tokens or token arrays), 5 tokens
/// an input; model `broken-embed` fails with a 500.
async fn embeddings(State(fake): State<Arc<Fake>>, headers: HeaderMap, body: Bytes) -> Response {
    let v: Value = serde_json::from_slice(&body).unwrap();
    fake.bodies.lock().push(v.clone());
    fake.headers.lock().push(headers);
    if v["model"] == "broken-embed" {
        return (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response();
    }
    let n = match &v["input"] {
        Value::Array(items) if items.iter().all(Value::is_number) => 1,
        Value::Array(items) => items.len(),
        _ => 1,
    };
    let vector = if v["encoding_format"] == "base64" {
        json!(VECTOR_BASE64)
    } else {
        json!(VECTOR)
    };
    let data: Vec<Value> = (0..n)
        .map(|i| json!({"object": "embedding", "index": i, "embedding": vector}))
        .collect();
    let out = json!({"object": "list", "data": data, "model": v["model"],
        "usage": {"prompt_tokens": 5 * n, "total_tokens": 5 * n}});
    ([("content-type", "application/json")], out.to_string()).into_response()
}

async fn anthropic(State(fake): State<Arc<Fake>>, headers: HeaderMap, body: Bytes) -> Response {
    let v: Value = serde_json::from_slice(&body).unwrap();
    fake.bodies.lock().push(v.clone());
    fake.headers.lock().push(headers);
    if v["model"] == "claude-limited" {
        return (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "3"), ("content-type", "application/json")],
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}}"#)
            .into_response();
    }
    let usage = json!({"input_tokens": 12, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 0, "output_tokens": 42});
    if v["stream"] != true {
        // Asked to think, it thinks first (its block signed, as Anthropic's are).
        let content = if v.get("thinking").is_some() {
            json!([{"type": "thinking", "thinking": "hmm", "signature": "sig-1"},
                {"type": "text", "text": "Bonjour"}])
        } else {
            json!([{"type": "text", "text": "Bonjour"}])
        };
        let out = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": v["model"],
            "content": content, "stop_reason": "end_turn", "usage": usage});
        return ([("content-type", "application/json")], out.to_string()).into_response();
    }
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        let ev = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
        send(
            &tx,
            ev(
                "message_start",
                json!({"type": "message_start", "message": {"id": "msg_s", "type": "message",
            "role": "assistant", "model": "claude-x", "content": [], "stop_reason": null,
            "usage": {"input_tokens": 12, "cache_read_input_tokens": 900, "output_tokens": 1}}}),
            ),
        )
        .await;
        send(&tx, ev("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}))).await;
        for t in ["Bon", "jour"] {
            send(&tx, ev("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}))).await;
        }
        send(
            &tx,
            ev(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ),
        )
        .await;
        send(&tx, ev("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 42}}))).await;
        send(&tx, ev("message_stop", json!({"type": "message_stop"}))).await;
    });
    sse_response(rx)
}

/// A config with one model group per fake behaviour.
pub fn config(upstream: SocketAddr, extra_server: &str) -> String {
    let models = [
        "ok",
        "deepseek",
        "kimi",
        "echo",
        "gated",
        "stall",
        "truncate",
        "reject",
        "limited",
        "broken",
        "hang",
        "hang-body",
        "error-200",
        "huge-headers",
        "gzip",
        "trickle",
        "endless-line",
    ];
    let grace = if extra_server.contains("shutdown_grace") {
        ""
    } else {
        "shutdown_grace = \"5s\""
    };
    let mut s = format!(
        r#"
[server]
listen = "127.0.0.1:0"
{grace}
{extra_server}

[providers.fake]
kind = "openai"
base_url = "http://{upstream}/v1"
api_key_env = "FAKE_KEY"
headers = {{ "X-Tenant" = "acme" }}
first_byte_timeout = "400ms"
idle_timeout = "400ms"

[providers.claude]
kind = "anthropic"
base_url = "http://{upstream}/v1"
api_key_env = "FAKE_KEY"
default_max_tokens = 777

[models.claude]
deployments = [{{ provider = "claude", model = "claude-sonnet" }}]

[providers.claude-unmarked]
kind = "anthropic"
base_url = "http://{upstream}/v1"
api_key_env = "FAKE_KEY"
cache_breakpoints = false

[models.claude-unmarked]
deployments = [{{ provider = "claude-unmarked", model = "claude-sonnet" }}]

[models.claude-limited]
deployments = [{{ provider = "claude", model = "claude-limited" }}]

[providers.fake-responses]
kind = "openai"
base_url = "http://{upstream}/v1"
api_key_env = "FAKE_KEY"
responses = true

[models.native]
deployments = [{{ provider = "fake-responses", model = "ok" }}]
"#
    );
    for m in models {
        s.push_str(&format!(
            "\n[models.{m}]\ndeployments = [{{ provider = \"fake\", model = \"{m}\", name = \"fake-{m}\" }}]\n"
        ));
    }
    s
}

pub struct Running {
    /// Every call record, as the gateway settles it.
    pub records: tokio::sync::Mutex<mpsc::UnboundedReceiver<sluice_core::CallRecord>>,
    pub url: String,
    pub addr: SocketAddr,
    pub gw: Arc<Gateway>,
    pub shutdown: ShutdownHandle,
    pub task: JoinHandle<std::io::Result<Stopped>>,
    pub upstream: Upstream,
    pub client: reqwest::Client,
}

/// Serves a gateway configured by `text` (no environment) on a free port until the test
/// ends; returns its URL.
pub async fn serve_toml(text: &str) -> String {
    let env = BTreeMap::new();
    let cfg = sluice_config::gateway::load(text, &env, &[]).unwrap();
    let gw = GatewayBuilder::from_config(&cfg, &env)
        .unwrap()
        .build()
        .unwrap();
    let listen = "127.0.0.1:0".parse().unwrap();
    let server = Server::bind(gw, listen, std::time::Duration::from_secs(1))
        .await
        .unwrap();
    let url = format!("http://{}", server.local_addr().unwrap());
    tokio::spawn(server.run(std::future::pending()));
    url
}

pub async fn start() -> Running {
    start_with("").await
}

pub async fn start_with(extra_server: &str) -> Running {
    let upstream = upstream().await;
    let text = config(upstream.addr, extra_server);
    let env: BTreeMap<String, String> = [("FAKE_KEY".to_string(), "sk-test".to_string())].into();
    let cfg = sluice_config::gateway::load(&text, &env, &[]).unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    let gw = GatewayBuilder::from_config(&cfg, &env)
        .unwrap()
        .seed(1)
        .on_record(Arc::new(move |r: &sluice_core::CallRecord| {
            let _ = tx.send(r.clone());
        }))
        .build()
        .unwrap();
    let server = Server::bind(gw.clone(), cfg.listen, cfg.server.shutdown_grace)
        .await
        .unwrap()
        .notice(cfg.server.shutdown_notice);
    let addr = server.local_addr().unwrap();
    let shutdown = ShutdownHandle::new();
    let trigger = shutdown.clone();
    let task = tokio::spawn(server.run(async move { trigger.triggered().await }));
    Running {
        records: tokio::sync::Mutex::new(rx),
        url: format!("http://{addr}"),
        addr,
        gw,
        shutdown,
        task,
        upstream,
        client: reqwest::Client::new(),
    }
}

impl Running {
    /// The next settled call record (waits for the server to settle it).
    pub async fn next_record(&self) -> sluice_core::CallRecord {
        let mut rx = self.records.lock().await;
        tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("no call record within 10 s")
            .expect("record channel closed")
    }

    pub async fn chat(&self, body: Value) -> reqwest::Response {
        self.post("/v1/chat/completions", body).await
    }

    /// `body` posted to the gateway's `path`.
    pub async fn post(&self, path: &str, body: Value) -> reqwest::Response {
        self.client
            .post(format!("{}{path}", self.url))
            .json(&body)
            .send()
            .await
            .unwrap()
    }
}

pub fn body(model: &str, stream: bool) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": stream})
}

/// Parses an SSE body into its data payloads.
pub fn sse_data(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .map(str::to_string)
        .collect()
}

/// A closed port: connections to it are refused.
pub async fn closed_port() -> SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap()
}

/// A server that reads each request and closes the connection before answering a byte.
pub async fn resetting() -> SocketAddr {
    use tokio::io::AsyncReadExt;
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = sock.read(&mut buf).await;
                drop(sock);
            });
        }
    });
    addr
}
