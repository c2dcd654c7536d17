//! The simulator over HTTP (`sluice sim`): every upstream answers OpenAI chat completions at
//! `/NAME/v1/chat/completions` (or Anthropic Messages at `/NAME/v1/messages`, or Azure
//! OpenAI's URLs under `/NAME/openai/`, see [`azure`], or Gemini's and Vertex AI's, see
//! [`gemini`], or Bedrock's, see [`bedrock`]), and `/stats` reports what each saw.

mod azure;
mod bedrock;
mod gemini;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use sluice_config::document::Seg;
use sluice_config::{Diagnostics, Document};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep};

use crate::incoming::incoming;
use crate::limits::Api;
use crate::script::{self, Render, Step};
use crate::spec::UpstreamSpec;
use crate::upstream::{AnswerPlan, Fault, Plan, SimUpstream};

/// `[sim]` of a simulator config file.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default)]
pub struct SimSection {
    /// Address to listen on.
    pub listen: String,
    /// Seed of every draw.
    pub seed: u64,
}

impl Default for SimSection {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:9100".into(),
            seed: 1,
        }
    }
}

/// A simulator config: `[sim]` and `[upstreams.NAME]`.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    /// `[sim]`.
    pub sim: SimSection,
    /// The parsed listen address.
    pub listen: SocketAddr,
    /// `[upstreams.*]`.
    pub upstreams: Vec<(String, UpstreamSpec)>,
}

impl SimConfig {
    /// Parses and checks a simulator config, reporting every error.
    pub fn parse(text: &str) -> Result<Self, Diagnostics> {
        let doc = Document::parse(text)?;
        let mut diags = Vec::new();
        doc.reject_unknown_top_level(&["sim", "upstreams"], &mut diags);
        let sim: Option<SimSection> = doc.section("sim", &mut diags);
        let upstreams: Vec<(String, UpstreamSpec)> = doc.map_section("upstreams", &mut diags);
        for (name, spec) in &upstreams {
            for p in spec.problems() {
                diags.push(doc.diag(&[Seg::Key("upstreams".into()), Seg::Key(name.clone())], p));
            }
        }
        if upstreams.is_empty() {
            diags.push(doc.diag(
                &[Seg::Key("upstreams".into())],
                "define at least one [upstreams.NAME]",
            ));
        }
        let listen = sim.as_ref().and_then(|s| match s.listen.parse() {
            Ok(a) => Some(a),
            Err(_) => {
                diags.push(doc.diag(
                    &[Seg::Key("sim".into()), Seg::Key("listen".into())],
                    format!("`{}` is not an address like 127.0.0.1:9100", s.listen),
                ));
                None
            }
        });
        match (sim, listen) {
            (Some(sim), Some(listen)) if diags.is_empty() => Ok(Self {
                sim,
                listen,
                upstreams,
            }),
            _ => {
                let mut d = Diagnostics(diags);
                d.sort();
                Err(d)
            }
        }
    }
}

/// The simulated upstreams behind one HTTP server.
#[derive(Clone, Debug)]
pub struct SimServer {
    upstreams: Arc<BTreeMap<String, Arc<SimUpstream>>>,
}

impl SimServer {
    /// Upstreams built from `specs`, their clocks starting now.
    pub fn new(specs: &[(String, UpstreamSpec)], seed: u64) -> Self {
        let now = Instant::now();
        let upstreams = specs
            .iter()
            .map(|(n, s)| {
                (
                    n.clone(),
                    Arc::new(SimUpstream::new(n, s.clone(), seed, now)),
                )
            })
            .collect();
        Self {
            upstreams: Arc::new(upstreams),
        }
    }

    /// An upstream by name.
    pub fn upstream(&self, name: &str) -> Option<&Arc<SimUpstream>> {
        self.upstreams.get(name)
    }

    /// The routes.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/{upstream}/v1/chat/completions", post(chat))
            .route("/{upstream}/v1/messages", post(messages))
            .route("/{upstream}/v1/embeddings", post(embeddings))
            .route(
                "/{upstream}/openai/deployments/{deployment}/chat/completions",
                post(azure::deployment_chat),
            )
            .route(
                "/{upstream}/openai/deployments/{deployment}/embeddings",
                post(azure::deployment_embeddings),
            )
            .route(
                "/{upstream}/openai/v1/chat/completions",
                post(azure::v1_chat),
            )
            .route(
                "/{upstream}/openai/v1/embeddings",
                post(azure::v1_embeddings),
            )
            .route(
                "/{upstream}/v1beta/models/{call}",
                post(gemini::gemini_api),
            )
            .route(
                "/{upstream}/v1/projects/{project}/locations/{location}/publishers/google/models/{call}",
                post(gemini::vertex),
            )
            .route(
                "/{upstream}/model/{model}/converse",
                post(bedrock::converse),
            )
            .route(
                "/{upstream}/model/{model}/converse-stream",
                post(bedrock::converse_stream),
            )
            .route("/stats", get(stats))
            .route("/healthz", get(|| async { Json(json!({"status": "ok"})) }))
            .with_state(self.clone())
    }
}

async fn stats(State(s): State<SimServer>) -> Json<Value> {
    let ups: Map<String, Value> = s
        .upstreams
        .iter()
        .map(|(n, u)| {
            (
                n.clone(),
                serde_json::to_value(u.stats()).unwrap_or(Value::Null),
            )
        })
        .collect();
    Json(json!({"upstreams": ups}))
}

async fn chat(
    state: State<SimServer>,
    name: Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    serve(state, name, headers, body, Api::Openai).await
}

async fn messages(
    state: State<SimServer>,
    name: Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    serve(state, name, headers, body, Api::Anthropic).await
}

/// `/v1/embeddings` in OpenAI's shape: each input embedded by the FAQ world's simulated
/// model ([`crate::faq`]), at once (no latency, limits or faults are simulated here).
pub(crate) async fn embeddings(
    State(s): State<SimServer>,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    if s.upstream(&name).is_none() {
        return error(
            Api::Openai,
            StatusCode::NOT_FOUND,
            &format!("no upstream `{name}`"),
            Vec::new(),
        );
    }
    let inputs: Vec<String> = match serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("input").cloned())
    {
        Some(Value::String(one)) => vec![one],
        Some(Value::Array(many)) if many.iter().all(Value::is_string) => many
            .into_iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => {
            return error(
                Api::Openai,
                StatusCode::BAD_REQUEST,
                "`input` must be a string or an array of strings",
                Vec::new(),
            );
        }
    };
    let Some(faq) = crate::faq::shipped() else {
        return error(
            Api::Openai,
            StatusCode::INTERNAL_SERVER_ERROR,
            "the simulated embedding model could not load its questions",
            Vec::new(),
        );
    };
    let tokens: usize = inputs
        .iter()
        .map(|t| crate::cache::tokens_of(t.len()).max(1) as usize)
        .sum();
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": faq.embed(t)}))
        .collect();
    Json(json!({
        "object": "list",
        "data": data,
        "model": "sim-embed",
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }))
    .into_response()
}

fn insert_all(h: &mut HeaderMap, headers: Vec<(String, String)>) {
    for (k, v) in headers {
        if let (Ok(k), Ok(v)) = (http::HeaderName::try_from(k), HeaderValue::try_from(v)) {
            h.insert(k, v);
        }
    }
}

pub(crate) fn error(
    api: Api,
    status: StatusCode,
    message: &str,
    extra: Vec<(String, String)>,
) -> Response {
    let mut r = (status, script::error_body(api, status.as_u16(), message)).into_response();
    let h = r.headers_mut();
    h.insert("content-type", HeaderValue::from_static("application/json"));
    insert_all(h, extra);
    r
}

pub(crate) async fn serve(
    State(s): State<SimServer>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
    api: Api,
) -> Response {
    let Some(up) = s.upstream(&name).cloned() else {
        return error(
            api,
            StatusCode::NOT_FOUND,
            &format!("no simulated upstream `{name}`"),
            Vec::new(),
        );
    };
    let Ok(Value::Object(req)) = serde_json::from_slice::<Value>(&body) else {
        return error(
            api,
            StatusCode::BAD_REQUEST,
            "body is not a JSON object",
            Vec::new(),
        );
    };
    let id = headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
        .to_string();
    let plan = up.plan(&incoming(&req, &id), Instant::now());
    // The wire format is the route's; the spec's `api` only picks header names on 429s (Gemini
    // sends none).
    let header_api = match api {
        Api::Gemini | Api::Bedrock => api,
        _ => up.spec().api,
    };
    match plan {
        Plan::RateLimited(state) => error(
            api,
            StatusCode::TOO_MANY_REQUESTS,
            "Rate limit reached for requests",
            state.headers(header_api),
        ),
        Plan::Fail(Fault::Error500, after) => {
            sleep(after).await;
            error(
                api,
                StatusCode::INTERNAL_SERVER_ERROR,
                "simulated server error",
                Vec::new(),
            )
        }
        Plan::Fail(Fault::Error503, after) => {
            sleep(after).await;
            error(
                api,
                StatusCode::SERVICE_UNAVAILABLE,
                "simulated overload",
                Vec::new(),
            )
        }
        Plan::Fail(Fault::Reset, after) => {
            sleep(after).await;
            reset()
        }
        Plan::Answer(p) => answer(&up, p, &req, api, header_api).await,
    }
}

/// An answer as `p` plans it: whole with a content-length, or streamed frame by frame; the
/// upstream's concurrency held until it has been sent.
async fn answer(
    up: &Arc<SimUpstream>,
    p: AnswerPlan,
    req: &Map<String, Value>,
    api: Api,
    header_api: Api,
) -> Response {
    let busy = up.admit().await;
    let stream = req.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let include_usage = req
        .get("stream_options")
        .and_then(|o| o.get("include_usage"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let render = Render {
        api,
        model: req
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("sim")
            .to_string(),
        stream,
        include_usage,
        shape: crate::structured::shape_of(req),
    };
    let steps = script::answer(&p, &render);
    let rate_headers = p.rate.headers(header_api);
    if !stream {
        // A complete answer goes out whole, with a content-length, as servers send it.
        let mut body = Bytes::new();
        for step in steps {
            match step {
                Step::Wait(d) => sleep(d).await,
                Step::Frame(b) => body = b,
                Step::Usage(_) => {}
            }
        }
        drop(busy);
        let mut resp = Response::new(Body::from(body));
        let h = resp.headers_mut();
        h.insert("content-type", HeaderValue::from_static("application/json"));
        insert_all(h, rate_headers);
        return resp;
    }
    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(16);
    tokio::spawn(async move {
        let _busy = busy;
        for step in steps {
            match step {
                Step::Wait(d) => sleep(d).await,
                Step::Frame(b) => {
                    if tx.send(Ok(b)).await.is_err() {
                        return;
                    }
                }
                Step::Usage(_) => {}
            }
        }
    });
    let mut resp = Response::new(Body::from_stream(ReceiverStream(rx)));
    let h = resp.headers_mut();
    h.insert(
        "content-type",
        HeaderValue::from_static("text/event-stream"),
    );
    insert_all(h, rate_headers);
    resp
}

/// A response whose body fails at once: the connection is dropped mid-answer, which the
/// client sees as a reset.
fn reset() -> Response {
    let failing = futures::stream::once(async {
        Err::<Bytes, std::io::Error>(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "simulated reset",
        ))
    });
    Response::new(Body::from_stream(failing))
}

struct ReceiverStream(mpsc::Receiver<Result<Bytes, Infallible>>);

impl futures::Stream for ReceiverStream {
    type Item = Result<Bytes, Infallible>;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}

/// Serves `server` on `listener` until `shutdown` resolves.
pub async fn serve_on(
    server: SimServer,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // TCP_NODELAY on every connection, as the gateway sets it: small chunks go out at once.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("no TCP_NODELAY: {e}");
        }
    });
    axum::serve(listener, server.router())
        .with_graceful_shutdown(shutdown)
        .await
}

#[cfg(test)]
mod tests;
