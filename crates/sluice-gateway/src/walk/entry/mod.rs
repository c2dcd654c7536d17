//! The walk's one typed entry: [`Walker::run`] takes a [`Caller`] and a [`Request`] and gives
//! back an [`Answered`] (the answer, complete or a stream, with its upstream and, for a
//! caller that keeps its own bill, its ledger row) or a [`Refused`] (the error's kind,
//! whether any upstream saw the request, its `Retry-After`). The HTTP handlers of every API
//! are one thin adapter over it (`walk::http`); batch items and document reviews call it
//! directly.

mod answer;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use sluice_cache::Directive;
use sluice_core::{GatewayError, RequestId};
use sluice_ingress::Dialect;
use tokio_util::sync::CancellationToken;

pub use super::ingress::Body;
pub use answer::{Answer, AnswerStream, Answered, Complete, Head, Refused};

use super::auth::Identity;
use crate::Gateway;

/// The handle every caller of the walk holds: an `Arc` of the gateway's shared state, with
/// the walk as its one way in.
#[derive(Clone, Debug)]
pub struct Walker {
    gw: Arc<Gateway>,
}

impl Walker {
    /// The walker of `gw`.
    pub fn new(gw: Arc<Gateway>) -> Self {
        Self { gw }
    }

    /// Walks `request` for `caller`: every step from ingress to the answer, the call
    /// recorded and settled exactly once (a stream's when it ends or is dropped).
    pub async fn run(&self, caller: Caller, request: Request) -> Result<Answered, Box<Refused>> {
        super::answer(self.gw.clone(), caller, request).await
    }

    /// The gateway's shared state (what the walk's callers read besides it: keys, the
    /// ledger, telemetry).
    pub fn gateway(&self) -> &Arc<Gateway> {
        &self.gw
    }
}

/// Who is calling. Its `Debug` never shows a presented key.
pub enum Caller {
    /// A client, known by the credentials it presented (checked by the walk: 401 without a
    /// valid key where keys are required).
    Presented {
        /// The API key it presented, if any.
        key: Option<String>,
        /// The tenant it named, as checked (a malformed name is refused where identity is
        /// read, after the body).
        tenant: Result<Option<Arc<str>>, GatewayError>,
    },
    /// A caller the gateway already knows (a batch job's owner, an analysis's requester),
    /// in a lane of its own, whose ledger rows come back with the answer instead of going
    /// to the ledger's writer, so that it bills them with its own work.
    Known {
        /// Its tenant and key.
        identity: Identity,
        /// Its lane.
        lane: usize,
    },
}

impl std::fmt::Debug for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Presented { key, tenant } => f
                .debug_struct("Presented")
                .field("key", &key.as_ref().map(|_| "<redacted>"))
                .field("tenant", tenant)
                .finish(),
            Self::Known { identity, lane } => f
                .debug_struct("Known")
                .field("identity", identity)
                .field("lane", lane)
                .finish(),
        }
    }
}

/// One request to walk.
#[derive(Debug)]
pub struct Request {
    /// Its id.
    pub id: RequestId,
    /// The API it speaks (how its body is read and its answer written).
    pub dialect: Dialect,
    /// Its body.
    pub body: Body,
    /// What it asks of the walk besides its body.
    pub asks: Asks,
}

impl Request {
    /// A request already in memory, in `dialect`, asking nothing more.
    pub fn ready(id: RequestId, dialect: Dialect, body: Bytes) -> Self {
        Self {
            id,
            dialect,
            body: Body::Ready(body),
            asks: Asks::default(),
        }
    }

    /// The same, asking `asks`.
    pub fn asking(mut self, asks: Asks) -> Self {
        self.asks = asks;
        self
    }
}

/// What a request asks of the walk besides its body: a lane, a time budget, a task, what
/// the answer cache may do, the trace it continues, the headers its upstream API takes. A
/// value a client wrote badly is kept as its refusal and raised where the walk checks it,
/// so the order of the walk's checks (the body first) stays the walk's.
#[derive(Debug)]
pub struct Asks {
    /// The lane named, by name (checked against the lanes by the walk).
    pub(crate) lane: Option<String>,
    /// The request's own time budget.
    pub(crate) timeout: Result<Option<Duration>, GatewayError>,
    /// The task it declares (else its body's `metadata.task`).
    pub(crate) task: Result<Option<String>, GatewayError>,
    /// What the caches may do.
    pub(crate) cache: Directive,
    /// The W3C trace context it continues (`traceparent`, `tracestate`).
    pub(crate) trace: (Option<Bytes>, Option<Bytes>),
    /// Headers its own API's upstream takes as they came (Anthropic's version and betas).
    pub(crate) forwarded: Vec<(String, String)>,
    /// The model its URL names, for an API that names it there (Gemini's).
    pub(crate) url_model: Option<String>,
    /// Cancelled when its caller withdraws it: until its first attempt is sent it ends
    /// unsent ([`sluice_core::ErrorKind::Withdrawn`]); once sent, it finishes.
    pub(crate) withdrawn: Option<CancellationToken>,
}

impl Default for Asks {
    fn default() -> Self {
        Self {
            lane: None,
            timeout: Ok(None),
            task: Ok(None),
            cache: Directive::Use,
            trace: (None, None),
            forwarded: Vec::new(),
            url_model: None,
            withdrawn: None,
        }
    }
}

impl Asks {
    /// Asks for a time budget of `budget`.
    pub fn timeout(mut self, budget: Duration) -> Self {
        self.timeout = Ok(Some(budget));
        self
    }

    /// Declares the task `task`.
    pub fn task(mut self, task: &str) -> Self {
        self.task = Ok(Some(task.to_string()));
        self
    }

    /// Asks for lane `name`.
    pub fn lane(mut self, name: &str) -> Self {
        self.lane = Some(name.to_string());
        self
    }

    /// Tells the caches what they may do.
    pub fn cache(mut self, directive: Directive) -> Self {
        self.cache = directive;
        self
    }

    /// Withdrawn when `token` is cancelled, as long as nothing of it was sent.
    pub fn withdrawn_by(mut self, token: CancellationToken) -> Self {
        self.withdrawn = Some(token);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_presented_key_never_shows_in_debug() {
        let caller = Caller::Presented {
            key: Some("sk-secret-123".into()),
            tenant: Ok(None),
        };
        let shown = format!("{caller:?}");
        assert!(!shown.contains("sk-secret-123"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
    }
}
