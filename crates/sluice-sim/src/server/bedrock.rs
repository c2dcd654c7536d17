//! Bedrock's URLs on the simulator: `/NAME/model/{modelId}/converse` and
//! `/converse-stream`, asking for a SigV4 signature (its form checked: an `authorization` of
//! `AWS4-HMAC-SHA256` for service `bedrock`, and `x-amz-date`) or a Bedrock API key, answering
//! as the other routes do in Converse's JSON and ConverseStream's binary event stream, and
//! throttling as Bedrock does: a bare 429 `ThrottlingException`, no rate-limit headers.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};
use serde_json::{Value, json};

use super::{SimServer, serve};
use crate::limits::Api;

/// `POST /NAME/model/{modelId}/converse`.
pub(crate) async fn converse(
    state: State<SimServer>,
    Path((name, model)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    generate(state, name, &model, false, headers, body).await
}

/// `POST /NAME/model/{modelId}/converse-stream`.
pub(crate) async fn converse_stream(
    state: State<SimServer>,
    Path((name, model)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    generate(state, name, &model, true, headers, body).await
}

/// An error as Bedrock sends one: its type in `x-amzn-ErrorType`, `{"message"}` in the body.
fn bedrock_error(status: StatusCode, kind: &str, message: &str) -> Response {
    let mut r = (status, json!({"message": message}).to_string()).into_response();
    let h = r.headers_mut();
    h.insert("content-type", HeaderValue::from_static("application/json"));
    if let Ok(v) = HeaderValue::from_str(kind) {
        h.insert("x-amzn-errortype", v);
    }
    r
}

/// Whether `headers` carry a SigV4 signature for Bedrock, or a bearer.
fn authenticated(headers: &HeaderMap) -> bool {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if auth.starts_with("Bearer ") && auth.len() > 7 {
        return true;
    }
    auth.starts_with("AWS4-HMAC-SHA256 Credential=")
        && auth.contains("/bedrock/aws4_request")
        && auth.contains("SignedHeaders=")
        && auth.contains("Signature=")
        && headers.contains_key("x-amz-date")
}

async fn generate(
    state: State<SimServer>,
    name: String,
    model: &str,
    stream: bool,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !authenticated(&headers) {
        return bedrock_error(
            StatusCode::FORBIDDEN,
            "UnrecognizedClientException",
            "The security token included in the request is invalid.",
        );
    }
    let body = match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(mut req)) => {
            req.insert("stream".into(), Value::Bool(stream));
            req.insert("model".into(), Value::from(model));
            Bytes::from(Value::Object(req).to_string())
        }
        _ => {
            return bedrock_error(
                StatusCode::BAD_REQUEST,
                "ValidationException",
                "Malformed input request, please reformat your input and try again.",
            );
        }
    };
    let mut resp = serve(state, Path(name), headers, body, Api::Bedrock).await;
    match resp.status() {
        StatusCode::TOO_MANY_REQUESTS => bedrock_error(
            StatusCode::TOO_MANY_REQUESTS,
            "ThrottlingException",
            "Too many requests, please wait before trying again.",
        ),
        StatusCode::OK if stream => {
            resp.headers_mut().insert(
                "content-type",
                HeaderValue::from_static("application/vnd.amazon.eventstream"),
            );
            resp
        }
        _ => resp,
    }
}
