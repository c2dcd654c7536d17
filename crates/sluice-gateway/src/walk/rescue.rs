//! The one place where errors become HTTP answers, in the client's API's error shape.

use axum::body::Body;
use axum::response::Response;
use http::{HeaderValue, StatusCode, header};
use serde_json::json;
use sluice_core::{GatewayError, RequestId};
use sluice_ingress::{Dialect, anthropic};

/// The answer for `e` in the client's dialect: for chat completions an upstream's own 4xx
/// verbatim, else `{"error":{...}}` JSON; for Messages its own error shape and statuses
/// (an upstream's refusal re-worded into it, its status and `Retry-After` kept).
pub fn error_response(
    e: &GatewayError,
    id: &RequestId,
    upstream: Option<&str>,
    dialect: Dialect,
) -> Response {
    let status = match dialect {
        Dialect::Chat => e.status(),
        Dialect::Anthropic => anthropic::error::kind_and_status(e).1,
    };
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let (body, content_type, retry_after) = match &e.upstream {
        Some(reply) if dialect == Dialect::Anthropic => (
            Body::from(anthropic::error::body(e).to_string()),
            "application/json".to_string(),
            reply.retry_after.clone(),
        ),
        Some(reply) => (
            Body::from(reply.body.clone()),
            reply
                .content_type
                .clone()
                .unwrap_or_else(|| "application/json".into()),
            reply.retry_after.clone(),
        ),
        None => (
            Body::from(match dialect {
                Dialect::Chat => error_json(e),
                Dialect::Anthropic => anthropic::error::body(e).to_string(),
            }),
            "application/json".to_string(),
            // Whole seconds, rounded up: never invite a client back before the queue can
            // take it.
            e.retry_after
                .map(|d| d.as_secs_f64().ceil().max(1.0).to_string()),
        ),
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&content_type) {
        h.insert(header::CONTENT_TYPE, v);
    }
    if let Some(v) = retry_after.and_then(|r| HeaderValue::from_str(&r).ok()) {
        h.insert(header::RETRY_AFTER, v);
    }
    for (name, value) in e.headers.iter().flat_map(|h| h.iter()) {
        if let Ok(v) = HeaderValue::from_str(value) {
            h.insert(*name, v);
        }
    }
    crate::walk::respond::tag(h, id, upstream);
    resp
}

/// `{"error":{"message","type","param","code"}}`.
pub fn error_json(e: &GatewayError) -> String {
    json!({
        "error": {
            "message": e.message,
            "type": e.kind.error_type(),
            "param": e.param,
            "code": e.kind.code(),
        }
    })
    .to_string()
}
