//! The one place where errors become HTTP answers, in the client's API's error shape; and
//! the headers every answer carries, errors or not (`tag`).

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use serde_json::json;
use sluice_core::{GatewayError, RequestId};
use sluice_ingress::Dialect;

/// Every answer says which upstream gave it.
const X_SLUICE_UPSTREAM: HeaderName = HeaderName::from_static("x-sluice-upstream");

/// What `x-sluice-upstream` says of an answer no upstream gave (refused before dispatch, or
/// served from the answer cache).
const NO_UPSTREAM: HeaderValue = HeaderValue::from_static("none");

/// Adds `x-request-id` and `x-sluice-upstream`: the upstream that answered, or `none`.
pub fn tag(h: &mut HeaderMap, id: &RequestId, upstream: Option<&str>) {
    if let Ok(v) = HeaderValue::from_str(id.as_str()) {
        h.insert(sluice_providers::REQUEST_ID_HEADER, v);
    }
    let named = upstream.and_then(|u| HeaderValue::from_str(u).ok());
    h.insert(X_SLUICE_UPSTREAM, named.unwrap_or(NO_UPSTREAM));
}

/// A refusal as the client's API writes it.
pub struct ErrorParts {
    /// The status.
    pub status: StatusCode,
    /// The body.
    pub body: Bytes,
    /// Its content type.
    pub content_type: String,
    /// `Retry-After`, when it says one.
    pub retry_after: Option<String>,
}

/// `e` in the client's dialect: in OpenAI's APIs an upstream's own 4xx verbatim, else
/// `{"error":{...}}` JSON; in Messages its own error shape and statuses (an upstream's
/// refusal re-worded into it, its status and `Retry-After` kept).
pub fn error_parts(e: &GatewayError, dialect: Dialect) -> ErrorParts {
    let own = dialect.refusal(e);
    let status = own.as_ref().map_or(e.status(), |(status, _)| *status);
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let (body, content_type, retry_after) = match (own, &e.upstream) {
        (Some((_, body)), upstream) => (
            body,
            "application/json".to_string(),
            upstream
                .as_ref()
                .and_then(|r| r.retry_after.clone())
                .or_else(|| whole_seconds(e)),
        ),
        (None, Some(reply)) => (
            reply.body.clone(),
            reply
                .content_type
                .clone()
                .unwrap_or_else(|| "application/json".into()),
            reply.retry_after.clone(),
        ),
        (None, None) => (
            Bytes::from(error_json(e)),
            "application/json".to_string(),
            whole_seconds(e),
        ),
    };
    ErrorParts {
        status,
        body,
        content_type,
        retry_after,
    }
}

/// The answer for `e` in the client's dialect (see [`error_parts`]), tagged with the
/// request id and upstream.
pub fn error_response(
    e: &GatewayError,
    id: &RequestId,
    upstream: Option<&str>,
    dialect: Dialect,
) -> Response {
    let parts = error_parts(e, dialect);
    let mut resp = Response::new(Body::from(parts.body));
    *resp.status_mut() = parts.status;
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&parts.content_type) {
        h.insert(header::CONTENT_TYPE, v);
    }
    if let Some(v) = parts
        .retry_after
        .and_then(|r| HeaderValue::from_str(&r).ok())
    {
        h.insert(header::RETRY_AFTER, v);
    }
    for (name, value) in e.headers.iter().flat_map(|h| h.iter()) {
        if let Ok(v) = HeaderValue::from_str(value) {
            h.insert(*name, v);
        }
    }
    tag(h, id, upstream);
    resp
}

/// sluice's own `Retry-After`, in whole seconds rounded up: never invite a client back
/// before the queue can take it.
fn whole_seconds(e: &GatewayError) -> Option<String> {
    e.retry_after
        .map(|d| d.as_secs_f64().ceil().max(1.0).to_string())
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
