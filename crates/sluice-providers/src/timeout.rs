//! First-byte and idle timeouts for any [`Provider`], applied to its answer's events: the
//! HTTP adapters time bytes on the wire; this times providers that have no wire (the
//! in-process simulator) with the same meaning.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use sluice_core::{ErrorKind, GatewayError};
use tokio::time::{Instant, timeout_at};

use crate::{EventStream, Provider, StreamEvent, UpstreamCall, UpstreamResponse};

/// A provider whose answers must start within `first_byte` and never pause longer than `idle`.
pub struct WithTimeouts<P> {
    inner: P,
    name: Arc<str>,
    first_byte: Duration,
    idle: Duration,
}

impl<P> WithTimeouts<P> {
    /// Wraps `inner` (called `name` in messages).
    pub fn new(inner: P, name: &str, first_byte: Duration, idle: Duration) -> Self {
        Self {
            inner,
            name: Arc::from(name),
            first_byte,
            idle,
        }
    }
}

fn timed_out(name: &str, what: &str) -> GatewayError {
    GatewayError::new(
        ErrorKind::UpstreamTimeout,
        format!("upstream {name} sent no {what} in time"),
    )
}

impl<P: Provider> Provider for WithTimeouts<P> {
    fn call(
        &self,
        call: UpstreamCall,
    ) -> BoxFuture<'static, Result<UpstreamResponse, GatewayError>> {
        let deadline = Instant::now() + self.first_byte;
        let fut = self.inner.call(call);
        let name = self.name.clone();
        let idle = self.idle;
        async move {
            match timeout_at(deadline, fut).await {
                Err(_) => Err(timed_out(&name, "first byte")),
                Ok(Ok(UpstreamResponse::Stream(s))) => {
                    Ok(UpstreamResponse::Stream(timed(s, name, deadline, idle)))
                }
                Ok(other) => other,
            }
        }
        .boxed()
    }
}

struct Timed {
    inner: EventStream,
    name: Arc<str>,
    first_deadline: Option<Instant>,
    idle: Duration,
    done: bool,
}

fn timed(inner: EventStream, name: Arc<str>, first: Instant, idle: Duration) -> EventStream {
    let state = Timed {
        inner,
        name,
        first_deadline: Some(first),
        idle,
        done: false,
    };
    futures::stream::unfold(state, |mut s| async move {
        if s.done {
            return None;
        }
        let (deadline, what) = match s.first_deadline {
            Some(d) => (d, "first byte"),
            None => (Instant::now() + s.idle, "next chunk"),
        };
        let item = match timeout_at(deadline, s.inner.next()).await {
            Err(_) => {
                s.done = true;
                Some(Err(timed_out(&s.name, what)))
            }
            Ok(None) => None,
            Ok(Some(Ok(StreamEvent::Frame(b)))) => {
                s.first_deadline = None;
                Some(Ok(StreamEvent::Frame(b)))
            }
            Ok(Some(other)) => Some(other),
        };
        item.map(|i| (i, s))
    })
    .boxed()
}

#[cfg(test)]
mod tests;
