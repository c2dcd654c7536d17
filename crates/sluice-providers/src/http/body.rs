//! An answer's body read chunk by chunk under the first-byte and idle timeouts, with one
//! timer for the whole body.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use hyper::body::{Body, Incoming};
use sluice_core::{ErrorKind, GatewayError};
use tokio::time::Instant;

use super::classify;
use crate::alarm::Alarm;

/// An answer's body, read chunk by chunk under the first-byte and idle timeouts.
///
/// The body is hyper's own, polled in place (no stream adaptor or box between). One timer
/// serves the whole body, and a chunk that arrives does not touch it: the timer stays armed
/// at the deadline it was given, and when it fires before the wait's real deadline (chunks
/// came since it was armed), it is armed again from the latest chunk. So a stream's chunk
/// costs a clock read, not a timer registered and cancelled, and a poll that finds nothing
/// costs a look at whether the timer fired ([`Alarm`]).
pub struct TimedBody<B = Incoming> {
    body: B,
    first_byte_deadline: Option<Instant>,
    idle: Duration,
    upstream: String,
    /// When the first chunk arrived.
    pub first_byte: Option<Instant>,
    /// When the latest chunk arrived: the idle timeout counts from it.
    last: Option<Instant>,
    /// The body's one timer, made at the first wait.
    timer: Option<Alarm>,
    /// When the body must have ended, once the answer is complete ([`TimedBody::end_within`]).
    end_by: Option<Instant>,
    /// The client's deadline, which waiting for the end must not reach.
    call_deadline: Option<Instant>,
}

/// What a [`TimedBody`] reads: hyper's body, or a test's.
pub trait Chunks:
    Body<Data = Bytes, Error: std::error::Error + 'static> + Unpin + Send + 'static
{
}

impl<B> Chunks for B where
    B: Body<Data = Bytes, Error: std::error::Error + 'static> + Unpin + Send + 'static
{
}

impl<B: Chunks> TimedBody<B> {
    pub(crate) fn new(
        body: B,
        first_byte_deadline: Option<Instant>,
        idle: Duration,
        upstream: String,
    ) -> Self {
        Self {
            body,
            first_byte_deadline,
            idle,
            upstream,
            first_byte: None,
            last: None,
            timer: None,
            end_by: None,
            call_deadline: None,
        }
    }

    /// Bounds [`TimedBody::end_within`] by the client's deadline too.
    pub(crate) fn for_call(mut self, deadline: Option<Instant>) -> Self {
        self.call_deadline = deadline;
        self
    }

    /// The answer is complete: what is left of the body (its end, usually already on its
    /// way) must come within `grace`, whatever the idle timeout, and a millisecond before the
    /// client's deadline at the latest (a complete answer is not to be cut at its deadline
    /// for want of the upstream's end). Only the first call counts.
    pub fn end_within(&mut self, grace: Duration) {
        if self.end_by.is_some() {
            return;
        }
        let mut end_by = Instant::now() + grace;
        if let Some(before) = self
            .call_deadline
            .and_then(|d| d.checked_sub(Duration::from_millis(1)))
        {
            end_by = end_by.min(before);
        }
        self.end_by = Some(end_by);
        if let Some(t) = self.timer.as_mut()
            && t.deadline() > end_by
        {
            t.reset(end_by);
        }
    }

    /// The deadline of the wait in progress, and which phase it bounds (for the message).
    fn deadline(&self, now: Instant) -> (Instant, &'static str) {
        if let Some(end_by) = self.end_by {
            return (end_by, "end of its body");
        }
        match (self.first_byte_deadline, self.last) {
            (Some(d), None) => (d, "first byte"),
            (_, Some(last)) => (last + self.idle, "next chunk"),
            (None, None) => (now + self.idle, "next chunk"),
        }
    }

    /// Polls for the next chunk (`None` at the end).
    pub fn poll_chunk(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, GatewayError>> {
        loop {
            match Pin::new(&mut self.body).poll_frame(cx) {
                Poll::Pending => break,
                Poll::Ready(None) => return Poll::Ready(Ok(None)),
                Poll::Ready(Some(Err(e))) => {
                    return Poll::Ready(Err(classify(&self.upstream, &e)));
                }
                Poll::Ready(Some(Ok(frame))) => {
                    // Trailers carry nothing sluice reads.
                    let Ok(chunk) = frame.into_data() else {
                        continue;
                    };
                    let now = Instant::now();
                    if self.first_byte.is_none() {
                        self.first_byte = Some(now);
                        // The first-byte deadline may lie beyond the idle one that follows it:
                        // the timer is brought forward, once. Later chunks only move the
                        // deadline on, which a timer armed earlier sees when it fires.
                        if let Some(t) = self.timer.as_mut()
                            && t.deadline() > now + self.idle
                        {
                            t.reset(now + self.idle);
                        }
                    }
                    self.last = Some(now);
                    return Poll::Ready(Ok(Some(chunk)));
                }
            }
        }
        let mut timer = match self.timer.take() {
            Some(t) => t,
            None => Alarm::at(self.deadline(Instant::now()).0),
        };
        let polled = loop {
            if !timer.poll_fired(cx) {
                break Poll::Pending;
            }
            // Fired: either the wait's deadline has passed, or chunks came since the timer
            // was armed and it is armed again from the latest.
            let now = Instant::now();
            let (due, what) = self.deadline(now);
            if now >= due {
                break Poll::Ready(Err(GatewayError::new(
                    ErrorKind::UpstreamTimeout,
                    format!("upstream {} sent no {what} in time", self.upstream),
                )));
            }
            timer.reset(due);
        };
        self.timer = Some(timer);
        polled
    }

    /// The next chunk, `None` at the end.
    pub async fn next(&mut self) -> Result<Option<Bytes>, GatewayError> {
        std::future::poll_fn(|cx| self.poll_chunk(cx)).await
    }

    /// Reads everything up to `limit` bytes.
    pub async fn collect(&mut self, limit: usize) -> Result<Bytes, GatewayError> {
        let mut all = BytesMut::new();
        while let Some(chunk) = self.next().await? {
            if all.len() + chunk.len() > limit {
                return Err(GatewayError::new(
                    ErrorKind::UpstreamProtocol,
                    format!(
                        "upstream {} answered more than {limit} bytes",
                        self.upstream
                    ),
                ));
            }
            all.extend_from_slice(&chunk);
        }
        Ok(all.freeze())
    }
}
