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
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use sluice_core::{ChatRequest, RequestId};

    use super::*;

    /// Yields frames after the given delays.
    struct Delays(Vec<Duration>);

    impl Provider for Delays {
        fn call(
            &self,
            _: UpstreamCall,
        ) -> BoxFuture<'static, Result<UpstreamResponse, GatewayError>> {
            let delays = self.0.clone();
            let s = futures::stream::iter(delays)
                .then(|d| async move {
                    tokio::time::sleep(d).await;
                    Ok(StreamEvent::Frame(Bytes::from_static(b"data: x\n\n")))
                })
                .boxed();
            futures::future::ready(Ok(UpstreamResponse::Stream(s))).boxed()
        }
    }

    fn call() -> UpstreamCall {
        let body =
            serde_json::json!({"model": "m", "messages": [{"role": "user"}], "stream": true});
        UpstreamCall {
            request: Arc::new(ChatRequest::parse(body.to_string().as_bytes()).unwrap()),
            model: Arc::from("m"),
            request_id: RequestId::generate(),
        }
    }

    async fn outcome(delays: &[u64]) -> Vec<Result<(), ErrorKind>> {
        let p = WithTimeouts::new(
            Delays(delays.iter().map(|ms| Duration::from_millis(*ms)).collect()),
            "u",
            Duration::from_secs(1),
            Duration::from_millis(200),
        );
        let Ok(UpstreamResponse::Stream(s)) = p.call(call()).await else {
            panic!("stream")
        };
        s.map(|r| r.map(|_| ()).map_err(|e| e.kind)).collect().await
    }

    #[tokio::test(start_paused = true)]
    async fn a_prompt_stream_passes() {
        assert_eq!(
            outcome(&[900, 150, 150]).await,
            vec![Ok(()), Ok(()), Ok(())]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_late_first_byte_times_out() {
        assert_eq!(
            outcome(&[1100]).await,
            vec![Err(ErrorKind::UpstreamTimeout)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_mid_stream_times_out_once() {
        assert_eq!(
            outcome(&[10, 10, 250, 10]).await,
            vec![Ok(()), Ok(()), Err(ErrorKind::UpstreamTimeout)]
        );
    }
}
