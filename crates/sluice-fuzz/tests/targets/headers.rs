//! Headers a client or an upstream sends: `x-sluice-*`, `x-request-id`, `traceparent`,
//! keys, `retry-after` and rate-limit headers.

use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderName, HeaderValue};
use sluice_core::UpstreamReply;
use sluice_fuzz::{Bound, Target};
use sluice_gateway::walk::{auth, ingress};

use crate::{fuzz, refused_as_client};

const WORDS: &[&[u8]] = &[
    b"\n",
    b": ",
    b"x-sluice-tenant",
    b"x-sluice-lane",
    b"x-sluice-timeout-ms",
    b"x-request-id",
    b"traceparent",
    b"tracestate",
    b"authorization",
    b"Bearer ",
    b"x-api-key",
    b"retry-after",
    b"retry-after-ms",
    b"x-ratelimit-reset-requests",
    b"x-ratelimit-remaining-tokens",
    b"anthropic-ratelimit-tokens-reset",
    b"00-",
    b"-01",
    b"ffffffffffffffffffffffffffffffff",
    b"0000000000000000",
    b"1e308",
    b"NaN",
    b"-1",
    b"18446744073709551616",
    b"1h2m3.5s",
    b"2026-12-06T23:30:00Z",
    b"\xc3\xa9",
    b"\x7f",
];

/// `name: value` lines as a header map (lines that are no header are skipped).
fn headers(input: &[u8]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for line in input.split(|b| *b == b'\n') {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            continue;
        };
        let value = line[colon + 1..].trim_ascii();
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(&line[..colon]),
            HeaderValue::from_bytes(value),
        ) {
            map.append(n, v);
        }
    }
    map
}

#[test]
fn request_and_upstream_headers() {
    let target = Target {
        name: "headers",
        words: WORDS,
        json: false,
        memory: Bound::PARSER,
    };
    fuzz(target, |input| {
        let h = headers(input);
        let id = ingress::request_id(&h);
        let echoed = id.as_str();
        if echoed.is_empty() || echoed.len() > 128 || !echoed.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(format!("an x-request-id echoed unchecked: {echoed:?}"));
        }
        for e in [ingress::tenant(&h).err(), ingress::timeout(&h).err()]
            .into_iter()
            .flatten()
        {
            refused_as_client(&e)?;
            if e.param.is_none() {
                return Err(format!("a bad header refused without naming it: {e}"));
            }
        }
        let _ = auth::presented_key(&h);
        let _ = auth::bearer(&h);
        let limits = sluice_providers::ratelimit::parse(&h, SystemTime::now());
        if limits
            .retry_after
            .is_some_and(|d| d > Duration::from_secs(86_400 * 366))
        {
            return Err(format!(
                "a retry-after past a year taken as it came: {limits:?}"
            ));
        }
        let tp = h.get("traceparent").map(HeaderValue::as_bytes);
        let ts = h.get("tracestate").map(HeaderValue::as_bytes);
        if let Some(tp) = tp {
            let _ = sluice_trace::w3c::parse(tp, ts);
        }
        let reply = UpstreamReply {
            status: 429,
            body: bytes::Bytes::new(),
            content_type: None,
            retry_after: h
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
        };
        if reply
            .retry_after()
            .is_some_and(|d| d > Duration::from_secs(86_400))
        {
            return Err("a retry-after past a day taken as it came".into());
        }
        Ok(())
    })
}
