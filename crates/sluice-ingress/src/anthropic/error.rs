//! sluice's refusals in Messages' error shape, `{"type":"error","error":{"type","message"}}`,
//! with the statuses Anthropic's clients expect (529 `overloaded_error` where sluice sheds
//! load, so that their retries back off as they would from Anthropic).

use serde_json::{Value, json};
use sluice_core::{ErrorKind, GatewayError};

/// The Messages error `type` and status for a refusal.
pub fn kind_and_status(e: &GatewayError) -> (&'static str, u16) {
    match e.kind {
        ErrorKind::InvalidJson
        | ErrorKind::InvalidRequest
        | ErrorKind::ContextLengthExceeded
        | ErrorKind::Conflict
        | ErrorKind::Withdrawn
        | ErrorKind::MethodNotAllowed => ("invalid_request_error", e.kind.status()),
        ErrorKind::Unauthorized => ("authentication_error", 401),
        ErrorKind::InsufficientCredits => ("billing_error", 402),
        ErrorKind::PermissionDenied | ErrorKind::ModelNotAllowed => ("permission_error", 403),
        ErrorKind::ModelNotFound | ErrorKind::RouteNotFound | ErrorKind::NotFound => {
            ("not_found_error", 404)
        }
        ErrorKind::PayloadTooLarge => ("request_too_large", 413),
        ErrorKind::ClientTimeout => ("timeout_error", 408),
        ErrorKind::QuotaExceeded => ("rate_limit_error", 429),
        ErrorKind::Overloaded | ErrorKind::ShuttingDown | ErrorKind::UpstreamUnavailable => {
            ("overloaded_error", 529)
        }
        ErrorKind::UpstreamTimeout | ErrorKind::DeadlineExceeded => ("timeout_error", 504),
        ErrorKind::UpstreamRejected | ErrorKind::ContentFiltered => {
            let status = e.status();
            let kind = match status {
                401 => "authentication_error",
                402 => "billing_error",
                403 => "permission_error",
                404 => "not_found_error",
                413 => "request_too_large",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                s if s >= 500 => "api_error",
                _ => "invalid_request_error",
            };
            (kind, status)
        }
        ErrorKind::UpstreamConnect
        | ErrorKind::UpstreamServerError
        | ErrorKind::UpstreamProtocol => ("api_error", e.kind.status()),
        ErrorKind::Internal => ("api_error", 500),
        ErrorKind::StoreUnavailable => ("api_error", 503),
    }
}

/// The refusal's message: sluice's own, or for an upstream's refusal the message its body
/// carries (in either API's shape), else the body itself.
fn message(e: &GatewayError) -> String {
    let Some(reply) = e.upstream.as_ref() else {
        return e.message.to_string();
    };
    let said = serde_json::from_slice::<Value>(&reply.body)
        .ok()
        .and_then(|v| {
            v.get("error")
                .and_then(|err| err.get("message").or(Some(err)))
                .and_then(Value::as_str)
                .map(str::to_string)
        });
    said.unwrap_or_else(|| String::from_utf8_lossy(&reply.body).into_owned())
}

/// The error object, `{"type":"error","error":{...}}`; the field at fault is named in the
/// message (Messages has no `param`).
pub fn body(e: &GatewayError) -> Value {
    let (kind, _) = kind_and_status(e);
    let mut text = message(e);
    if let Some(p) = e.param.as_deref()
        && !text.contains(p)
    {
        text = format!("{p}: {text}");
    }
    json!({"type": "error", "error": {"type": kind, "message": text}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use sluice_core::UpstreamReply;

    #[test]
    fn shedding_is_529_overloaded_and_fields_are_named() {
        let e = GatewayError::new(ErrorKind::Overloaded, "queue full");
        assert_eq!(kind_and_status(&e), ("overloaded_error", 529));
        let e =
            GatewayError::new(ErrorKind::InvalidRequest, "must be a string").with_param("model");
        assert_eq!(kind_and_status(&e), ("invalid_request_error", 400));
        assert_eq!(body(&e)["error"]["message"], "model: must be a string");
        assert_eq!(body(&e)["type"], "error");
        let e = GatewayError::new(ErrorKind::Unauthorized, "no key");
        assert_eq!(kind_and_status(&e).1, 401);
    }

    #[test]
    fn an_upstream_refusal_keeps_its_status_and_message() {
        let e = GatewayError::rejected(UpstreamReply {
            status: 429,
            body: Bytes::from_static(br#"{"error":{"message":"slow down","type":"x"}}"#),
            content_type: None,
            retry_after: Some("3".into()),
        });
        assert_eq!(kind_and_status(&e), ("rate_limit_error", 429));
        assert_eq!(body(&e)["error"]["message"], "slow down");
    }
}
