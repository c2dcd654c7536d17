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

use super::record::{NO_ANSWER, Recorder};
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

/// The JSON body of request `i`: a shared system prompt (identical across the traffic, so
/// provider prompt caches can hit) followed by a document unique to the request.
pub fn body(p: &Shape, i: usize) -> Bytes {
    let shared = p.shared_prefix_tokens as usize * 4;
    let unique = (p.prompt_tokens.saturating_sub(p.shared_prefix_tokens) as usize * 4).max(16);
    let mut doc = format!("Document {i}: ");
    doc.push_str(&filler(DOC, unique.saturating_sub(doc.len())));
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

fn request(uri: &http::Uri, p: &Shape, i: usize, run_id: &str) -> http::Request<Full<Bytes>> {
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
    b.body(Full::new(body(p, i))).unwrap_or_default()
}

/// Sends `workload` to `target` at `uri`; returns how long the run took.
pub async fn drive<T: Target>(
    target: T,
    uri: http::Uri,
    workload: &Workload,
    run_id: &str,
    recorder: Arc<Mutex<Recorder>>,
    progress: Arc<Progress>,
) -> Duration {
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for (i, p) in workload.requests.iter().enumerate() {
        let scheduled = start + p.at;
        sleep_until(scheduled).await;
        let req = request(&uri, &p.shape, i, run_id);
        let shape = p.shape.clone();
        let (target, recorder, progress) = (target.clone(), recorder.clone(), progress.clone());
        progress.sent.fetch_add(1, Ordering::Relaxed);
        tasks.spawn(async move {
            let (status, ok, ttfb) = exchange(&target, req, shape.stream, scheduled).await;
            let total = Instant::now().saturating_duration_since(scheduled);
            recorder.lock().record(&shape.lane, status, ok, ttfb, total);
            progress.done.fetch_add(1, Ordering::Relaxed);
        });
        // Reap finished tasks as we go so the set stays small on long runs.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    Instant::now().saturating_duration_since(start)
}

/// Sends one request and reads the whole answer: (status, clean success, time to first byte).
async fn exchange<T: Target>(
    target: &T,
    req: http::Request<Full<Bytes>>,
    stream: bool,
    scheduled: Instant,
) -> (u16, bool, Option<Duration>) {
    let resp = match target.send(req).await {
        Ok(r) => r,
        Err(_) => return (NO_ANSWER, false, None),
    };
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let mut ttfb = None;
    let mut tail: Vec<u8> = Vec::new();
    loop {
        match body.frame().await {
            None => break,
            Some(Err(_)) => return (status, false, ttfb),
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    if ttfb.is_none() && !data.is_empty() {
                        ttfb = Some(Instant::now().saturating_duration_since(scheduled));
                    }
                    if stream {
                        tail.extend_from_slice(data);
                        let keep = tail.len().saturating_sub(64);
                        tail.drain(..keep);
                    }
                }
            }
        }
    }
    let success = (200..300).contains(&status);
    // A stream is whole only if it ended with [DONE]; an error event means it failed.
    let clean = !stream || memchr_find(&tail, b"data: [DONE]");
    (status, success && clean, ttfb)
}

fn memchr_find(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}
