//! Sends a workload open-loop: each request leaves at its scheduled time in its own task, and
//! its latency counts from that time.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use parking_lot::Mutex;
use serde_json::json;
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep_until};

use super::record::{Answered, NO_ANSWER, Recorder};
use super::target::Target;
use super::workload::{Shape, Workload};

/// Counters a progress display can read while a run goes.
#[derive(Debug, Default)]
pub struct Progress {
    /// Requests sent so far.
    pub sent: AtomicU64,
    /// Requests finished so far.
    pub done: AtomicU64,
}

const RULES: &str = "Rule: flag any clause that renews automatically without notice. ";
const DOC: &str = "The supplier shall deliver the goods within thirty days of the order. ";

fn filler(pattern: &str, bytes: usize) -> String {
    pattern.chars().cycle().take(bytes).collect()
}

/// Request `i`'s user message: its `question`, else a document unique to it.
fn user_text(p: &Shape, i: usize, question: Option<&str>) -> String {
    if let Some(q) = question {
        return q.to_string();
    }
    let unique = (p.prompt_tokens.saturating_sub(p.shared_prefix_tokens) as usize * 4).max(16);
    let mut doc = format!("Document {i}: ");
    doc.push_str(&filler(DOC, unique.saturating_sub(doc.len())));
    doc
}

/// The JSON body of request `i`: a shared system prompt (identical across the traffic, so
/// provider prompt caches can hit) followed by its `question`, or else a document unique to
/// the request.
pub fn body(p: &Shape, i: usize, question: Option<&str>) -> Bytes {
    let shared = p.shared_prefix_tokens as usize * 4;
    let doc = user_text(p, i, question);
    let mut messages = Vec::with_capacity(2);
    if shared > 0 {
        messages.push(json!({"role": "system", "content": filler(RULES, shared)}));
    }
    messages.push(json!({"role": "user", "content": doc}));
    let mut v = json!({"model": p.model, "messages": messages, "stream": p.stream});
    if let (Some(m), Some(obj)) = (p.max_tokens, v.as_object_mut()) {
        obj.insert("max_tokens".into(), json!(m));
    }
    Bytes::from(v.to_string())
}

/// Request `i`'s body in the API `uri` serves: Anthropic Messages at `/v1/messages` (the
/// shared prompt as `system`, `max_tokens` as Messages requires it, 256 when the shape sets
/// none), else chat completions.
pub fn body_at(uri: &http::Uri, p: &Shape, i: usize, question: Option<&str>) -> Bytes {
    if !uri.path().ends_with("/v1/messages") {
        return body(p, i, question);
    }
    let shared = p.shared_prefix_tokens as usize * 4;
    let doc = user_text(p, i, question);
    let mut v = json!({"model": p.model, "max_tokens": p.max_tokens.unwrap_or(256),
        "messages": [{"role": "user", "content": doc}], "stream": p.stream});
    if shared > 0
        && let Some(obj) = v.as_object_mut()
    {
        obj.insert("system".into(), json!(filler(RULES, shared)));
    }
    Bytes::from(v.to_string())
}

fn request(
    uri: &http::Uri,
    p: &Shape,
    question: Option<&str>,
    i: usize,
    run_id: &str,
    headers: &[(http::HeaderName, http::HeaderValue)],
) -> http::Request<Full<Bytes>> {
    let mut b = http::Request::post(uri.clone())
        .header("content-type", "application/json")
        .header("x-request-id", format!("{run_id}-{i}"))
        .header("x-sluice-lane", &p.lane);
    if let Some(t) = &p.tenant {
        b = b.header("x-sluice-tenant", t);
    }
    if let Some(t) = p.timeout {
        b = b.header(sluice_providers::TIMEOUT_HEADER, t.as_millis().to_string());
    }
    if let Some(task) = p.task(i) {
        b = b.header("x-sluice-task", task);
    }
    let mut req = b
        .body(Full::new(body_at(uri, p, i, question)))
        .unwrap_or_default();
    // The run's own headers win over the shape's (`--header x-sluice-lane: batch`).
    for (name, value) in headers {
        req.headers_mut().insert(name.clone(), value.clone());
    }
    req
}

/// `/v1/feedback` on the same host as `uri`.
fn feedback_uri(uri: &http::Uri) -> http::Uri {
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(http::uri::PathAndQuery::from_static("/v1/feedback"));
    http::Uri::from_parts(parts).unwrap_or_else(|_| uri.clone())
}

/// The judge's verdict on request `id`, as its client would send it.
fn feedback_request(
    uri: &http::Uri,
    p: &Shape,
    id: &str,
    good: bool,
    headers: &[(http::HeaderName, http::HeaderValue)],
) -> http::Request<Full<Bytes>> {
    let body = json!({"request_id": id, "score": if good { 1.0 } else { 0.0 }});
    let mut b = http::Request::post(uri.clone()).header("content-type", "application/json");
    if let Some(t) = &p.tenant {
        b = b.header("x-sluice-tenant", t);
    }
    let mut req = b
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap_or_default();
    for (name, value) in headers {
        req.headers_mut().insert(name.clone(), value.clone());
    }
    req
}

/// How long a run took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ran {
    /// From the first request's scheduled time to the last answer.
    pub took: Duration,
    /// From the first request sent to the last (what an achieved rate divides by).
    pub sending: Duration,
}

/// Sends `workload` to `target` at `uri`; returns how long the run took.
pub async fn drive<T: Target>(
    target: T,
    uri: http::Uri,
    workload: &Workload,
    run_id: &str,
    recorder: Arc<Mutex<Recorder>>,
    progress: Arc<Progress>,
) -> Ran {
    let start = Instant::now();
    let mut first_sent = None;
    let mut last_sent = start;
    let mut tasks = JoinSet::new();
    for (i, p) in workload.requests.iter().enumerate() {
        let scheduled = start + p.at;
        sleep_until(scheduled).await;
        let sent = Instant::now();
        first_sent.get_or_insert(sent);
        last_sent = sent;
        let req = request(
            &uri,
            &p.shape,
            p.question.as_deref(),
            i,
            run_id,
            &workload.headers,
        );
        let shape = p.shape.clone();
        let (target, recorder, progress) = (target.clone(), recorder.clone(), progress.clone());
        let judged = workload
            .judge
            .clone()
            .zip(shape.task(i).map(str::to_string));
        let feedback = judged.as_ref().map(|_| {
            let id = format!("{run_id}-{i}");
            (feedback_uri(&uri), id, workload.headers.clone())
        });
        progress.sent.fetch_add(1, Ordering::Relaxed);
        tasks.spawn(async move {
            let answered = exchange(&target, req, shape.stream, scheduled).await;
            if let (Some((judge, task)), Some((to, id, headers)), Some(up), true) =
                (judged, feedback, answered.upstream.as_deref(), answered.ok)
            {
                // A 404 (an answer no router chose) is expected; the verdict is kept anyway.
                if let Some(good) = judge.judge(i, &id, &task, up) {
                    let req = feedback_request(&to, &shape, &id, good, &headers);
                    let _ = target.send(req).await;
                }
            }
            recorder.lock().record_answer(&shape.lane, &answered);
            progress.done.fetch_add(1, Ordering::Relaxed);
        });
        // Reap finished tasks as we go so the set stays small on long runs.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    Ran {
        took: Instant::now().saturating_duration_since(start),
        sending: last_sent.saturating_duration_since(first_sent.unwrap_or(start)),
    }
}

/// Sends one request and reads the whole answer.
async fn exchange<T: Target>(
    target: &T,
    req: http::Request<Full<Bytes>>,
    stream: bool,
    scheduled: Instant,
) -> Answered {
    let since = |t: Instant| t.saturating_duration_since(scheduled);
    let resp = match target.send(req).await {
        Ok(r) => r,
        Err(_) => {
            return Answered {
                status: NO_ANSWER,
                total: since(Instant::now()),
                ..Answered::default()
            };
        }
    };
    let status = resp.status().as_u16();
    let cache_hit = resp
        .headers()
        .get("x-sluice-cache")
        .is_some_and(|v| v == "hit" || v == "coalesced");
    let upstream = resp
        .headers()
        .get("x-sluice-upstream")
        .and_then(|v| v.to_str().ok())
        .filter(|v| *v != "none")
        .map(str::to_string);
    let mut body = resp.into_body();
    let mut ttfb = None;
    // The end of a stream: enough to hold an error event's JSON.
    let mut tail: Vec<u8> = Vec::new();
    let mut broken = false;
    loop {
        match body.frame().await {
            None => break,
            Some(Err(_)) => {
                broken = true;
                break;
            }
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    if ttfb.is_none() && !data.is_empty() {
                        ttfb = Some(since(Instant::now()));
                    }
                    if stream {
                        tail.extend_from_slice(data);
                        let keep = tail.len().saturating_sub(TAIL);
                        tail.drain(..keep);
                    }
                }
            }
        }
    }
    let total = since(Instant::now());
    let success = (200..300).contains(&status);
    // A stream is whole only if it ended with [DONE]; an error event means it failed.
    let clean = !broken && (!stream || find(&tail, b"data: [DONE]"));
    let stream_failure = (success && !clean).then(|| why_cut(&tail, broken));
    Answered {
        status,
        ok: success && clean,
        ttfb,
        total,
        cache_hit,
        stream_failure,
        upstream,
    }
}

/// Bytes of a stream's end kept to explain how it ended.
const TAIL: usize = 1024;

/// Why a stream that began well did not end with `[DONE]`: its last error event's code, or
/// what else happened.
fn why_cut(tail: &[u8], broken: bool) -> String {
    let text = String::from_utf8_lossy(tail);
    let code = text
        .rsplit("data: ")
        .filter_map(|event| serde_json::from_str::<serde_json::Value>(event.trim()).ok())
        .find_map(|v| v["error"]["code"].as_str().map(str::to_string));
    match (code, broken) {
        (Some(code), _) => code,
        (None, true) => "connection broke".to_string(),
        (None, false) => "no [DONE]".to_string(),
    }
}

fn find(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_messages_endpoint_gets_a_messages_body() {
        let p = Shape {
            lane: "l".into(),
            tenant: None,
            model: "m".into(),
            prompt_tokens: 100,
            shared_prefix_tokens: 20,
            stream: false,
            max_tokens: None,
            timeout: None,
            tasks: Vec::new(),
        };
        let at = |path: &str| {
            let uri: http::Uri = format!("http://h{path}").parse().unwrap();
            serde_json::from_slice::<serde_json::Value>(&body_at(&uri, &p, 3, None)).unwrap()
        };
        let m = at("/v1/messages");
        assert_eq!(m["max_tokens"], 256);
        assert_eq!(m["system"].as_str().unwrap().len(), 80);
        assert_eq!(m["messages"][0]["role"], "user");
        let c = at("/v1/chat/completions");
        assert_eq!(c["messages"][0]["role"], "system");
        assert!(c.get("max_tokens").is_none());
    }

    #[test]
    fn a_cut_stream_is_explained_by_its_error_event() {
        let tail = b"data: {\"choices\":[]}\n\ndata: {\"error\":{\"message\":\"x\",\"code\":\"deadline_exceeded\"}}\n\n";
        assert_eq!(why_cut(tail, false), "deadline_exceeded");
        assert_eq!(why_cut(b"data: {\"choices\":[]}\n\n", false), "no [DONE]");
        assert_eq!(why_cut(b"", true), "connection broke");
    }
}
