//! Writing answers: complete JSON, or an SSE stream passed through frame by frame, with the
//! call's timings in `Server-Timing` and the call settled when the answer ends.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use futures::Stream;
use http::{HeaderMap, HeaderValue, header};
use sluice_core::{AttemptOutcome, CallRecord, GatewayError, RequestId};
use sluice_providers::{EventStream, StreamEvent, openai};
use sluice_tail::admission::Permit;
use tokio::time::{Instant, Sleep, sleep_until};

use crate::call::Call;
use crate::deadline;

/// Adds `x-request-id` and, when known, `x-sluice-upstream`.
pub fn tag(h: &mut HeaderMap, id: &RequestId, upstream: Option<&str>) {
    if let Ok(v) = HeaderValue::from_str(id.as_str()) {
        h.insert("x-request-id", v);
    }
    if let Some(v) = upstream.and_then(|u| HeaderValue::from_str(u).ok()) {
        h.insert("x-sluice-upstream", v);
    }
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

/// `Server-Timing` (durations in milliseconds): `queue`, `upstream_ttfb`, one `attempt` per
/// attempt (`desc` = why it went, where, how it ended; `dur` = to its first byte or its end),
/// `hedge;desc="denied"` and `retry;desc="denied"` when a budget or the deadline stopped one,
/// `deadline` with the time left of the request's budget, and `total`.
///
/// For a stream the headers leave at the first byte, so `total` is the time to that byte
/// (marked with a description) and the winning attempt reads `first_byte`; the full
/// duration is in the call record and metrics.
pub fn server_timing(r: &CallRecord, now: Instant, stream: bool) -> String {
    let t = &r.timings;
    let mut parts = Vec::with_capacity(4 + r.attempts.len());
    if let Some(q) = t.queue() {
        parts.push(format!("queue;dur={}", ms(q)));
    }
    if let Some(u) = t.upstream_ttfb() {
        parts.push(format!("upstream_ttfb;dur={}", ms(u)));
    }
    for a in &r.attempts {
        let until = a.first_byte.or(a.ended).unwrap_or(now);
        let outcome = match a.outcome {
            AttemptOutcome::Pending if a.first_byte.is_some() => "first_byte",
            o => o.label(),
        };
        parts.push(format!(
            "attempt;desc=\"{} {} {outcome}\";dur={}",
            a.kind.label(),
            a.upstream.replace(['"', '\\'], "_"),
            ms(until.saturating_duration_since(a.started))
        ));
    }
    if r.hedge_denied {
        parts.push("hedge;desc=\"denied\"".to_string());
    }
    if r.retry_denied {
        parts.push("retry;desc=\"denied\"".to_string());
    }
    if let Some(d) = t.deadline {
        parts.push(format!(
            "deadline;desc=\"left\";dur={}",
            ms(d.saturating_duration_since(now))
        ));
    }
    let total = now.saturating_duration_since(t.received);
    if stream {
        parts.push(format!("total;desc=\"to first byte\";dur={}", ms(total)));
    } else {
        parts.push(format!("total;dur={}", ms(total)));
    }
    parts.join(", ")
}

fn headers_for(call: &Call, now: Instant, stream: bool, h: &mut HeaderMap) {
    let r = call.record();
    tag(h, &r.request_id, r.upstream.as_deref());
    if let Ok(v) = HeaderValue::from_str(&server_timing(r, now, stream)) {
        h.insert("server-timing", v);
    }
}

/// A complete JSON answer; settles the call.
pub fn complete(mut call: Call, attempt: usize, body: Bytes) -> Response {
    let now = Instant::now();
    call.end_attempt(attempt, AttemptOutcome::Ok, now);
    let mut resp = Response::new(Body::from(body));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers_for(&call, now, false, h);
    call.finish(200, None);
    resp
}

/// An SSE answer that starts with `first` and forwards the rest of `rest` as it arrives,
/// holding its admission slot (`permit`) until the stream ends.
pub fn stream(
    call: Call,
    attempt: usize,
    first: Bytes,
    rest: EventStream,
    permit: Option<Permit>,
) -> Response {
    let now = Instant::now();
    let mut head = HeaderMap::new();
    headers_for(&call, now, true, &mut head);
    let deadline = call
        .record()
        .timings
        .deadline
        .map(|d| Box::pin(sleep_until(d)));
    let body = ClientStream {
        first: Some(first),
        rest,
        call: Some(call),
        attempt,
        permit,
        deadline,
    };
    let mut resp = Response::new(Body::from_stream(body));
    let h = resp.headers_mut();
    h.extend(head);
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

/// The body of a streamed answer. Frames go out as they come; usage is kept for the record;
/// an upstream failure mid-stream, or the request's deadline running out, is sent as an
/// error event (never a silent truncation). If the client leaves, dropping this settles the
/// call as abandoned.
struct ClientStream {
    first: Option<Bytes>,
    rest: EventStream,
    call: Option<Call>,
    attempt: usize,
    /// Released when the stream ends (or the client leaves and this is dropped).
    permit: Option<Permit>,
    /// Fires when the request's deadline runs out.
    deadline: Option<Pin<Box<Sleep>>>,
}

impl ClientStream {
    /// Ends the answer with `e`: the slot freed, the attempt and the call settled, and the
    /// error event to send last.
    fn end_with(&mut self, e: &GatewayError) -> Bytes {
        self.permit = None;
        if let Some(mut call) = self.call.take() {
            call.end_attempt(self.attempt, AttemptOutcome::Failed(e.kind), Instant::now());
            call.finish(200, Some(e.kind));
        }
        openai::error_frame(e)
    }
}

impl Stream for ClientStream {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(first) = this.first.take() {
            return Poll::Ready(Some(Ok(first)));
        }
        loop {
            if this.call.is_none() {
                return Poll::Ready(None);
            }
            // The deadline first: an answer that is still streaming when it runs out is cut
            // there, even if more frames are ready.
            if let Some(d) = this.deadline.as_mut()
                && d.as_mut().poll(cx).is_ready()
            {
                let e = match this.call.as_mut() {
                    Some(call) => deadline::exceeded(call),
                    None => return Poll::Ready(None),
                };
                return Poll::Ready(Some(Ok(this.end_with(&e))));
            }
            match this.rest.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(StreamEvent::Frame(b)))) => return Poll::Ready(Some(Ok(b))),
                Poll::Ready(Some(Ok(StreamEvent::Usage(u)))) => {
                    if let Some(call) = this.call.as_mut() {
                        call.record_mut().usage = Some(u);
                    }
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Ok(this.end_with(&e)))),
                Poll::Ready(None) => {
                    this.permit = None;
                    if let Some(mut call) = this.call.take() {
                        call.end_attempt(this.attempt, AttemptOutcome::Ok, Instant::now());
                        call.finish(200, None);
                    }
                    return Poll::Ready(None);
                }
            }
        }
    }
}
