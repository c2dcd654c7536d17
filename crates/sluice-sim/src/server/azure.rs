//! Azure OpenAI's URLs on the simulator: `/NAME/openai/deployments/{deployment}/...` (which
//! need `api-version`, as Azure's do) and `/NAME/openai/v1/...`, each asking for `api-key`
//! or a bearer token, answering as the OpenAI routes do, refusing a prompt that holds one of
//! the upstream's `content_filter` words with Azure's content-filter 400, and adding Azure's
//! `retry-after-ms` to a 429.

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};
use serde::Deserialize;
use serde_json::json;

use super::{SimServer, serve};
use crate::limits::Api;

/// The query of a deployment URL.
#[derive(Deserialize)]
pub(crate) struct Version {
    #[serde(rename = "api-version")]
    api_version: Option<String>,
}

impl Version {
    /// Azure's 404 for a deployment URL without `api-version`.
    fn missing(&self) -> Option<Response> {
        self.api_version
            .is_none()
            .then(|| azure_error(StatusCode::NOT_FOUND, "404", "Resource not found", None))
    }
}

/// `POST /NAME/openai/deployments/{deployment}/chat/completions?api-version=...`.
pub(crate) async fn deployment_chat(
    state: State<SimServer>,
    Path((name, _deployment)): Path<(String, String)>,
    Query(v): Query<Version>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = v.missing() {
        return refused;
    }
    chat(state, name, headers, body).await
}

/// `POST /NAME/openai/v1/chat/completions`.
pub(crate) async fn v1_chat(
    state: State<SimServer>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    chat(state, name, headers, body).await
}

/// `POST /NAME/openai/deployments/{deployment}/embeddings?api-version=...`.
pub(crate) async fn deployment_embeddings(
    state: State<SimServer>,
    Path((name, _deployment)): Path<(String, String)>,
    Query(v): Query<Version>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = v.missing() {
        return refused;
    }
    if let Some(refused) = unauthorised(&headers) {
        return refused;
    }
    super::embeddings(state, Path(name), body).await
}

/// `POST /NAME/openai/v1/embeddings`.
pub(crate) async fn v1_embeddings(
    state: State<SimServer>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = unauthorised(&headers) {
        return refused;
    }
    super::embeddings(state, Path(name), body).await
}

async fn chat(state: State<SimServer>, name: String, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(refused) = unauthorised(&headers) {
        return refused;
    }
    let words = state
        .upstream(&name)
        .map(|u| u.spec().content_filter.clone())
        .unwrap_or_default();
    if filters(&words, &body) {
        return azure_error(
            StatusCode::BAD_REQUEST,
            "content_filter",
            "The response was filtered due to the prompt triggering Azure OpenAI's content \
             management policy.",
            Some(json!({
                "code": "ResponsibleAIPolicyViolation",
                "content_filter_result": {
                    "hate": {"filtered": false, "severity": "safe"},
                    "self_harm": {"filtered": false, "severity": "safe"},
                    "sexual": {"filtered": false, "severity": "safe"},
                    "violence": {"filtered": true, "severity": "medium"}
                }
            })),
        );
    }
    let mut resp = serve(state, Path(name), headers, body, Api::Openai).await;
    if resp.status() == StatusCode::TOO_MANY_REQUESTS {
        let ms = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.parse::<u64>().ok())
            .map(|s| s * 1000);
        if let Some(ms) = ms {
            resp.headers_mut()
                .insert("retry-after-ms", HeaderValue::from(ms));
        }
    }
    resp
}

/// Whether the prompt (the body's text) holds one of `words`, in any case.
fn filters(words: &[String], body: &[u8]) -> bool {
    if words.is_empty() {
        return false;
    }
    let text = String::from_utf8_lossy(body).to_lowercase();
    words.iter().any(|w| text.contains(&w.to_lowercase()))
}

/// Azure's 401 when neither `api-key` nor a bearer token came.
fn unauthorised(headers: &HeaderMap) -> Option<Response> {
    let key = headers.get("api-key").is_some_and(|v| !v.is_empty());
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.len() > 7 && v.starts_with("Bearer "));
    (!key && !bearer).then(|| {
        azure_error(
            StatusCode::UNAUTHORIZED,
            "401",
            "Access denied due to invalid subscription key or wrong API endpoint.",
            None,
        )
    })
}

/// An error in Azure OpenAI's shape.
fn azure_error(
    status: StatusCode,
    code: &str,
    message: &str,
    inner: Option<serde_json::Value>,
) -> Response {
    let mut error = json!({"code": code, "message": message, "status": status.as_u16()});
    if let Some(inner) = inner {
        error["param"] = json!("prompt");
        error["innererror"] = inner;
    }
    (
        status,
        [("content-type", "application/json")],
        json!({ "error": error }).to_string(),
    )
        .into_response()
}
