//! The one pump every streaming adapter shares: it reads the upstream's body, parses its
//! events (SSE, or another framing through [`Decode`]) and hands each to the adapter's
//! translator, then gives frames out in order, an error only after the frames before it.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures::{Stream, StreamExt};
use sluice_core::{ErrorKind, GatewayError};

use hyper::body::Incoming;

use crate::http::{Chunks, TimedBody};
use crate::sse::{SseEvent, SseParser};
use crate::{EventStream, StreamEvent};

/// How an upstream's body is cut into events: SSE by default; AWS's binary event stream for
/// Bedrock, each message handed on as an event named by its type.
pub(crate) trait Decode: Default + Send + Unpin + 'static {
    /// Adds a chunk and appends every event it completes to `out`; an error is the
    /// upstream's malformed stream.
    fn push(&mut self, chunk: &bytes::Bytes, out: &mut Vec<SseEvent>) -> Result<(), String>;
}

impl Decode for SseParser {
    fn push(&mut self, chunk: &bytes::Bytes, out: &mut Vec<SseEvent>) -> Result<(), String> {
        self.push_bytes(chunk, out).map_err(|e| e.to_string())
    }
}

/// What an adapter decides about its upstream's events; the pump does the reading.
pub(crate) trait Translate: Send + 'static {
    /// Handles one upstream event, appending what it produces to `out`.
    fn event(&mut self, ev: SseEvent, out: &mut VecDeque<StreamEvent>) -> Result<(), GatewayError>;

    /// Whether the upstream's stream is complete (nothing more is read).
    fn finished(&self) -> bool;

    /// The upstream closed its body before [`Translate::finished`]: returns whether that is a
    /// polite end (after appending any closing frames) rather than a truncated stream.
    fn closed(&mut self, out: &mut VecDeque<StreamEvent>) -> bool;
}

struct Pump<T, B = Incoming, D = SseParser> {
    /// The upstream's body, until it has ended.
    body: Option<TimedBody<B>>,
    parser: D,
    translator: T,
    /// Reused between chunks so a chunk costs no allocation for its event list.
    events: Vec<SseEvent>,
    pending: VecDeque<StreamEvent>,
    name: Arc<str>,
    /// An error to report once the frames before it are out.
    error: Option<GatewayError>,
}

impl<T: Translate, B: Chunks, D: Decode> Pump<T, B, D> {
    /// The next frame (or usage), an error after the frames before it, `None` at the end.
    fn poll_event(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<StreamEvent, GatewayError>>> {
        loop {
            // The answer's last frame waits for the body's end, so that both leave in one
            // write (and the connection goes back to the pool, see `poll_release`).
            if self.pending.len() == 1 && self.translator.finished() {
                ready!(self.poll_release(cx));
            }
            if let Some(ev) = self.pending.pop_front() {
                return Poll::Ready(Some(Ok(ev)));
            }
            if let Some(e) = self.error.take() {
                // Nothing is read after an error: the stream ends with it.
                self.body = None;
                return Poll::Ready(Some(Err(e)));
            }
            if self.translator.finished() {
                ready!(self.poll_release(cx));
                return Poll::Ready(None);
            }
            let Some(body) = self.body.as_mut() else {
                return Poll::Ready(None);
            };
            match ready!(body.poll_chunk(cx)) {
                Err(e) => {
                    self.body = None;
                    self.error = Some(e);
                }
                Ok(None) => {
                    self.body = None;
                    if !self.translator.closed(&mut self.pending) {
                        self.error = Some(GatewayError::new(
                            ErrorKind::UpstreamConnect,
                            format!(
                                "upstream {} closed the stream before it finished",
                                self.name
                            ),
                        ));
                    }
                }
                Ok(Some(chunk)) => {
                    let pushed = self.parser.push(&chunk, &mut self.events);
                    for ev in self.events.drain(..) {
                        if let Err(e) = self.translator.event(ev, &mut self.pending) {
                            self.error = Some(e);
                            break;
                        }
                    }
                    self.events.clear();
                    if let Err(e) = pushed
                        && self.error.is_none()
                    {
                        self.error = Some(GatewayError::new(ErrorKind::UpstreamProtocol, e));
                    }
                }
            }
        }
    }
}

impl<T, B: Chunks, D> Pump<T, B, D> {
    /// Once the answer is complete, reads the upstream's body to its end (for at most
    /// [`RELEASE`]), so that hyper puts its connection back in the pool: a body dropped before
    /// its end closes the connection, and the next stream would open (and pay for) a new one.
    /// The end follows the last event at once from any sane server, and the last frame waits
    /// for it: the client's answer ends with the upstream's, as through a plain proxy, its
    /// last frame and end in one write.
    fn poll_release(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(body) = self.body.as_mut() else {
            return Poll::Ready(());
        };
        body.end_within(RELEASE);
        loop {
            match ready!(body.poll_chunk(cx)) {
                Ok(Some(_)) => {}
                // An error here (the end did not come in time) only costs the connection.
                Ok(None) | Err(_) => {
                    self.body = None;
                    return Poll::Ready(());
                }
            }
        }
    }
}

/// How long a finished answer's body is read for its end before its connection is given up.
const RELEASE: Duration = Duration::from_millis(250);

impl<T: Translate + Unpin, B: Chunks, D: Decode> Stream for Pump<T, B, D> {
    type Item = Result<StreamEvent, GatewayError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().poll_event(cx)
    }
}

/// Streams `body` through `translator` as frames for the client: polled in place, so a
/// chunk moves no state and makes no future.
pub(crate) fn pump<T: Translate + Unpin, B: Chunks>(
    body: TimedBody<B>,
    translator: T,
    name: Arc<str>,
) -> EventStream {
    pump_with::<T, B, SseParser>(body, translator, name)
}

/// [`pump`] with the body cut into events by `D`.
pub(crate) fn pump_with<T: Translate + Unpin, B: Chunks, D: Decode>(
    body: TimedBody<B>,
    translator: T,
    name: Arc<str>,
) -> EventStream {
    Pump {
        body: Some(body),
        parser: D::default(),
        translator,
        events: Vec::new(),
        pending: VecDeque::new(),
        name,
        error: None,
    }
    .boxed()
}

#[cfg(test)]
mod tests;
