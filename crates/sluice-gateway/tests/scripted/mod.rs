//! Virtual-time test support: a scripted upstream (each call waits the next scripted delay,
//! then answers, fails, or refuses), a gateway rig over one or two of them, and a client
//! that calls the router in-process.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use http_body_util::BodyExt;
use parking_lot::Mutex;
use serde_json::Value;
use sluice_config::gateway::DeploymentConfig;
use sluice_core::{CallRecord, ErrorKind, GatewayError, UpstreamReply, Usage};
use sluice_economy::{Micros, Price};
use sluice_gateway::{Gateway, GatewayBuilder};
use sluice_providers::{Completion, Provider, StreamEvent, UpstreamCall, UpstreamResponse};
use sluice_tail::admission::LaneSpec;
use tokio::time::{Instant, sleep};
use tower::ServiceExt;

/// A price for model `m` with every kind of token priced apart (per million: input 2,
/// cached input 0.5, cache write 2, output 8).
/// A call's usage: a thousand prompt tokens, none cached, a hundred out.
pub const PLAIN_USAGE: sluice_core::Usage = sluice_core::Usage {
    prompt_tokens: 1_000,
    completion_tokens: 100,
    cached_tokens: 0,
    cache_write_tokens: 0,
    reasoning_tokens: 0,
    cache_write_long_tokens: 0,
};

pub const PRICE: Price = Price {
    input: Micros(2_000_000),
    cached_input: Micros(500_000),
    cache_write: Micros(2_000_000),
    output: Micros(8_000_000),
    published: None,
};

/// What a scripted upstream answers unless told otherwise: one choice that says something.
pub const ANSWER: &str = r#"{"id":"s-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}"#;

/// How a scripted call ends.
#[derive(Clone, Copy)]
pub enum End {
    Ok,
    Fail,
    /// The upstream's own 5xx with this status.
    ServerError(u16),
    /// 429 with this `retry-after`, in seconds.
    Limited(u64),
    /// The upstream's own 4xx (not retryable).
    Reject(u16),
    /// The upstream's own 4xx with this body.
    RejectWith(u16, &'static str),
    /// A stream: after the delay its first frame, then `frames - 1` more, `gap` ms apart.
    Stream {
        frames: u32,
        gap: u64,
    },
    /// The same, then the usage the scripted upstream reports (none when it has none).
    StreamWithUsage {
        frames: u32,
        gap: u64,
    },
    /// A stream of this many frames as fast as they are read, then the usage.
    Flood(u32),
}

/// The `traceparent` and `tracestate` a call carried.
pub type Sent = (Option<String>, Option<String>);

/// An upstream that answers each call after the next scripted delay, or fails.
#[derive(Clone, Default)]
pub struct Scripted {
    steps: Arc<Mutex<VecDeque<(u64, End)>>>,
    calls: Arc<Mutex<u32>>,
    /// The deadline each call carried.
    pub deadlines: Arc<Mutex<Vec<Option<Instant>>>>,
    /// (calls in progress now, most ever at once).
    busy: Arc<Mutex<(u32, u32)>>,
    /// The usage complete answers report.
    pub usage: Arc<Mutex<Option<Usage>>>,
    /// The body of complete answers ([`ANSWER`] when unset).
    pub answer: Arc<Mutex<Option<Bytes>>>,
    /// The `traceparent` and `tracestate` each call carried.
    pub traces: Arc<Mutex<Vec<Sent>>>,
}

/// Counts a call in progress until dropped.
struct Busy(Arc<Mutex<(u32, u32)>>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.lock().0 -= 1;
    }
}

impl Scripted {
    pub fn push(&self, ms: u64, ok: bool) {
        self.steps
            .lock()
            .push_back((ms, if ok { End::Ok } else { End::Fail }));
    }
    pub fn push_limited(&self, ms: u64, retry_after: u64) {
        self.steps.lock().push_back((ms, End::Limited(retry_after)));
    }
    pub fn push_end(&self, ms: u64, end: End) {
        self.steps.lock().push_back((ms, end));
    }
    pub fn calls(&self) -> u32 {
        *self.calls.lock()
    }
    /// The most calls it ever had in progress at once.
    pub fn peak(&self) -> u32 {
        self.busy.lock().1
    }
}

impl Provider for Scripted {
    fn call(&self, c: UpstreamCall) -> BoxFuture<'static, Result<UpstreamResponse, GatewayError>> {
        *self.calls.lock() += 1;
        self.deadlines.lock().push(c.deadline);
        let text = |v: &http::HeaderValue| v.to_str().unwrap().to_string();
        self.traces.lock().push((
            c.trace.as_ref().map(|t| text(&t.traceparent)),
            c.trace
                .as_ref()
                .and_then(|t| t.tracestate.as_ref().map(text)),
        ));
        let (ms, end) = self.steps.lock().pop_front().unwrap_or((100, End::Ok));
        let usage = *self.usage.lock();
        let answer = self.answer.lock().clone();
        let busy = {
            let mut b = self.busy.lock();
            b.0 += 1;
            b.1 = b.1.max(b.0);
            Busy(self.busy.clone())
        };
        async move {
            let _busy = busy;
            sleep(Duration::from_millis(ms)).await;
            match end {
                End::Ok => {}
                End::Fail => {
                    return Err(GatewayError::new(
                        ErrorKind::UpstreamServerError,
                        "scripted failure",
                    ));
                }
                End::ServerError(status) => {
                    return Err(GatewayError::new(
                        ErrorKind::UpstreamServerError,
                        format!("upstream answered {status}"),
                    )
                    .with_upstream_status(status));
                }
                End::Limited(secs) => {
                    return Err(GatewayError::rejected(UpstreamReply {
                        status: 429,
                        body: Bytes::from_static(b"{}"),
                        content_type: None,
                        retry_after: Some(secs.to_string()),
                    }));
                }
                End::Reject(status) => {
                    return Err(GatewayError::rejected(UpstreamReply {
                        status,
                        body: Bytes::from_static(br#"{"error":{"message":"no"}}"#),
                        content_type: Some("application/json".into()),
                        retry_after: None,
                    }));
                }
                End::RejectWith(status, body) => {
                    return Err(GatewayError::rejected(UpstreamReply {
                        status,
                        body: Bytes::from_static(body.as_bytes()),
                        content_type: Some("application/json".into()),
                        retry_after: None,
                    }));
                }
                End::Stream { frames, gap } => {
                    return Ok(UpstreamResponse::Stream(frames_of(frames, gap, None)));
                }
                End::StreamWithUsage { frames, gap } => {
                    return Ok(UpstreamResponse::Stream(frames_of(frames, gap, usage)));
                }
                End::Flood(frames) => {
                    let chunks = futures::stream::iter(0..frames).map(|i| {
                        Ok(StreamEvent::Frame(Bytes::from(format!(
                            "data: {{\"n\":{i}}}\n\n"
                        ))))
                    });
                    let usage = futures::stream::iter(usage.map(|u| Ok(StreamEvent::Usage(u))));
                    return Ok(UpstreamResponse::Stream(chunks.chain(usage).boxed()));
                }
            }
            Ok(UpstreamResponse::Complete(Completion {
                body: answer.unwrap_or_else(|| Bytes::from_static(ANSWER.as_bytes())),
                usage,
                first_byte: Instant::now(),
                native: None,
            }))
        }
        .boxed()
    }
}

/// `frames` chat chunks `gap` ms apart, then `usage` when given.
fn frames_of(frames: u32, gap: u64, usage: Option<Usage>) -> sluice_providers::EventStream {
    let chunks = futures::stream::iter(0..frames).then(move |i| async move {
        if i > 0 {
            sleep(Duration::from_millis(gap)).await;
        }
        Ok(StreamEvent::Frame(Bytes::from(format!(
            "data: {{\"n\":{i}}}\n\n"
        ))))
    });
    let usage = futures::stream::iter(usage.map(|u| Ok(StreamEvent::Usage(u))));
    chunks.chain(usage).boxed()
}

pub struct Rig {
    pub gw: Arc<Gateway>,
    /// The gateway with the work served beside its walk (batch jobs, analyses).
    pub app: sluice_gateway::App,
    pub router: axum::Router,
    pub a: Scripted,
    pub b: Scripted,
    pub records: Arc<Mutex<Vec<CallRecord>>>,
}

pub fn dep(provider: &str, weight: u32) -> DeploymentConfig {
    DeploymentConfig {
        weight,
        ..dep_on(provider, "m")
    }
}

/// A deployment of `model` on `provider`, named after the provider.
pub fn dep_on(provider: &str, model: &str) -> DeploymentConfig {
    DeploymentConfig {
        provider: provider.into(),
        model: model.into(),
        weight: 1,
        name: Some(provider.into()),
        rpm: None,
        tpm: None,
    }
}

pub fn lanes(max_queue: usize) -> Vec<LaneSpec> {
    vec![
        LaneSpec {
            name: Arc::from("interactive"),
            share: 0.8,
            max_queue,
            max_wait: Duration::from_secs(30),
        },
        LaneSpec {
            name: Arc::from("batch"),
            share: 0.2,
            max_queue,
            max_wait: Duration::from_secs(600),
        },
    ]
}

/// Group `chat` over `a` alone, or `a` (always the primary) and `b`.
pub fn rig(with_b: bool, configure: impl FnOnce(GatewayBuilder) -> GatewayBuilder) -> Rig {
    let deployments = if with_b {
        vec![dep("a", 1_000_000), dep("b", 1)]
    } else {
        vec![dep("a", 1)]
    };
    rig_over(deployments, configure)
}

/// Group `chat` over `deployments` of providers `a` and `b`.
pub fn rig_over(
    deployments: Vec<DeploymentConfig>,
    configure: impl FnOnce(GatewayBuilder) -> GatewayBuilder,
) -> Rig {
    rig_serving(deployments, configure, |app| app)
}

/// Group `chat` over `a` alone, with the work `serve` adds beside the walk (batch jobs,
/// analyses).
pub fn rig_with(
    configure: impl FnOnce(GatewayBuilder) -> GatewayBuilder,
    serve: impl FnOnce(sluice_gateway::App) -> sluice_gateway::App,
) -> Rig {
    rig_serving(vec![dep("a", 1)], configure, serve)
}

/// Group `chat` over `deployments`, with the work `serve` adds beside the walk.
pub fn rig_serving(
    deployments: Vec<DeploymentConfig>,
    configure: impl FnOnce(GatewayBuilder) -> GatewayBuilder,
    serve: impl FnOnce(sluice_gateway::App) -> sluice_gateway::App,
) -> Rig {
    let (a, b) = (Scripted::default(), Scripted::default());
    let records = Arc::new(Mutex::new(Vec::new()));
    let sink = records.clone();
    // A plain proxy: each test turns on the policy it is about.
    let builder = GatewayBuilder::bare()
        .seed(1)
        .provider("a", Arc::new(a.clone()))
        .provider("b", Arc::new(b.clone()))
        .model("chat", deployments)
        .lanes(lanes(100))
        .on_record(Arc::new(move |r: &CallRecord| sink.lock().push(r.clone())));
    let gw = configure(builder).build().unwrap();
    let app = serve(sluice_gateway::App::new(gw.clone()));
    Rig {
        router: sluice_gateway::server::router(app.clone()),
        app,
        gw,
        a,
        b,
        records,
    }
}

/// A SQLite store in `path` and a ledger writing into it (on the real clock: the pool's
/// timeouts would fire at once in paused time).
pub async fn ledgered(
    path: &std::path::Path,
) -> (sluice_ledger::Ledger, Arc<sluice_ledger::AnyStore>) {
    use sluice_ledger::{AnyStore, Durability, Ledger, SqliteStore};
    let store = Arc::new(AnyStore::Sqlite(
        SqliteStore::open(path, Durability::Disk).await.unwrap(),
    ));
    let (ledger, _writer) = Ledger::start(store.clone());
    (ledger, store)
}

/// The default embedding model, loaded once (`./scripts/test` installs it and names its
/// folder in `SLUICE_EMBEDDER_DIR`).
pub fn embedder() -> Arc<sluice_embed::Embedder> {
    static E: std::sync::OnceLock<Arc<sluice_embed::Embedder>> = std::sync::OnceLock::new();
    E.get_or_init(|| {
        let Ok(dir) = std::env::var("SLUICE_EMBEDDER_DIR") else {
            panic!(
                "SLUICE_EMBEDDER_DIR is not set: run ./scripts/test, which installs the model, \
                 or scripts/install-embedder DIR and point it there"
            );
        };
        Arc::new(sluice_embed::Embedder::load(std::path::Path::new(&dir)).unwrap())
    })
    .clone()
}

/// What a client got: status, body (JSON, or `Null` for a stream), raw body, headers.
pub struct Got {
    pub status: u16,
    pub body: Value,
    pub text: String,
    pub retry_after: Option<String>,
    pub headers: http::HeaderMap,
}

pub async fn ask(router: &axum::Router, lane: Option<&str>, id: &str) -> Got {
    let headers: Vec<(&str, &str)> = lane.map(|l| ("x-sluice-lane", l)).into_iter().collect();
    ask_with(router, &headers, id, false).await
}

/// Asks with extra `headers`, for a stream or not; the body is read to its end.
pub async fn ask_with(
    router: &axum::Router,
    headers: &[(&str, &str)],
    id: &str,
    stream: bool,
) -> Got {
    let body = format!(
        r#"{{"model":"chat","messages":[{{"role":"user","content":"hi"}}],"stream":{stream}}}"#
    );
    send(router, headers, id, &body).await
}

/// Sends `body` as a chat-completions request with extra `headers`; the answer is read to
/// its end.
pub async fn send(router: &axum::Router, headers: &[(&str, &str)], id: &str, body: &str) -> Got {
    let mut req = http::Request::post("/v1/chat/completions")
        .header("content-type", "application/json")
        .header("x-request-id", id);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let body = body.to_string();
    let resp = router
        .clone()
        .oneshot(req.body(Body::from(body)).unwrap())
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let retry_after = headers
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    Got {
        status,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        text: String::from_utf8_lossy(&bytes).into_owned(),
        retry_after,
        headers,
    }
}

impl Got {
    /// The `server-timing` header.
    pub fn timing(&self) -> String {
        self.headers
            .get("server-timing")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default()
    }
}

impl Rig {
    pub fn record(&self, id: &str) -> CallRecord {
        self.records
            .lock()
            .iter()
            .find(|r| r.request_id.as_str() == id)
            .cloned()
            .unwrap()
    }

    /// Sends `n` requests at once in `lane`; returns when all are answered, with their
    /// statuses in request order.
    pub async fn burst(&self, n: usize, lane: &str, prefix: &str) -> Vec<u16> {
        let tasks: Vec<_> = (0..n)
            .map(|i| {
                let router = self.router.clone();
                let (lane, id) = (lane.to_string(), format!("{prefix}-{i}"));
                tokio::spawn(async move { ask(&router, Some(&lane), &id).await.status })
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    }
}

/// The `/metrics` page, scraped through the router.
pub async fn scrape(router: &axum::Router) -> String {
    let (status, text) = scrape_with(router, None).await;
    assert_eq!(status, 200, "{text}");
    text
}

/// `/metrics` scraped with `token` as a bearer token when given: the status and the text.
pub async fn scrape_with(router: &axum::Router, token: Option<&str>) -> (u16, String) {
    let mut req = http::Request::get("/metrics");
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let resp = router
        .clone()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

/// A `GET` of an admin route through the router, expecting 200 and JSON.
pub async fn get_json(router: &axum::Router, path: &str) -> Value {
    let req = http::Request::get(path).body(Body::empty()).unwrap();
    let resp = router.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 200, "{path}");
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap()
}

/// `method path` on the admin API with `body` (none when `Null`), with the admin token when
/// given: the status and the JSON answer (`Null` when there is none).
pub async fn admin(
    router: &axum::Router,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Value,
) -> (u16, Value) {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth
        .as_deref()
        .map(|a| ("authorization", a))
        .into_iter()
        .collect();
    call_json(router, method, path, &headers, body).await
}

/// `POST path` with a JSON `body` and `headers`: the status and the JSON answer (`Null` when
/// there is none).
pub async fn post(
    router: &axum::Router,
    path: &str,
    headers: &[(&str, &str)],
    body: Value,
) -> (u16, Value) {
    let mut all = vec![("content-type", "application/json")];
    all.extend_from_slice(headers);
    call_json(router, "POST", path, &all, body).await
}

/// `method path` with `headers` and `body` (none when `Null`): the status and the JSON answer
/// (`Null` when there is none).
async fn call_json(
    router: &axum::Router,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Value,
) -> (u16, Value) {
    let mut req = http::Request::builder().method(method).uri(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let body = if body.is_null() {
        Body::empty()
    } else {
        Body::from(body.to_string())
    };
    let resp = router
        .clone()
        .oneshot(req.body(body).unwrap())
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}
