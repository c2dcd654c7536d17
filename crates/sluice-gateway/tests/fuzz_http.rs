//! Hostile requests through the whole router in-process: every public and admin route,
//! bodies, queries, paths and headers mutated from the corpus in `sluice-fuzz/corpus/http`.
//! Whatever comes in, sluice answers with a status that is not its own failure (500), and
//! every refusal is JSON in the shape of the API the route speaks.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "scripted/mod.rs"]
mod scripted;

#[global_allocator]
static ALLOCATOR: sluice_fuzz::Counting = sluice_fuzz::Counting;

use axum::body::Body;
use http_body_util::BodyExt;
use serde_json::Value;
use sluice_fuzz::{Bound, Target};
use tower::ServiceExt;

use crate::scripted::{PRICE, rig};

const ADMIN: &str = "admin-token-for-fuzzing";

const WORDS: &[&[u8]] = &[
    b"/v1/chat/completions",
    b"/v1/messages",
    b"/v1beta/models/m:generateContent",
    b"/v1beta/models/m:streamGenerateContent",
    b":countTokens",
    b"x-goog-api-key: ",
    b"contents",
    b"parts",
    b"/admin/keys/",
    b"/admin/tenants/",
    b"?",
    b"&",
    b"=",
    b"%",
    b"%ff",
    b"%00",
    b"..",
    b"//",
    b"x-sluice-tenant: ",
    b"x-sluice-lane: ",
    b"x-sluice-timeout-ms: ",
    b"x-request-id: ",
    b"authorization: Bearer ",
    b"content-type: ",
    b"traceparent: 00-",
    b"\n",
    b"model",
    b"messages",
    b"stream",
    b"tenant",
    b"limit",
    b"window",
    b"credits_micros",
    b"limits",
    b"models",
    b"lane",
    b"name",
    b"after",
];

/// A request written as `METHOD PATH`, header lines, a blank line and the body; `None`
/// when its head is not one a client could send.
fn request(input: &[u8]) -> Option<http::Request<Body>> {
    let split = input.windows(2).position(|w| w == b"\n\n")?;
    let (head, body) = (&input[..split], &input[split + 2..]);
    let mut lines = head.split(|b| *b == b'\n');
    let first = std::str::from_utf8(lines.next()?).ok()?;
    let (method, path) = first.split_once(' ')?;
    let mut req = http::Request::builder()
        .method(http::Method::from_bytes(method.as_bytes()).ok()?)
        .uri(http::Uri::try_from(path).ok()?)
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {ADMIN}"));
    for line in lines {
        let colon = line.iter().position(|b| *b == b':')?;
        let name = http::HeaderName::from_bytes(&line[..colon]).ok()?;
        let value = http::HeaderValue::from_bytes(line[colon + 1..].trim_ascii()).ok()?;
        req = req.header(name, value);
    }
    req.body(Body::from(body.to_vec())).ok()
}

/// Whether `body` is a refusal in the shape of the API at `path` (Anthropic's for the
/// Messages routes, Google's for Gemini's, OpenAI's for the rest, unknown routes included).
fn shaped(path: &str, body: &Value) -> bool {
    let text = |v: &Value| v.as_str().is_some_and(|s| !s.trim().is_empty());
    let gemini =
        path.starts_with("/v1beta/") || (path.starts_with("/v1/models/") && path.contains(':'));
    if gemini {
        body["error"]["code"].is_u64()
            && text(&body["error"]["status"])
            && text(&body["error"]["message"])
    } else if path == "/v1/messages" || path == "/v1/messages/count_tokens" {
        body["type"] == "error" && text(&body["error"]["type"]) && text(&body["error"]["message"])
    } else {
        text(&body["error"]["message"]) && text(&body["error"]["type"])
    }
}

/// The inputs a run makes.
fn target_cases() -> usize {
    std::env::var("SLUICE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

#[test]
fn every_route_answers_hostile_requests_in_its_own_shape() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let r = runtime.block_on(async { rig(false, |b| b.admin_token(ADMIN).price("m", PRICE)) });
    let target = Target {
        name: "http",
        words: WORDS,
        json: true,
        memory: Bound {
            fixed: 64 << 20,
            per_byte: 256,
        },
    };
    let sent = std::sync::atomic::AtomicUsize::new(0);
    let found = sluice_fuzz::run(&target, |input| {
        let Some(req) = request(input) else {
            return Ok(());
        };
        sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = req.uri().path().to_string();
        let (status, body) = runtime.block_on(async {
            let resp = r.router.clone().oneshot(req).await.unwrap();
            let status = resp.status().as_u16();
            let body = resp.into_body().collect().await.map(|b| b.to_bytes());
            (status, body)
        });
        let body = body.map_err(|e| format!("{path}: the body broke off: {e}"))?;
        if status == 500 {
            return Err(format!("{path}: 500: {}", String::from_utf8_lossy(&body)));
        }
        if String::from_utf8_lossy(&body).contains(ADMIN) {
            return Err(format!("{path}: the admin token was echoed"));
        }
        if status >= 400 {
            let v: Value = serde_json::from_slice(&body).map_err(|_| {
                format!(
                    "{path}: {status} not JSON: {}",
                    String::from_utf8_lossy(&body)
                )
            })?;
            if !shaped(&path, &v) {
                return Err(format!(
                    "{path}: {status} not in its API's error shape: {v}"
                ));
            }
        }
        Ok(())
    });
    let sent = sent.into_inner();
    match found {
        Err(found) => panic!("{found}"),
        Ok(report) => eprintln!(
            "http: {} inputs, {sent} of them requests a client could send",
            report.cases
        ),
    }
    // Most inputs must reach sluice, or the target tests little.
    assert!(sent * 2 > target_cases(), "only {sent} requests were sent");
}
