//! What the walk gives back: an [`Answered`] or a [`Refused`], each with the [`Head`] of
//! facts a client is told beside it (request id, upstream, timings, cache, route, shaping).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};
use sluice_core::{ErrorKind, GatewayError, RequestId};
use sluice_ingress::Dialect;
use sluice_ledger::Entry;

use crate::walk::respond::ClientStream;

/// What a client is told beside its answer or refusal.
#[derive(Clone, Debug)]
pub struct Head {
    /// The request's id.
    pub request_id: RequestId,
    /// The upstream that answered (or was last tried); `None` when none was.
    pub upstream: Option<Arc<str>>,
    /// `Server-Timing`: the call's timings so far.
    pub server_timing: String,
    /// What the caches did (`hit`, `coalesced`, `semantic; entry=...`), when one served.
    pub cache: Option<String>,
    /// The task route or router that chose the group, and the fallbacks taken.
    pub route: Option<String>,
    /// Compression's prompt tokens before and after.
    pub compression: Option<(u64, u64)>,
    /// Progressive loading's rounds: how many, how many said they did not suffice, the
    /// prompt tokens they sent together.
    pub progressive: Option<(usize, usize, u64)>,
    /// A cached answer's age, in seconds.
    pub age: Option<u64>,
}

/// An answered request.
#[derive(Debug)]
pub struct Answered {
    /// What the client is told beside the answer.
    pub head: Head,
    /// The answer.
    pub answer: Answer,
    /// Its ledger row, for a [`super::Caller::Known`] caller, once the call has settled (a
    /// complete answer's at once; a stream's when it has been read to its end: see
    /// [`Answered::complete`]).
    pub entry: Option<Entry>,
}

/// An answer, in the client's API.
#[derive(Debug)]
pub enum Answer {
    /// Complete: JSON, or for a stream request answered from the cache, its whole SSE.
    Complete {
        /// The body.
        body: Bytes,
        /// `application/json` or `text/event-stream`.
        content_type: &'static str,
    },
    /// A stream of SSE frames, passed on as the upstream sends them.
    Stream(AnswerStream),
}

/// An answer read to its end, with its ledger row.
#[derive(Debug)]
pub struct Complete {
    /// The whole body (a stream's frames one after the other).
    pub body: Bytes,
    /// Its ledger row, for a known caller when a ledger is kept.
    pub entry: Option<Entry>,
    /// The upstream that answered.
    pub upstream: Option<Arc<str>>,
}

impl Answered {
    /// The answer read to its end (a stream drained, which settles its call).
    pub async fn complete(self) -> Complete {
        let Self {
            head,
            answer,
            entry,
        } = self;
        match answer {
            Answer::Complete { body, .. } => Complete {
                body,
                entry,
                upstream: head.upstream,
            },
            Answer::Stream(mut stream) => {
                let mut body = BytesMut::new();
                while let Some(frame) = stream.next().await {
                    body.extend_from_slice(&frame);
                }
                Complete {
                    body: body.freeze(),
                    entry: stream.entry(),
                    upstream: head.upstream,
                }
            }
        }
    }
}

/// A streamed answer: its frames in the client's API. Reading it to its end settles the
/// call; dropping it before settles the call as abandoned by the client.
pub struct AnswerStream(pub(crate) Box<ClientStream>);

impl std::fmt::Debug for AnswerStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnswerStream").finish_non_exhaustive()
    }
}

impl AnswerStream {
    /// The ledger row, for a known caller, once the stream has ended.
    pub fn entry(&mut self) -> Option<Entry> {
        self.0.handed.take()
    }
}

impl Stream for AnswerStream {
    type Item = Bytes;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        Pin::new(&mut *self.get_mut().0).poll_next(cx)
    }
}

/// A refused request: why, whether any upstream saw it, and its bill.
#[derive(Debug)]
pub struct Refused {
    /// Why.
    pub error: GatewayError,
    /// The API the client spoke (how the refusal is written).
    pub dialect: Dialect,
    /// Whether any attempt went upstream.
    pub sent: bool,
    /// What the client is told beside the refusal.
    pub head: Head,
    /// Its ledger row, for a known caller when a ledger is kept.
    pub entry: Option<Entry>,
}

/// The refusals sluice makes of its own before any upstream sees a request, which its
/// internal callers wait out and send again: overload, the tenant's rate quota for now, a
/// gateway shutting down.
const SLUICE_OWN: [ErrorKind; 3] = [
    ErrorKind::Overloaded,
    ErrorKind::QuotaExceeded,
    ErrorKind::ShuttingDown,
];

impl Refused {
    /// The error's kind.
    pub fn kind(&self) -> ErrorKind {
        self.error.kind
    }

    /// How long sluice's own refusal asks the caller to wait, when it says: as a client is
    /// told it, in whole seconds rounded up.
    pub fn retry_after(&self) -> Option<Duration> {
        self.error
            .retry_after
            .map(|d| Duration::from_secs(d.as_secs_f64().ceil().max(1.0) as u64))
    }

    /// The kind of the refusal when sluice made it before any upstream saw the request
    /// (overload, a rate quota for now, shutting down): worth waiting out and sending again.
    pub fn unsent(&self) -> Option<ErrorKind> {
        (!self.sent && SLUICE_OWN.contains(&self.error.kind)).then_some(self.error.kind)
    }

    /// The status the client gets, in its API.
    pub fn status(&self) -> u16 {
        self.dialect.status(&self.error)
    }

    /// The refusal's body in the client's API: an upstream's own 4xx as it came in OpenAI's
    /// APIs, else the API's error JSON.
    pub fn body(&self) -> Bytes {
        crate::walk::rescue::error_parts(&self.error, self.dialect).body
    }
}
