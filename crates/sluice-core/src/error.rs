//! What can go wrong with a call, classified once where it arises.
//!
//! Each [`ErrorKind`] declares its HTTP status, its OpenAI error `type` and `code`, and whether
//! another attempt could succeed. The HTTP edge renders these; nothing else picks a status.

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;

/// The classification of a failed call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The body is not valid JSON.
    InvalidJson,
    /// The JSON is valid but a field is missing or has the wrong type.
    InvalidRequest,
    /// No API key, or one sluice does not know.
    Unauthorized,
    /// The API key may not use the model group the request asks for.
    ModelNotAllowed,
    /// The caller may not do what it asks (another tenant's request, an admin change without
    /// an admin token, money spent on a model with no price).
    PermissionDenied,
    /// The prompt and `max_tokens` do not fit the model's context window.
    ContextLengthExceeded,
    /// The tenant's credits cannot cover the request's worst case.
    InsufficientCredits,
    /// The tenant is over a requests- or tokens-per-minute quota.
    QuotaExceeded,
    /// The requested model group is not configured.
    ModelNotFound,
    /// No such route.
    RouteNotFound,
    /// The route exists but not for this method.
    MethodNotAllowed,
    /// The body exceeds the configured limit.
    PayloadTooLarge,
    /// The client paused longer than `[server] stall_timeout` while sending its body.
    ClientTimeout,
    /// The upstream did not connect, answer or continue a stream in time.
    UpstreamTimeout,
    /// The upstream could not be reached, or dropped the connection.
    UpstreamConnect,
    /// The upstream answered with a 5xx status.
    UpstreamServerError,
    /// The upstream answered 2xx but with a body sluice could not read.
    UpstreamProtocol,
    /// The upstream refused the request with its own 4xx; its status and body pass through.
    UpstreamRejected,
    /// The upstream's content filter refused the prompt (Azure OpenAI's `content_filter`);
    /// its status and body pass through. Not retried elsewhere: the filter is the
    /// operator's policy, which another deployment would not apply.
    ContentFiltered,
    /// Every upstream of the model group is failing and its circuit breaker is open.
    UpstreamUnavailable,
    /// sluice's own queue for this upstream is full, or the request waited as long as its
    /// lane allows; `retry_after` says when to come back.
    Overloaded,
    /// sluice is draining for shutdown and takes no new work.
    ShuttingDown,
    /// The request's own deadline (`x-sluice-timeout-ms`, or its route's default) ran out.
    DeadlineExceeded,
    /// The thing the request names (a request id given feedback, say) is not known.
    NotFound,
    /// Its caller withdrew the request before anything of it was sent (a batch item of a
    /// job cancelled while it waited for a slot).
    Withdrawn,
    /// The request conflicts with what was already done (feedback given twice).
    Conflict,
    /// A store sluice keeps its state in (the ledger's database) failed or did not answer in
    /// time; nothing was changed. `Retry-After` says when to try again.
    StoreUnavailable,
    /// A bug in sluice.
    Internal,
}

impl ErrorKind {
    /// HTTP status for this kind. [`ErrorKind::UpstreamRejected`] uses the upstream's own
    /// status instead; 400 is only its fallback.
    pub fn status(self) -> u16 {
        match self {
            Self::InvalidJson
            | Self::InvalidRequest
            | Self::ContextLengthExceeded
            | Self::UpstreamRejected
            | Self::ContentFiltered => 400,
            Self::Unauthorized => 401,
            Self::InsufficientCredits => 402,
            Self::QuotaExceeded => 429,
            Self::PermissionDenied | Self::ModelNotAllowed => 403,
            Self::ModelNotFound | Self::RouteNotFound | Self::NotFound => 404,
            Self::Conflict | Self::Withdrawn => 409,
            Self::MethodNotAllowed => 405,
            Self::PayloadTooLarge => 413,
            Self::ClientTimeout => 408,
            Self::UpstreamConnect | Self::UpstreamServerError | Self::UpstreamProtocol => 502,
            Self::ShuttingDown
            | Self::Overloaded
            | Self::UpstreamUnavailable
            | Self::StoreUnavailable => 503,
            Self::UpstreamTimeout | Self::DeadlineExceeded => 504,
            Self::Internal => 500,
        }
    }

    /// The OpenAI error `type` field.
    pub fn error_type(self) -> &'static str {
        match self {
            Self::InvalidJson
            | Self::InvalidRequest
            | Self::ContextLengthExceeded
            | Self::PayloadTooLarge
            | Self::ClientTimeout
            | Self::MethodNotAllowed
            | Self::UpstreamRejected
            | Self::ContentFiltered
            | Self::Conflict
            | Self::Withdrawn
            | Self::Unauthorized => "invalid_request_error",
            Self::PermissionDenied | Self::ModelNotAllowed => "permission_error",
            Self::InsufficientCredits => "insufficient_quota",
            Self::QuotaExceeded => "rate_limit_error",
            Self::ModelNotFound | Self::RouteNotFound | Self::NotFound => "not_found_error",
            Self::UpstreamTimeout
            | Self::UpstreamConnect
            | Self::UpstreamServerError
            | Self::UpstreamProtocol
            | Self::UpstreamUnavailable => "upstream_error",
            Self::DeadlineExceeded => "timeout_error",
            Self::ShuttingDown | Self::Overloaded => "overloaded_error",
            Self::Internal | Self::StoreUnavailable => "server_error",
        }
    }

    /// The OpenAI error `code` field; also the low-cardinality label in metrics.
    pub fn code(self) -> &'static str {
        match self {
            Self::InvalidJson => "invalid_json",
            Self::InvalidRequest => "invalid_request",
            Self::Unauthorized => "invalid_api_key",
            Self::InsufficientCredits => "insufficient_credits",
            Self::QuotaExceeded => "quota_exceeded",
            Self::ModelNotAllowed => "model_not_allowed",
            Self::PermissionDenied => "permission_denied",
            Self::ContextLengthExceeded => "context_length_exceeded",
            Self::ModelNotFound => "model_not_found",
            Self::RouteNotFound => "route_not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::PayloadTooLarge => "payload_too_large",
            Self::ClientTimeout => "request_timeout",
            Self::UpstreamTimeout => "upstream_timeout",
            Self::UpstreamConnect => "upstream_connect_error",
            Self::UpstreamServerError => "upstream_server_error",
            Self::UpstreamProtocol => "upstream_protocol_error",
            Self::UpstreamRejected => "upstream_rejected",
            Self::ContentFiltered => "content_filter",
            Self::UpstreamUnavailable => "upstream_unavailable",
            Self::Overloaded => "overloaded",
            Self::ShuttingDown => "shutting_down",
            Self::DeadlineExceeded => "deadline_exceeded",
            Self::NotFound => "not_found",
            Self::Conflict => "conflict",
            Self::Withdrawn => "withdrawn",
            Self::StoreUnavailable => "store_unavailable",
            Self::Internal => "internal_error",
        }
    }

    /// Whether another attempt (elsewhere, or later) could succeed.
    pub fn retryable(self) -> bool {
        matches!(
            self,
            Self::UpstreamTimeout
                | Self::UpstreamConnect
                | Self::UpstreamServerError
                | Self::UpstreamProtocol
        )
    }

    /// Whether the upstream, not the client or sluice, is at fault.
    pub fn is_upstream(self) -> bool {
        self.retryable()
            || matches!(
                self,
                Self::UpstreamRejected | Self::ContentFiltered | Self::UpstreamUnavailable
            )
    }

    /// Whether a failure of this kind counts against the upstream's health (a breaker's
    /// failure): it failed by itself, not because of quota or the client.
    pub fn is_upstream_fault(self) -> bool {
        self.retryable()
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// An upstream's own error answer, kept to pass through to the client unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamReply {
    /// The upstream's status.
    pub status: u16,
    /// The upstream's body, verbatim.
    pub body: Bytes,
    /// The upstream's `content-type`, if any.
    pub content_type: Option<String>,
    /// The upstream's `retry-after`, if any (429 and 503 carry it).
    pub retry_after: Option<String>,
}

impl UpstreamReply {
    /// How long the upstream asked us to wait: `retry-after` in delta-seconds (whole or
    /// fractional). An HTTP-date or a missing header gives `None`.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        crate::ratelimit::delta_seconds(self.retry_after.as_deref()?)
    }
}

/// A failed call: its kind, a message for humans, and the offending request field if any.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct GatewayError {
    /// The classification.
    pub kind: ErrorKind,
    /// What happened, in words a user can act on.
    pub message: Cow<'static, str>,
    /// The request field at fault (OpenAI's `param`).
    pub param: Option<Cow<'static, str>>,
    /// The upstream's own answer, for [`ErrorKind::UpstreamRejected`] (boxed: errors travel
    /// in `Result`s on the hot path and should stay small).
    pub upstream: Option<Box<UpstreamReply>>,
    /// When the client should come back (sent as `Retry-After`), for sluice's own refusals.
    pub retry_after: Option<std::time::Duration>,
    /// Further headers of sluice's own refusals (the IETF `RateLimit` fields of a quota);
    /// boxed, as errors should stay small.
    pub headers: Option<Box<Vec<(&'static str, String)>>>,
    /// The status an upstream answered a [`ErrorKind::UpstreamServerError`] with, when it
    /// answered one (a 5xx); what tells its overload (503, 504, 529) from its own fault.
    pub upstream_status: Option<u16>,
}

impl GatewayError {
    /// An error of `kind` with a message.
    pub fn new(kind: ErrorKind, message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            kind,
            message: message.into(),
            param: None,
            upstream: None,
            retry_after: None,
            headers: None,
            upstream_status: None,
        }
    }

    /// Notes the status the upstream answered with.
    pub fn with_upstream_status(mut self, status: u16) -> Self {
        self.upstream_status = Some(status);
        self
    }

    /// Whether the upstream said it is overloaded: a 429, a 503, 504 or 529, or no answer
    /// in time. An upstream's own fault (a 500, a reset, a broken answer) is not: it says
    /// nothing of how much it can take, and at a provider's usual rate of a few in a
    /// thousand it would cut a concurrency limit window after window.
    pub fn is_overload(&self) -> bool {
        self.is_rate_limited()
            || self.kind == ErrorKind::UpstreamTimeout
            || (self.kind == ErrorKind::UpstreamServerError
                && matches!(self.upstream_status, Some(503 | 504 | 529)))
    }

    /// Adds a header to the answer.
    pub fn with_header(mut self, name: &'static str, value: String) -> Self {
        self.headers
            .get_or_insert_with(Box::default)
            .push((name, value));
        self
    }

    /// Says when to come back.
    pub fn with_retry_after(mut self, d: std::time::Duration) -> Self {
        self.retry_after = Some(d);
        self
    }

    /// Whether this is an upstream's 429.
    pub fn is_rate_limited(&self) -> bool {
        self.kind == ErrorKind::UpstreamRejected
            && self.upstream.as_ref().is_some_and(|r| r.status == 429)
    }

    /// Names the request field at fault.
    pub fn with_param(mut self, param: impl Into<Cow<'static, str>>) -> Self {
        self.param = Some(param.into());
        self
    }

    /// An upstream's own 4xx, passed through.
    pub fn rejected(reply: UpstreamReply) -> Self {
        Self {
            kind: ErrorKind::UpstreamRejected,
            message: Cow::Owned(format!("upstream answered {}", reply.status)),
            param: None,
            upstream: Some(Box::new(reply)),
            retry_after: None,
            headers: None,
            upstream_status: None,
        }
    }

    /// The status to answer with: the upstream's own for a pass-through, else the kind's.
    pub fn status(&self) -> u16 {
        match &self.upstream {
            Some(reply)
                if matches!(
                    self.kind,
                    ErrorKind::UpstreamRejected | ErrorKind::ContentFiltered
                ) =>
            {
                reply.status
            }
            _ => self.kind.status(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_match_the_contract() {
        assert_eq!(ErrorKind::InvalidJson.status(), 400);
        assert_eq!(ErrorKind::ModelNotFound.status(), 404);
        assert_eq!(ErrorKind::PayloadTooLarge.status(), 413);
        assert_eq!(ErrorKind::UpstreamTimeout.status(), 504);
        assert_eq!(ErrorKind::UpstreamConnect.status(), 502);
        assert_eq!(ErrorKind::UpstreamServerError.status(), 502);
    }

    #[test]
    fn passthrough_keeps_the_upstream_status() {
        let e = GatewayError::rejected(UpstreamReply {
            status: 422,
            body: Bytes::from_static(b"{}"),
            content_type: None,
            retry_after: None,
        });
        assert_eq!(e.status(), 422);
        assert!(!e.kind.retryable());
        assert!(e.kind.is_upstream());
    }

    #[test]
    fn retry_after_reads_delta_seconds() {
        let reply = |v: Option<&str>| UpstreamReply {
            status: 429,
            body: Bytes::new(),
            content_type: None,
            retry_after: v.map(str::to_string),
        };
        assert_eq!(
            reply(Some("7")).retry_after(),
            Some(std::time::Duration::from_secs(7))
        );
        assert_eq!(
            reply(Some(" 0.5 ")).retry_after(),
            Some(std::time::Duration::from_millis(500))
        );
        assert_eq!(
            reply(Some("Wed, 21 Oct 2026 07:28:00 GMT")).retry_after(),
            None
        );
        assert_eq!(reply(Some("-1")).retry_after(), None);
        assert_eq!(reply(None).retry_after(), None);
    }

    #[test]
    fn only_upstream_failures_are_retryable() {
        assert!(ErrorKind::UpstreamTimeout.retryable());
        assert!(!ErrorKind::InvalidJson.retryable());
        assert!(!ErrorKind::ShuttingDown.retryable());
    }
}
