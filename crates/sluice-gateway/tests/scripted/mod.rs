//! A scripted upstream for virtual-time tests: each call waits the next scripted delay, then
//! answers, fails, or refuses with 429.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use sluice_core::{ErrorKind, GatewayError, UpstreamReply};
use sluice_providers::{Completion, Provider, UpstreamCall, UpstreamResponse};
use tokio::time::{Instant, sleep};

/// How a scripted call ends.
#[derive(Clone, Copy)]
pub enum End {
    Ok,
    Fail,
    /// 429 with this `retry-after`, in seconds.
    Limited(u64),
    /// The upstream's own 4xx (not retryable).
    Reject(u16),
}

/// An upstream that answers each call after the next scripted delay, or fails.
#[derive(Clone, Default)]
pub struct Scripted {
    steps: Arc<Mutex<VecDeque<(u64, End)>>>,
    calls: Arc<Mutex<u32>>,
    /// (calls in progress now, most ever at once).
    busy: Arc<Mutex<(u32, u32)>>,
}

/// Counts a call in progress until dropped.
struct Busy(Arc<Mutex<(u32, u32)>>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.lock().0 -= 1;
    }
}

impl Scripted {
    pub fn push(&self, ms: u64, ok: bool) {
        self.steps
            .lock()
            .push_back((ms, if ok { End::Ok } else { End::Fail }));
    }
    pub fn push_limited(&self, ms: u64, retry_after: u64) {
        self.steps.lock().push_back((ms, End::Limited(retry_after)));
    }
    pub fn push_end(&self, ms: u64, end: End) {
        self.steps.lock().push_back((ms, end));
    }
    pub fn calls(&self) -> u32 {
        *self.calls.lock()
    }
    /// The most calls it ever had in progress at once.
    pub fn peak(&self) -> u32 {
        self.busy.lock().1
    }
}

impl Provider for Scripted {
    fn call(&self, _: UpstreamCall) -> BoxFuture<'static, Result<UpstreamResponse, GatewayError>> {
        *self.calls.lock() += 1;
        let (ms, end) = self.steps.lock().pop_front().unwrap_or((100, End::Ok));
        let busy = {
            let mut b = self.busy.lock();
            b.0 += 1;
            b.1 = b.1.max(b.0);
            Busy(self.busy.clone())
        };
        async move {
            let _busy = busy;
            sleep(Duration::from_millis(ms)).await;
            match end {
                End::Ok => {}
                End::Fail => {
                    return Err(GatewayError::new(
                        ErrorKind::UpstreamServerError,
                        "scripted failure",
                    ));
                }
                End::Limited(secs) => {
                    return Err(GatewayError::rejected(UpstreamReply {
                        status: 429,
                        body: Bytes::from_static(b"{}"),
                        content_type: None,
                        retry_after: Some(secs.to_string()),
                    }));
                }
                End::Reject(status) => {
                    return Err(GatewayError::rejected(UpstreamReply {
                        status,
                        body: Bytes::from_static(br#"{"error":{"message":"no"}}"#),
                        content_type: Some("application/json".into()),
                        retry_after: None,
                    }));
                }
            }
            Ok(UpstreamResponse::Complete(Completion {
                body: Bytes::from_static(br#"{"choices":[]}"#),
                usage: None,
                first_byte: Instant::now(),
            }))
        }
        .boxed()
    }
}
