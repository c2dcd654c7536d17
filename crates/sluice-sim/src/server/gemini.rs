//! Gemini's URLs on the simulator: `/NAME/v1beta/models/{model}:generateContent` (and
//! `:streamGenerateContent?alt=sse`), and Vertex AI's
//! `/NAME/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:...`,
//! asking for `x-goog-api-key` or a bearer token, answering as the other routes do in
//! Gemini's wire format, with no rate-limit headers and a 429's delay in its body's
//! `RetryInfo` (as Google sends them).

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};
use serde_json::{Value, json};

use super::{SimServer, error, serve};
use crate::limits::Api;

/// `POST /NAME/v1beta/models/{model}:{method}`.
pub(crate) async fn gemini_api(
    state: State<SimServer>,
    Path((name, call)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    generate(state, name, &call, headers, body).await
}

/// `POST /NAME/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:
/// {method}`.
pub(crate) async fn vertex(
    state: State<SimServer>,
    Path((name, _project, _location, call)): Path<(String, String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    generate(state, name, &call, headers, body).await
}

async fn generate(
    state: State<SimServer>,
    name: String,
    call: &str,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let refuse =
        |status: StatusCode, message: &str| error(Api::Gemini, status, message, Vec::new());
    let key = headers.get("x-goog-api-key").is_some_and(|v| !v.is_empty());
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.len() > 7 && v.starts_with("Bearer "));
    if !key && !bearer {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "Method doesn't allow unregistered callers. Please use API Key or other form of \
             API consumer identity to call this API.",
        );
    }
    let stream = match call.rsplit_once(':') {
        Some((_, "generateContent")) => false,
        Some((_, "streamGenerateContent")) => true,
        _ => return refuse(StatusCode::NOT_FOUND, &format!("no method `{call}`")),
    };
    let model = call.rsplit_once(':').map_or("", |(m, _)| m);
    // The route says whether it streams, the URL which model: the shared answer reads both
    // from the body.
    let body = match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(mut req)) => {
            req.insert("stream".into(), Value::Bool(stream));
            req.insert("model".into(), Value::from(model));
            Bytes::from(Value::Object(req).to_string())
        }
        _ => {
            return refuse(StatusCode::BAD_REQUEST, "Invalid JSON payload received.");
        }
    };
    let resp = serve(state, Path(name), headers, body, Api::Gemini).await;
    if resp.status() == StatusCode::TOO_MANY_REQUESTS {
        return with_retry_info(resp);
    }
    resp
}

/// A 429 as Google sends it: no `Retry-After`, the delay in the body's `RetryInfo`.
fn with_retry_info(resp: Response) -> Response {
    let delay = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.parse::<u64>().ok());
    let mut details = Vec::new();
    if let Some(secs) = delay {
        details.push(json!({
            "@type": "type.googleapis.com/google.rpc.RetryInfo",
            "retryDelay": format!("{secs}s"),
        }));
    }
    let body = json!({"error": {
        "code": 429,
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "status": "RESOURCE_EXHAUSTED",
        "details": details,
    }});
    let mut out = (StatusCode::TOO_MANY_REQUESTS, body.to_string()).into_response();
    out.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    out
}
