//! The HTTP adapter of every API over the walk's typed entry: a request's headers read into
//! a [`Caller`] and [`Asks`], its body handed on unread, and the [`Answered`] or
//! [`Refused`] written back as a response in the client's API with sluice's headers.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request as HttpRequest, State};
use axum::response::Response;
use futures::StreamExt;
use http::{HeaderMap, HeaderName, HeaderValue, header};
use sluice_cache::Directive;
use sluice_ingress::Dialect;

use super::entry::{self, Answer, Answered, Asks, Caller, Head, Refused, Request};
use super::{auth, ingress, rescue};
use crate::Gateway;

const SERVER_TIMING: HeaderName = HeaderName::from_static("server-timing");
const X_SLUICE_CACHE: HeaderName = HeaderName::from_static("x-sluice-cache");
/// Which task-route rule chose the group, and the fallbacks taken.
pub const X_SLUICE_ROUTE: HeaderName = HeaderName::from_static("x-sluice-route");
/// Compression's prompt tokens before and after (`before=54210; after=5990`).
const X_SLUICE_COMPRESSION: HeaderName = HeaderName::from_static("x-sluice-compression");
/// Progressive loading's rounds and the prompt tokens they sent together
/// (`rounds=2; insufficient=1; prompt_tokens=9120`).
const X_SLUICE_PROGRESSIVE: HeaderName = HeaderName::from_static("x-sluice-progressive");

/// `POST /v1/chat/completions`.
pub async fn chat_completions(State(gw): State<Arc<Gateway>>, req: HttpRequest) -> Response {
    serve(gw, req, Dialect::Chat).await
}

/// `POST /v1/messages`: Anthropic Messages, met in the internal form (`sluice-ingress`) and
/// walked as any other request; its answer, stream and errors written back in its own shape.
pub async fn messages(State(gw): State<Arc<Gateway>>, req: HttpRequest) -> Response {
    serve(gw, req, Dialect::Anthropic).await
}

/// `POST /v1/embeddings`: OpenAI embeddings, walked through the model groups with the
/// policies that make sense for them (admission and pacing, retries, breakers, fallbacks,
/// deadlines, the answer cache, billing at the model's input price, the ledger); the
/// upstream's answer goes back as it came.
pub async fn embeddings(State(gw): State<Arc<Gateway>>, req: HttpRequest) -> Response {
    serve(gw, req, Dialect::Embeddings).await
}

/// `POST /v1/responses`: OpenAI Responses (stateless), met in the internal form and walked
/// as any other request; its answer and stream written back as Responses objects and events.
pub async fn responses(State(gw): State<Arc<Gateway>>, req: HttpRequest) -> Response {
    serve(gw, req, Dialect::Responses).await
}

/// `POST /v1beta/models/{model}:{method}` (or `/v1/...`): Google's Gemini API, its model and
/// whether it streams read from the URL; `countTokens` counted as Messages' `count_tokens` is.
pub async fn gemini(State(gw): State<Arc<Gateway>>, req: HttpRequest) -> Response {
    use sluice_ingress::gemini::Method;
    // The URL's last segment, read here (an extractor's refusal would not be in Google's
    // shape).
    let path = req.uri().path().to_string();
    let segment = path.rsplit('/').next().unwrap_or_default();
    let call = percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .map_err(|_| {
            sluice_core::GatewayError::new(
                sluice_core::ErrorKind::InvalidRequest,
                "the URL's model is not UTF-8",
            )
            .with_param("model")
        });
    let (model, method) = match call.as_deref().map_err(Clone::clone).and_then(Method::of) {
        Ok(m) => m,
        Err(e) => {
            let id = ingress::request_id(req.headers());
            return rescue::error_response(&e, &id, None, Dialect::Gemini { stream: false });
        }
    };
    let dialect = match method {
        Method::CountTokens => return gemini_count_tokens(gw, model, req).await,
        Method::Generate => Dialect::Gemini { stream: false },
        Method::Stream => Dialect::Gemini { stream: true },
    };
    let model = model.to_string();
    serve_as(gw, req, dialect, Some(model)).await
}

/// `POST /v1beta/models/{model}:countTokens`: the prompt's tokens as sluice counts them, in
/// Gemini's shape (`totalTokens`); refusals in Google's error shape.
async fn gemini_count_tokens(
    gw: Arc<Gateway>,
    model: &str,
    req: axum::extract::Request,
) -> Response {
    let (parts, body) = req.into_parts();
    let id = ingress::request_id(&parts.headers);
    let counted = async {
        let caller = auth::identify(&gw, &parts.headers)?;
        let bytes = ingress::read_body(
            arriving(&parts.headers, body),
            gw.max_body_bytes,
            gw.body_stall,
        )
        .await?;
        let chat = sluice_ingress::gemini::count_request(&bytes, model)?;
        let request = sluice_core::ChatRequest::from_bytes(bytes::Bytes::from(chat))?;
        caller.may_use(&request.model)?;
        Ok::<_, sluice_core::GatewayError>(gw.tenants.tokenizer.prompt_tokens(&request))
    };
    match counted.await {
        Ok(n) => axum::response::IntoResponse::into_response(axum::Json(
            serde_json::json!({"totalTokens": n}),
        )),
        Err(e) => rescue::error_response(&e, &id, None, Dialect::Gemini { stream: false }),
    }
}

/// A request of any dialect, walked once through the typed entry.
async fn serve(gw: Arc<Gateway>, req: HttpRequest, dialect: Dialect) -> Response {
    serve_as(gw, req, dialect, None).await
}

/// A request of `dialect` whose URL names `url_model` (if any), walked once.
async fn serve_as(
    gw: Arc<Gateway>,
    req: HttpRequest,
    dialect: Dialect,
    url_model: Option<String>,
) -> Response {
    let (parts, body) = req.into_parts();
    let h = &parts.headers;
    let caller = Caller::Presented {
        key: auth::presented_key(h).map(str::to_string),
        tenant: ingress::tenant(h),
    };
    let mut asks = asks(h, dialect, gw.observers.traces.is_some());
    asks.url_model = url_model;
    let request = Request {
        id: ingress::request_id(h),
        dialect,
        body: arriving(h, body),
        asks,
    };
    match super::answer(gw, caller, request).await {
        Ok(answered) => answer_response(answered),
        Err(refused) => refusal_response(&refused),
    }
}

/// A client's body still arriving, with the length its headers `h` declare.
pub fn arriving(h: &HeaderMap, body: Body) -> entry::Body {
    let declared = h
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    entry::Body::Arriving { body, declared }
}

/// What `h` asks of the walk; the trace context only when calls are traced.
fn asks(h: &HeaderMap, dialect: Dialect, traced: bool) -> Asks {
    let text = |name: &str| h.get(name).and_then(|v| v.to_str().ok());
    let bytes = |name: &str| {
        h.get(name)
            .map(|v| bytes::Bytes::copy_from_slice(v.as_bytes()))
    };
    let forwarded = match dialect {
        Dialect::Anthropic => sluice_ingress::anthropic::FORWARDED_HEADERS
            .iter()
            .filter_map(|name| text(name).map(|v| ((*name).to_string(), v.to_string())))
            .collect(),
        _ => Vec::new(),
    };
    Asks {
        lane: h
            .get(ingress::LANE)
            .map(|v| v.to_str().unwrap_or_default().to_string()),
        timeout: ingress::timeout(h),
        task: super::route::task_header(h),
        cache: Directive::of(h),
        trace: if traced {
            (bytes("traceparent"), bytes("tracestate"))
        } else {
            (None, None)
        },
        forwarded,
        url_model: None,
        withdrawn: None,
    }
}

/// Writes `head` into `h`.
fn write_head(head: &Head, h: &mut HeaderMap) {
    rescue::tag(h, &head.request_id, head.upstream.as_deref());
    if let Ok(v) = HeaderValue::from_str(&head.server_timing) {
        h.insert(SERVER_TIMING, v);
    }
    if let Some(v) = head
        .cache
        .as_deref()
        .and_then(|c| HeaderValue::from_str(c).ok())
    {
        h.insert(X_SLUICE_CACHE, v);
    }
    if let Some(v) = head
        .route
        .as_deref()
        .and_then(|r| HeaderValue::from_str(r).ok())
    {
        h.insert(X_SLUICE_ROUTE, v);
    }
    if let Some((before, after)) = head.compression
        && let Ok(v) = HeaderValue::from_str(&format!("before={before}; after={after}"))
    {
        h.insert(X_SLUICE_COMPRESSION, v);
    }
    if let Some((rounds, insufficient, sent)) = head.progressive {
        let text = format!("rounds={rounds}; insufficient={insufficient}; prompt_tokens={sent}");
        if let Ok(v) = HeaderValue::from_str(&text) {
            h.insert(X_SLUICE_PROGRESSIVE, v);
        }
    }
    if let Some(age) = head.age {
        h.insert(header::AGE, HeaderValue::from(age));
    }
}

/// An answer as an HTTP response.
fn answer_response(answered: Answered) -> Response {
    // Sized once for the headers written here and the content length added on the way out,
    // rather than grown (and reallocated) as inserts fill it.
    let mut h = HeaderMap::with_capacity(8);
    let body = match answered.answer {
        Answer::Complete { body, content_type } => {
            h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
            Body::from(body)
        }
        Answer::Stream(stream) => {
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            );
            h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            Body::from_stream(stream.map(Ok::<_, Infallible>))
        }
    };
    write_head(&answered.head, &mut h);
    let mut resp = Response::new(body);
    *resp.headers_mut() = h;
    resp
}

/// A refusal as an HTTP response in the client's API, with the call's timings and route.
fn refusal_response(refused: &Refused) -> Response {
    let head = &refused.head;
    let mut resp = rescue::error_response(
        &refused.error,
        &head.request_id,
        head.upstream.as_deref(),
        refused.dialect,
    );
    // A refusal's head holds its timings and route, and nothing of a cache or shaping.
    write_head(head, resp.headers_mut());
    resp
}
