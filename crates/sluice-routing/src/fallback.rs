//! When a request leaves its group for the group's next fallback, within the same request:
//! the decision is a pure function of why the group could not take it.

use sluice_core::{ErrorKind, GatewayError};

/// Why a request went to a fallback group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// Every deployment was unavailable (breakers open) or sluice's queue for it was full.
    Unavailable,
    /// The tenant's credits or quota refused the call at this group's price.
    Quota,
    /// The prompt and `max_tokens` fit no deployment's context window (decided before any
    /// upstream call).
    ContextWindow,
    /// The upstream said the prompt was too long for its model.
    ContextLength,
    /// The group's deployments failed (no connection, a reset, a 5xx, a timeout) on every
    /// try the group made.
    Failed,
    /// The group's deployments answered 429 on every try the group made.
    RateLimited,
}

impl Reason {
    /// A short label for metrics, headers and the call record.
    pub fn label(self) -> &'static str {
        match self {
            Self::Unavailable => "unavailable",
            Self::Quota => "quota",
            Self::ContextWindow => "context_window",
            Self::ContextLength => "context_length",
            Self::Failed => "upstream_failed",
            Self::RateLimited => "rate_limited",
        }
    }
}

/// Whether `err`, raised while the group tried to take the request, sends it to the next
/// fallback, and why. The group has made its own tries (retries elsewhere within its budget)
/// before an upstream failure reaches here. Errors of the request itself (a bad field, a
/// key's permissions, a deadline that ran out, the upstream's own 4xx about the request) do
/// not: another group would refuse it as well.
pub fn reason_for(err: &GatewayError) -> Option<Reason> {
    match err.kind {
        ErrorKind::UpstreamUnavailable | ErrorKind::Overloaded => Some(Reason::Unavailable),
        ErrorKind::QuotaExceeded | ErrorKind::InsufficientCredits => Some(Reason::Quota),
        ErrorKind::UpstreamRejected if err.is_rate_limited() => Some(Reason::RateLimited),
        ErrorKind::UpstreamRejected if says_too_long(err) => Some(Reason::ContextLength),
        kind if kind.retryable() => Some(Reason::Failed),
        _ => None,
    }
}

/// Whether an upstream's refusal says the prompt is longer than the model takes: OpenAI's
/// `context_length_exceeded`, Anthropic's "prompt is too long", and the wordings
/// OpenAI-compatible servers (vLLM, SGLang, DeepSeek) use.
fn says_too_long(err: &GatewayError) -> bool {
    let Some(reply) = err.upstream.as_deref() else {
        return false;
    };
    if reply.status != 400 && reply.status != 413 {
        return false;
    }
    let body = String::from_utf8_lossy(&reply.body).to_ascii_lowercase();
    [
        "context_length_exceeded",
        "prompt is too long",
        "maximum context length",
        "context length",
        "too many tokens",
    ]
    .iter()
    .any(|w| body.contains(w))
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use sluice_core::UpstreamReply;

    use super::*;

    fn rejected(status: u16, body: &str) -> GatewayError {
        GatewayError::rejected(UpstreamReply {
            status,
            body: Bytes::from(body.to_string()),
            content_type: None,
            retry_after: None,
        })
    }

    #[test]
    fn what_the_group_could_not_do_falls_back_and_what_the_request_did_does_not() {
        let e = |k| GatewayError::new(k, "x");
        assert_eq!(
            reason_for(&e(ErrorKind::UpstreamUnavailable)),
            Some(Reason::Unavailable)
        );
        assert_eq!(
            reason_for(&e(ErrorKind::Overloaded)),
            Some(Reason::Unavailable)
        );
        assert_eq!(
            reason_for(&e(ErrorKind::QuotaExceeded)),
            Some(Reason::Quota)
        );
        assert_eq!(
            reason_for(&e(ErrorKind::InsufficientCredits)),
            Some(Reason::Quota)
        );
        assert_eq!(reason_for(&e(ErrorKind::InvalidRequest)), None);
        assert_eq!(reason_for(&e(ErrorKind::DeadlineExceeded)), None);
        assert_eq!(reason_for(&e(ErrorKind::PermissionDenied)), None);
        let openai = r#"{"error":{"message":"This model's maximum context length is 128000 tokens","code":"context_length_exceeded"}}"#;
        assert_eq!(
            reason_for(&rejected(400, openai)),
            Some(Reason::ContextLength)
        );
        let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
        assert_eq!(
            reason_for(&rejected(400, anthropic)),
            Some(Reason::ContextLength)
        );
        assert_eq!(
            reason_for(&rejected(400, r#"{"error":{"message":"bad temperature"}}"#)),
            None
        );
        assert_eq!(
            reason_for(&rejected(429, openai)),
            Some(Reason::RateLimited),
            "a 429 is not about length"
        );
        for kind in [
            ErrorKind::UpstreamConnect,
            ErrorKind::UpstreamServerError,
            ErrorKind::UpstreamTimeout,
            ErrorKind::UpstreamProtocol,
        ] {
            assert_eq!(reason_for(&e(kind)), Some(Reason::Failed), "{kind:?}");
        }
        assert_eq!(
            reason_for(&rejected(404, r#"{"error":{"message":"no such model"}}"#)),
            None,
            "the upstream's 4xx about the request"
        );
    }
}
