//! Writing answers: complete JSON, or an SSE stream passed through frame by frame, with the
//! call's timings in `Server-Timing` and the call settled when the answer ends.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use futures::Stream;
use http::{HeaderMap, HeaderName, HeaderValue, header};
use sluice_core::{AttemptOutcome, CallRecord, GatewayError};
use sluice_providers::alarm::Alarm;
use sluice_providers::{EventStream, StreamEvent, openai};
use sluice_tail::admission::Permit;
use tokio::time::Instant;

use crate::walk::cache::Served;
use crate::walk::call::Call;
use crate::walk::deadline;
use sluice_cache::assemble::Assembler;
use sluice_ingress::Reframe;

const SERVER_TIMING: HeaderName = HeaderName::from_static("server-timing");
const X_SLUICE_CACHE: HeaderName = HeaderName::from_static("x-sluice-cache");
/// Which task-route rule chose the group, and the fallbacks taken.
pub const X_SLUICE_ROUTE: HeaderName = HeaderName::from_static("x-sluice-route");
/// Compression's prompt tokens before and after (`before=54210; after=5990`).
const X_SLUICE_COMPRESSION: HeaderName = HeaderName::from_static("x-sluice-compression");
/// Progressive loading's rounds and the prompt tokens they sent together
/// (`rounds=2; insufficient=1; prompt_tokens=9120`).
const X_SLUICE_PROGRESSIVE: HeaderName = HeaderName::from_static("x-sluice-progressive");

/// Writes `d` in milliseconds with three decimals, rounded to the microsecond (integers
/// only: float formatting showed in profiles).
fn ms(out: &mut String, d: Duration) {
    // Integers written with itoa: this runs a few times a request, and `write!` of a u128
    // cost more than the rest of the header.
    let micros = u64::try_from((d.as_nanos() + 500) / 1000).unwrap_or(u64::MAX);
    let mut buf = itoa::Buffer::new();
    out.push_str(buf.format(micros / 1000));
    out.push('.');
    let frac = buf.format(1000 + micros % 1000);
    out.push_str(frac.get(1..).unwrap_or("000"));
}

/// `text` inside a quoted `Server-Timing` description (quotes and backslashes replaced).
fn push_quoted(out: &mut String, text: &str) {
    if text.contains(['"', '\\']) {
        out.push_str(&text.replace(['"', '\\'], "_"));
    } else {
        out.push_str(text);
    }
}

/// `x-sluice-route`, when a task route chose the group: `ROUTE: RULE -> GROUP`, then each
/// fallback taken, `; fallback FROM -> TO (REASON)`.
pub fn route_header(r: &CallRecord) -> Option<HeaderValue> {
    let route = r.route.as_ref();
    if route.is_none() && r.fallbacks.is_empty() {
        return None;
    }
    let mut out = String::new();
    if let Some(t) = route {
        match &t.auto {
            Some(auto) => out.push_str(&super::auto::explain(t, auto)),
            None => out.push_str(&format!("{}: {} -> {}", t.route, t.rule, t.group)),
        }
    }
    for f in &r.fallbacks {
        if !out.is_empty() {
            out.push_str("; ");
        }
        out.push_str(&format!("fallback {} -> {} ({})", f.from, f.to, f.reason));
    }
    HeaderValue::from_str(&out).ok()
}

/// Starts the next `Server-Timing` entry with `text`.
fn part(out: &mut String, text: &str) {
    if !out.is_empty() {
        out.push_str(", ");
    }
    out.push_str(text);
}

/// `Server-Timing` (durations in milliseconds): `queue`, `upstream_ttfb`, one `attempt` per
/// attempt (`desc` = why it went, where, how it ended; `dur` = to its first byte or its end),
/// `cache;desc="hit"` or `"coalesced"` for an answer from the answer cache,
/// `hedge;desc="denied"` and `retry;desc="denied"` when a budget or the deadline stopped one,
/// `deadline` with the time left of the request's budget, and `total`.
///
/// For a stream the headers leave at the first byte, so `total` is the time to that byte
/// (marked with a description) and the winning attempt reads `first_byte`; the full
/// duration is in the call record and metrics.
pub fn server_timing(r: &CallRecord, now: Instant, stream: bool) -> String {
    let t = &r.timings;
    let mut out = String::with_capacity(96 + 64 * r.attempts.len());
    if let Some(q) = t.queue() {
        part(&mut out, "queue;dur=");
        ms(&mut out, q);
    }
    if let Some(u) = t.upstream_ttfb() {
        part(&mut out, "upstream_ttfb;dur=");
        ms(&mut out, u);
    }
    for a in &r.attempts {
        let until = a.first_byte.or(a.ended).unwrap_or(now);
        let outcome = match a.outcome {
            AttemptOutcome::Pending if a.first_byte.is_some() => "first_byte",
            o => o.label(),
        };
        part(&mut out, "attempt;desc=\"");
        out.push_str(a.kind.label());
        out.push(' ');
        push_quoted(&mut out, &a.upstream);
        out.push(' ');
        out.push_str(outcome);
        out.push_str("\";dur=");
        ms(&mut out, until.saturating_duration_since(a.started));
    }
    if let Some(c) = r.cache.filter(|c| c.served()) {
        part(&mut out, "cache;desc=\"");
        out.push_str(c.label());
        out.push('"');
    }
    for f in &r.fallbacks {
        part(&mut out, "fallback;desc=\"");
        push_quoted(&mut out, &f.from);
        out.push_str(" -> ");
        push_quoted(&mut out, &f.to);
        out.push(' ');
        out.push_str(f.reason);
        out.push('"');
    }
    if r.hedge_denied {
        part(&mut out, "hedge;desc=\"denied\"");
    }
    if r.retry_denied {
        part(&mut out, "retry;desc=\"denied\"");
    }
    if let Some(d) = t.deadline {
        part(&mut out, "deadline;desc=\"left\";dur=");
        ms(&mut out, d.saturating_duration_since(now));
    }
    let total = now.saturating_duration_since(t.received);
    if stream {
        part(&mut out, "total;desc=\"to first byte\";dur=");
    } else {
        part(&mut out, "total;dur=");
    }
    ms(&mut out, total);
    out
}

fn headers_for(call: &Call, now: Instant, stream: bool, h: &mut HeaderMap) {
    let r = call.record();
    super::rescue::tag(h, &r.request_id, r.upstream.as_deref());
    if let Ok(v) = HeaderValue::from_str(&server_timing(r, now, stream)) {
        h.insert(SERVER_TIMING, v);
    }
    let semantic = r.semantic.as_ref().and_then(super::semantic::header);
    match (r.cache, semantic) {
        (Some(sluice_core::CacheLookup::Semantic), Some(v)) => {
            if let Ok(v) = HeaderValue::from_str(&v) {
                h.insert(X_SLUICE_CACHE, v);
            }
        }
        (Some(c), _) => {
            h.insert(X_SLUICE_CACHE, HeaderValue::from_static(c.label()));
        }
        (None, _) => {}
    }
    if let Some(v) = route_header(r) {
        h.insert(X_SLUICE_ROUTE, v);
    }
    if let Some((before, after)) = r.compressed
        && let Ok(v) = HeaderValue::from_str(&format!("before={before}; after={after}"))
    {
        h.insert(X_SLUICE_COMPRESSION, v);
    }
    if !r.rounds.is_empty() {
        let insufficient = r.rounds.iter().filter(|x| x.insufficient).count();
        let sent: u64 = r
            .rounds
            .iter()
            .filter_map(|x| x.usage)
            .map(|u| u.prompt_tokens)
            .sum();
        let text = format!(
            "rounds={}; insufficient={insufficient}; prompt_tokens={sent}",
            r.rounds.len()
        );
        if let Ok(v) = HeaderValue::from_str(&text) {
            h.insert(X_SLUICE_PROGRESSIVE, v);
        }
    }
}

/// Stores the complete answer `body` where the call is to: the answer cache, and by
/// meaning (or, verifying, compared with the entry's answer).
fn store(call: &mut Call, body: &Bytes, now: Instant) {
    if let Some((question, cost)) = call.store_answer(body, now)
        && let Some(sem) = call.gateway().caches.semantic.clone()
    {
        let gw = call.gateway().clone();
        if let Some(right) =
            super::semantic::settle(&gw, &sem, call.record(), question, body, cost, now)
        {
            call.verified(right);
        }
    }
}

/// A complete JSON answer; settles the call.
pub fn complete(mut call: Call, attempt: usize, body: Bytes, native: Option<Bytes>) -> Response {
    let now = Instant::now();
    call.end_attempt(attempt, AttemptOutcome::Ok, now);
    store(&mut call, &body, now);
    call.sent(body.len());
    // An automatic router learns from what is wrong with its answer (cut at `length`, not
    // JSON when JSON was asked for); nothing is read for other calls.
    let wants_json = call
        .record()
        .route
        .as_ref()
        .and_then(|r| r.auto.as_ref())
        .map(|a| a.wants_json);
    if let Some(wants_json) = wants_json {
        call.flawed(crate::learning::flaw(&body, wants_json));
    }
    // The upstream's own answer when the client spoke its API; else the chat answer in the
    // client's API.
    let body = match native.map_or_else(|| call.dialect().answer(body), Ok) {
        Ok(body) => body,
        Err(e) => return unwritable(call, attempt, &e),
    };
    let mut resp = Response::new(Body::from(body));
    // Sized once for the headers written here and the content length added on the way out,
    // rather than grown (and reallocated) as inserts fill it.
    let mut h = HeaderMap::with_capacity(8);
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers_for(&call, now, false, &mut h);
    *resp.headers_mut() = h;
    call.finish(200, None);
    resp
}

/// An answer that could not be written in the client's API: the attempt counts as failed and
/// the client gets the error.
fn unwritable(mut call: Call, attempt: usize, e: &GatewayError) -> Response {
    call.end_attempt(attempt, AttemptOutcome::Failed(e.kind), Instant::now());
    refuse(call, e)
}

/// Answers with `e` in the client's API and settles the call with the status it got.
fn refuse(call: Call, e: &GatewayError) -> Response {
    let resp = {
        let r = call.record();
        super::rescue::error_response(e, &r.request_id, r.upstream.as_deref(), call.dialect())
    };
    call.refused(e);
    resp
}

/// An answer from the answer cache (its JSON, or its SSE replay); settles the call.
pub fn cached(mut call: Call, served: Served) -> Response {
    let Served {
        stored,
        body,
        stream,
    } = served;
    let now = Instant::now();
    call.saved(stored.cost_micros);
    let content_type = if stream {
        "text/event-stream"
    } else {
        "application/json"
    };
    // Stored answers are in the internal form, whatever API stored them.
    let dialect = call.dialect();
    let body = match (dialect.reframe(), stream) {
        (Some(reframe), true) => Bytes::from(reframe.whole(&body)),
        _ => match dialect.answer(body) {
            Ok(b) => b,
            Err(e) => return refuse(call, &e),
        },
    };
    let mut resp = Response::new(Body::from(body));
    let mut h = HeaderMap::with_capacity(8);
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers_for(&call, now, false, &mut h);
    let age = now.saturating_duration_since(stored.stored_at).as_secs();
    h.insert(header::AGE, HeaderValue::from(age));
    *resp.headers_mut() = h;
    call.finish(200, None);
    resp
}

/// An SSE answer that starts with `first` and forwards the rest of `rest` as it arrives,
/// holding its admission slot (`permit`) until the stream ends.
pub fn stream(
    mut call: Call,
    attempt: usize,
    first: Bytes,
    rest: EventStream,
    permit: Option<Permit>,
    native: bool,
) -> Response {
    let now = Instant::now();
    let mut head = HeaderMap::new();
    headers_for(&call, now, true, &mut head);
    let deadline = call.record().timings.deadline.map(Alarm::at);
    let mut assembly = call.stores_answer().then(Assembler::default);
    if let Some(a) = assembly.as_mut()
        && !native
    {
        a.frame(&first);
    }
    call.sent(first.len());
    let mut reframe = call.dialect().reframe();
    let first = match reframe.as_mut() {
        Some(r) if !native => Bytes::from(r.feed(&first)),
        _ => first,
    };
    let body = ClientStream {
        reframe,
        native,
        first: Some(first),
        rest,
        call: Some(call),
        attempt,
        permit,
        deadline,
        assembly,
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
    deadline: Option<Alarm>,
    /// The answer assembled for the answer cache, when it is to be stored.
    assembly: Option<Assembler>,
    /// The client's API's events written from the chat frames, when it speaks another.
    reframe: Option<Reframe>,
    /// The client gets the upstream's own events; the frames only feed the answer cache.
    native: bool,
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
        match self.reframe.as_mut() {
            Some(r) => Bytes::from(r.fail(e)),
            None => openai::error_frame(e),
        }
    }

    /// A frame in the client's API: itself, or the events it completes (maybe none yet);
    /// nothing when the client reads the upstream's own events.
    fn out(&mut self, frame: Bytes) -> Option<Bytes> {
        match self.reframe.as_mut() {
            _ if self.native => None,
            None => Some(frame),
            Some(r) => Some(r.feed(&frame))
                .filter(|b| !b.is_empty())
                .map(Bytes::from),
        }
    }
}

impl Stream for ClientStream {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(first) = this.first.take().filter(|f| !f.is_empty()) {
            return Poll::Ready(Some(Ok(first)));
        }
        loop {
            if this.call.is_none() {
                return Poll::Ready(None);
            }
            // The deadline first: an answer that is still streaming when it runs out is cut
            // there, even if more frames are ready.
            if let Some(d) = this.deadline.as_mut()
                && d.poll_fired(cx)
            {
                let e = match this.call.as_mut() {
                    Some(call) => deadline::exceeded(call),
                    None => return Poll::Ready(None),
                };
                return Poll::Ready(Some(Ok(this.end_with(&e))));
            }
            match this.rest.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(StreamEvent::Frame(b)))) => {
                    if let Some(a) = this.assembly.as_mut() {
                        a.frame(&b);
                    }
                    if let Some(call) = this.call.as_mut() {
                        call.chunk_described(&b);
                    }
                    if !this.native
                        && let Some(call) = this.call.as_mut()
                    {
                        call.sent(b.len());
                    }
                    if let Some(out) = this.out(b) {
                        return Poll::Ready(Some(Ok(out)));
                    }
                }
                Poll::Ready(Some(Ok(StreamEvent::Native(b)))) => {
                    if this.native
                        && let Some(call) = this.call.as_mut()
                    {
                        call.sent(b.len());
                        return Poll::Ready(Some(Ok(b)));
                    }
                }
                Poll::Ready(Some(Ok(StreamEvent::Usage(u)))) => {
                    if let Some(a) = this.assembly.as_mut() {
                        a.usage(u);
                    }
                    if let Some(call) = this.call.as_mut() {
                        call.used(u);
                    }
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Ok(this.end_with(&e)))),
                Poll::Ready(None) => {
                    this.permit = None;
                    if let Some(mut call) = this.call.take() {
                        let now = Instant::now();
                        call.end_attempt(this.attempt, AttemptOutcome::Ok, now);
                        if let Some(answer) = this.assembly.take().and_then(Assembler::finish) {
                            store(&mut call, &answer, now);
                        }
                        call.finish(200, None);
                    }
                    // The client's API closes its message (or says the answer was cut).
                    let tail = match this.reframe.as_mut() {
                        Some(r) if !this.native => Some(r.finish()),
                        _ => None,
                    };
                    return Poll::Ready(tail.filter(|t| !t.is_empty()).map(|t| Ok(Bytes::from(t))));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(d: Duration) -> String {
        let mut s = String::new();
        ms(&mut s, d);
        s
    }

    #[test]
    fn durations_read_in_milliseconds_rounded_to_the_microsecond() {
        assert_eq!(shown(Duration::ZERO), "0.000");
        assert_eq!(shown(Duration::from_nanos(1_234_567)), "1.235");
        assert_eq!(shown(Duration::from_nanos(1_234_499)), "1.234");
        assert_eq!(shown(Duration::from_nanos(999_999_600)), "1000.000");
        assert_eq!(shown(Duration::from_secs(12)), "12000.000");
        assert_eq!(shown(Duration::from_micros(7)), "0.007");
    }
}
