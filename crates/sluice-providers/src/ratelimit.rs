//! Reads what an answer's headers say of the upstream's rate limits, in either dialect:
//! OpenAI's `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` (resets as Go durations,
//! `"6m0s"`, or Azure's whole seconds) and Anthropic's
//! `anthropic-ratelimit-{requests,tokens,input-tokens}-{limit,remaining,reset}` (resets as
//! RFC 3339 instants), plus `retry-after`.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderName};
use parking_lot::Mutex;
use sluice_core::ratelimit::{LONGEST_WAIT_SECS, delta_seconds};
use sluice_core::{Quota, RateLimits};

/// Where a provider leaves what an answer said of its rate limits, whatever the outcome of
/// the call (a 200, a 429, a 5xx), for the gateway to read once the call is over.
#[derive(Clone, Debug, Default)]
pub struct RateReport(Arc<Mutex<Option<RateLimits>>>);

impl RateReport {
    /// Keeps `limits` (a report that says nothing is not kept).
    pub fn set(&self, limits: RateLimits) {
        if !limits.is_empty() {
            *self.0.lock() = Some(limits);
        }
    }

    /// What was reported, if anything.
    pub fn take(&self) -> Option<RateLimits> {
        self.0.lock().take()
    }
}

/// The three headers of one dimension: limit, remaining, reset. Names built at compile
/// time: a lookup by `&str` would parse and check the name on every answer.
type Names = [HeaderName; 3];

const fn names(limit: &'static str, remaining: &'static str, reset: &'static str) -> Names {
    [
        HeaderName::from_static(limit),
        HeaderName::from_static(remaining),
        HeaderName::from_static(reset),
    ]
}

const RETRY_AFTER: HeaderName = http::header::RETRY_AFTER;

const OPENAI_REQUESTS: Names = names(
    "x-ratelimit-limit-requests",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-requests",
);
const OPENAI_TOKENS: Names = names(
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
);
const ANTHROPIC_REQUESTS: Names = names(
    "anthropic-ratelimit-requests-limit",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-requests-reset",
);
const ANTHROPIC_TOKENS: Names = names(
    "anthropic-ratelimit-tokens-limit",
    "anthropic-ratelimit-tokens-remaining",
    "anthropic-ratelimit-tokens-reset",
);
const ANTHROPIC_INPUT_TOKENS: Names = names(
    "anthropic-ratelimit-input-tokens-limit",
    "anthropic-ratelimit-input-tokens-remaining",
    "anthropic-ratelimit-input-tokens-reset",
);

/// The rate-limit report in `headers`, read at wall-clock `now` (Anthropic's resets are
/// instants). Runs on every answer, so the header names are built at compile time (nothing
/// is formatted or parsed), and a dimension is looked at only if its limit header is there.
pub fn parse(headers: &HeaderMap, now: SystemTime) -> RateLimits {
    let get = |name: &HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let number = |name: &HeaderName| get(name)?.trim().parse::<u64>().ok();
    let quota = |[limit, remaining, reset]: Names,
                 read_reset: &dyn Fn(&str) -> Option<Duration>| {
        Some(Quota {
            limit: number(&limit)?,
            remaining: number(&remaining)?,
            reset: read_reset(get(&reset)?)?,
        })
    };
    let instant = |text: &str| {
        let at = humantime::parse_rfc3339_weak(text.trim()).ok()?;
        Some(at.duration_since(now).unwrap_or(Duration::ZERO))
    };
    let openai = |names| quota(names, &delay);
    let anthropic = |names| quota(names, &instant);
    RateLimits {
        requests: openai(OPENAI_REQUESTS).or_else(|| anthropic(ANTHROPIC_REQUESTS)),
        tokens: openai(OPENAI_TOKENS)
            .or_else(|| anthropic(ANTHROPIC_TOKENS))
            .or_else(|| anthropic(ANTHROPIC_INPUT_TOKENS)),
        retry_after: get(&RETRY_AFTER).and_then(delta_seconds),
    }
}

/// A reset: whole or fractional seconds, or a Go duration such as `1s`, `250ms`, `6m0s`,
/// `2m59.56s`, `1h0m0s`.
fn delay(text: &str) -> Option<Duration> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if let Some(d) = delta_seconds(text) {
        return Some(d);
    }
    let mut total = 0.0;
    let mut rest = text;
    while !rest.is_empty() {
        let split = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter(|i| *i > 0)?;
        let (number, tail) = rest.split_at(split);
        let value: f64 = number.parse().ok()?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_len);
        let scale = match unit {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        total += value * scale;
        rest = next;
    }
    (total.is_finite() && total >= 0.0)
        .then(|| Duration::from_secs_f64(total.min(LONGEST_WAIT_SECS)))
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn go_durations_and_seconds() {
        assert_eq!(delay("1s"), Some(Duration::from_secs(1)));
        assert_eq!(delay("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(delay("6m0s"), Some(Duration::from_secs(360)));
        assert_eq!(delay("2m59.56s"), Some(Duration::from_millis(179_560)));
        assert_eq!(delay("1h0m0s"), Some(Duration::from_secs(3600)));
        assert_eq!(delay("17"), Some(Duration::from_secs(17)));
        assert_eq!(delay("0.5"), Some(Duration::from_millis(500)));
        for bad in ["", "s", "1x", "-1s", "1s2", "m1"] {
            assert_eq!(delay(bad), None, "{bad}");
        }
        // Past a day, a day: no header can ask for a wait a Duration cannot hold.
        for huge in [
            "1e300",
            "99999999999999999999h",
            "9999999999999999999999999s",
        ] {
            assert_eq!(delay(huge), Some(Duration::from_secs(86_400)), "{huge}");
        }
        assert_eq!(delta_seconds("1e300"), Some(Duration::from_secs(86_400)));
    }

    #[test]
    fn openai_headers() {
        let h = headers(&[
            ("x-ratelimit-limit-requests", "60"),
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-limit-tokens", "150000"),
            ("x-ratelimit-remaining-tokens", "149000"),
            ("x-ratelimit-reset-tokens", "400ms"),
            ("retry-after", "2"),
        ]);
        let r = parse(&h, SystemTime::now());
        assert_eq!(
            r.requests,
            Some(Quota {
                limit: 60,
                remaining: 0,
                reset: Duration::from_secs(1)
            })
        );
        assert_eq!(r.tokens.unwrap().remaining, 149_000);
        assert_eq!(r.tokens.unwrap().reset, Duration::from_millis(400));
        assert_eq!(r.retry_after, Some(Duration::from_secs(2)));
    }

    #[test]
    fn anthropic_headers_with_instants() {
        let now = humantime::parse_rfc3339("2026-11-30T12:00:00Z").unwrap();
        let h = headers(&[
            ("anthropic-ratelimit-requests-limit", "50"),
            ("anthropic-ratelimit-requests-remaining", "49"),
            ("anthropic-ratelimit-requests-reset", "2026-11-30T12:00:02Z"),
            ("anthropic-ratelimit-input-tokens-limit", "30000"),
            ("anthropic-ratelimit-input-tokens-remaining", "12000"),
            (
                "anthropic-ratelimit-input-tokens-reset",
                "2026-11-30T12:00:30Z",
            ),
        ]);
        let r = parse(&h, now);
        assert_eq!(r.requests.unwrap().reset, Duration::from_secs(2));
        assert_eq!(r.requests.unwrap().remaining, 49);
        assert_eq!(r.tokens.unwrap().limit, 30_000);
        assert_eq!(r.tokens.unwrap().reset, Duration::from_secs(30));
        assert_eq!(r.retry_after, None);
    }

    #[test]
    fn partial_or_garbled_headers_report_nothing_for_that_dimension() {
        let h = headers(&[
            ("x-ratelimit-limit-requests", "60"),
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-limit-tokens", "lots"),
            ("x-ratelimit-remaining-tokens", "1"),
            ("x-ratelimit-reset-tokens", "1s"),
        ]);
        let r = parse(&h, SystemTime::now());
        assert!(r.is_empty(), "{r:?}");
        let report = RateReport::default();
        report.set(r);
        assert_eq!(report.take(), None);
    }
}
