//! A client that retries as the official OpenAI and Anthropic SDKs do by default: two
//! retries of a connection error, a 408, 409, 429 or 5xx, after `retry-after-ms` or
//! `retry-after` when the answer gives one within a minute, else after 0.5 s doubling up to
//! 8 s, less up to a quarter (drawn from the request's id, so a run
//! repeats). What a plain proxy's clients really run, so that a
//! column without sluice's policies is compared with what a team has without a gateway.

use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use http_body_util::Full;

use super::Target;

/// The SDKs' default number of retries.
pub const SDK_RETRIES: u32 = 2;
const INITIAL: f64 = 0.5;
const MOST: f64 = 8.0;
/// A `retry-after` longer than this is not honoured (the SDKs fall back to their backoff).
const HONOURED: f64 = 60.0;

/// `T`, its requests retried `retries` times as the SDKs retry them (0: sent once).
#[derive(Clone, Debug)]
pub struct Retrying<T> {
    inner: T,
    retries: u32,
}

impl<T: Target> Retrying<T> {
    /// `inner`, retried `retries` times.
    pub fn new(inner: T, retries: u32) -> Self {
        Self { inner, retries }
    }
}

/// Whether the SDKs retry an answer of `status` (an `x-should-retry` header decides first).
fn retried(resp: &http::Response<Body>) -> bool {
    match resp
        .headers()
        .get("x-should-retry")
        .and_then(|v| v.to_str().ok())
    {
        Some("true") => return true,
        Some("false") => return false,
        _ => {}
    }
    let s = resp.status().as_u16();
    matches!(s, 408 | 409 | 429) || s >= 500
}

/// How long the SDKs wait before retry number `taken + 1`, given the answer's headers.
fn wait(headers: Option<&http::HeaderMap>, taken: u32, jitter: f64) -> Duration {
    let read = |name: &str| {
        headers?
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
    };
    let asked = read("retry-after-ms")
        .map(|ms| ms / 1000.0)
        .or_else(|| read("retry-after"));
    if let Some(s) = asked.filter(|s| *s > 0.0 && *s <= HONOURED) {
        return Duration::from_secs_f64(s);
    }
    let backoff = (INITIAL * 2f64.powi(taken as i32)).min(MOST);
    Duration::from_secs_f64(backoff * (1.0 - 0.25 * jitter))
}

/// `req` again, as the retry number `n` (its own request id, as an SDK's new request gets
/// its own from the gateway).
fn again(parts: &http::request::Parts, body: &Full<Bytes>, n: u32) -> http::Request<Full<Bytes>> {
    let mut req = http::Request::new(body.clone());
    *req.method_mut() = parts.method.clone();
    *req.uri_mut() = parts.uri.clone();
    *req.headers_mut() = parts.headers.clone();
    if n > 0
        && let Some(id) = parts
            .headers
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
        && let Ok(v) = http::HeaderValue::from_str(&format!("{id}-retry{n}"))
    {
        req.headers_mut().insert("x-request-id", v);
    }
    req
}

/// The random part of the backoff, drawn from the request's id and the retry with a hash
/// fixed in this project (not the standard library's, which may change between releases),
/// so a run repeats on every toolchain.
fn jitter(parts: &http::request::Parts, taken: u32) -> f64 {
    let id = parts
        .headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let h = sluice_routing::ticket_hash(0x6a69_7474_6572, u64::from(taken), id);
    (h >> 11) as f64 / (1u64 << 53) as f64
}

impl<T: Target> Target for Retrying<T> {
    fn send(
        &self,
        req: http::Request<Full<Bytes>>,
    ) -> BoxFuture<'static, Result<http::Response<Body>, String>> {
        let (inner, retries) = (self.inner.clone(), self.retries);
        if retries == 0 {
            return inner.send(req);
        }
        let (parts, body) = req.into_parts();
        async move {
            let mut taken = 0;
            loop {
                let got = inner.send(again(&parts, &body, taken)).await;
                let headers = match &got {
                    Ok(resp) if !retried(resp) => return got,
                    Ok(resp) => Some(resp.headers().clone()),
                    Err(_) => None,
                };
                if taken == retries {
                    return got;
                }
                // The answer not kept is dropped here, closing its body.
                drop(got);
                let jitter = jitter(&parts, taken);
                tokio::time::sleep(wait(headers.as_ref(), taken, jitter)).await;
                taken += 1;
            }
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_honours_retry_after_within_a_minute_else_backs_off() {
        let mut h = http::HeaderMap::new();
        h.insert("retry-after", http::HeaderValue::from_static("3"));
        assert_eq!(wait(Some(&h), 0, 0.0), Duration::from_secs(3));
        h.insert("retry-after-ms", http::HeaderValue::from_static("250"));
        assert_eq!(wait(Some(&h), 0, 0.0), Duration::from_millis(250));
        let mut long = http::HeaderMap::new();
        long.insert("retry-after", http::HeaderValue::from_static("120"));
        assert_eq!(wait(Some(&long), 0, 0.0), Duration::from_millis(500));
        assert_eq!(wait(None, 1, 0.0), Duration::from_secs(1));
        assert_eq!(wait(None, 5, 0.0), Duration::from_secs(8));
        assert_eq!(wait(None, 0, 1.0), Duration::from_millis(375));
    }

    #[test]
    fn the_sdks_statuses_are_retried() {
        let with = |s: u16, should: Option<&'static str>| {
            let mut r = http::Response::builder().status(s);
            if let Some(v) = should {
                r = r.header("x-should-retry", v);
            }
            retried(&r.body(Body::empty()).unwrap_or_default())
        };
        for s in [408, 409, 429, 500, 502, 503, 529] {
            assert!(with(s, None), "{s}");
        }
        for s in [200, 400, 401, 404, 413] {
            assert!(!with(s, None), "{s}");
        }
        assert!(!with(429, Some("false")));
        assert!(with(400, Some("true")));
    }
}
