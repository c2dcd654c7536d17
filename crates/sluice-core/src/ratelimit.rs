//! What an upstream says of its rate limits, whatever its header dialect: per dimension
//! (requests, tokens) the limit, what is left and when it is whole again.

use std::time::Duration;

/// The longest wait an upstream's header is taken to ask for: a day (a larger one is a day).
pub const LONGEST_WAIT_SECS: f64 = 86_400.0;

/// `retry-after` as delta-seconds (whole or fractional), at most [`LONGEST_WAIT_SECS`]; an
/// HTTP-date, a negative or a non-finite number gives `None`.
pub fn delta_seconds(text: &str) -> Option<Duration> {
    let secs: f64 = text.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(LONGEST_WAIT_SECS)))
}

/// One dimension of a rate limit, as of the answer that reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quota {
    /// Units allowed per minute.
    pub limit: u64,
    /// Units left.
    pub remaining: u64,
    /// Until the quota is whole again.
    pub reset: Duration,
}

/// An answer's rate-limit report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateLimits {
    /// Requests per minute.
    pub requests: Option<Quota>,
    /// Tokens per minute (the most restrictive token limit, when there are several).
    pub tokens: Option<Quota>,
    /// How long the upstream asked us to wait (a 429's or 503's `retry-after`).
    pub retry_after: Option<Duration>,
}

impl RateLimits {
    /// Whether the report says anything.
    pub fn is_empty(&self) -> bool {
        self.requests.is_none() && self.tokens.is_none() && self.retry_after.is_none()
    }
}
