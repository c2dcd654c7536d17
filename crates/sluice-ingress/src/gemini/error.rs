//! sluice's refusals in Google's error shape, `{"error":{"code","message","status"}}`, with
//! the status names Google's clients read (`RESOURCE_EXHAUSTED` for a 429, `UNAVAILABLE`
//! where sluice sheds load, so their retries back off as they would from Google).

use serde_json::{Value, json};
use sluice_core::GatewayError;

/// Google's status name for an HTTP status.
pub fn status_name(status: u16) -> &'static str {
    match status {
        400 | 413 | 422 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        402 => "FAILED_PRECONDITION",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        408 | 504 => "DEADLINE_EXCEEDED",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        501 => "UNIMPLEMENTED",
        502 | 503 | 529 => "UNAVAILABLE",
        s if s >= 500 => "INTERNAL",
        _ => "FAILED_PRECONDITION",
    }
}

/// The status a refusal is answered with (Anthropic's 529 is not Google's: 503).
pub fn status(e: &GatewayError) -> u16 {
    match e.status() {
        529 => 503,
        s => s,
    }
}

/// The refusal's message: sluice's own, or for an upstream's refusal the message its body
/// carries, else the body itself; the field at fault named first.
fn message(e: &GatewayError) -> String {
    let said = e.upstream.as_ref().map(|reply| {
        serde_json::from_slice::<Value>(&reply.body)
            .ok()
            .and_then(|v| {
                v.get("error")
                    .and_then(|err| err.get("message").or(Some(err)))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_else(|| String::from_utf8_lossy(&reply.body).into_owned())
    });
    let text = said.unwrap_or_else(|| e.message.to_string());
    match e.param.as_deref() {
        Some(p) if !text.contains(p) => format!("{p}: {text}"),
        _ => text,
    }
}

/// The error object.
pub fn body(e: &GatewayError) -> Value {
    let status = status(e);
    json!({"error": {"code": status, "message": message(e), "status": status_name(status)}})
}
