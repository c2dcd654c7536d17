//! Refusals written by the HTTP layer rather than by sluice (an extractor's rejection of a
//! body, a query or a path: text, in axum's words) said again in the error shape of the API
//! the route speaks, with their status kept. The walk's own routes read their requests
//! themselves and never pass through here.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use http::header::CONTENT_TYPE;
use http_body_util::BodyExt;
use sluice_core::{ErrorKind, GatewayError};
use sluice_ingress::Dialect;

use crate::walk::{ingress, rescue};

/// The most of the HTTP layer's own text kept in the message.
const KEPT: usize = 1024;

/// The kind of error a status the HTTP layer wrote stands for.
fn kind_of(status: u16) -> ErrorKind {
    match status {
        401 => ErrorKind::Unauthorized,
        404 => ErrorKind::RouteNotFound,
        405 => ErrorKind::MethodNotAllowed,
        413 => ErrorKind::PayloadTooLarge,
        500.. => ErrorKind::Internal,
        _ => ErrorKind::InvalidRequest,
    }
}

/// The API whose error shape a route's refusals take: Anthropic's for the Messages routes,
/// Google's for Gemini's, OpenAI's for every other.
pub fn dialect_of(uri: &http::Uri) -> Dialect {
    match uri.path() {
        "/v1/messages" | "/v1/messages/count_tokens" => Dialect::Anthropic,
        p if p.starts_with("/v1beta/") || (p.starts_with("/v1/models/") && p.contains(':')) => {
            Dialect::Gemini { stream: false }
        }
        _ => Dialect::Chat,
    }
}

/// Passes `req` on; a refusal that is not JSON comes back in the route's API's shape.
pub async fn reshape(req: Request, next: Next) -> Response {
    let dialect = dialect_of(req.uri());
    let id = ingress::request_id(req.headers());
    let resp = next.run(req).await;
    let status = resp.status();
    let json = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/json"));
    if status.as_u16() < 400 || json {
        return resp;
    }
    let body = http_body_util::Limited::new(resp.into_body(), KEPT * 4);
    let said = match body.collect().await {
        Ok(b) => String::from_utf8_lossy(&b.to_bytes()).trim().to_string(),
        Err(_) => String::new(),
    };
    let mut message: String = said.chars().take(KEPT).collect();
    if message.is_empty() {
        message = status.canonical_reason().unwrap_or("refused").to_string();
    }
    let e = GatewayError::new(kind_of(status.as_u16()), message);
    let mut out = rescue::error_response(&e, &id, None, dialect);
    *out.status_mut() = status;
    out
}
