//! Upstream adapters: the [`Provider`] interface the gateway dispatches to, an
//! OpenAI-compatible adapter, an Azure OpenAI adapter, an Anthropic Messages adapter, a Google
//! Gemini adapter, and the SSE and usage parsing they share.
//!
//! Adapters speak OpenAI chat completions towards the gateway whatever the upstream speaks:
//! complete answers are OpenAI `chat.completion` JSON, streams are OpenAI SSE frames. Usage is
//! reported alongside, normalised, so the gateway never parses provider formats.

pub mod alarm;
pub mod anthropic;
pub mod azure;
pub mod bedrock;
pub mod embeddings;
pub mod eventstream;
pub mod gemini;
pub mod http;
pub mod openai;
pub mod params;
mod pump;
pub mod ratelimit;
pub mod replay;
pub mod sse;
pub mod timeout;
pub mod token;
pub mod usage;

use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use sluice_core::{ChatRequest, GatewayError, RequestId, Usage};
use tokio::time::Instant;

pub use anthropic::{Anthropic, AnthropicSettings};
pub use azure::{Azure, AzureSettings};
pub use gemini::{Gemini, GeminiSettings};
pub use http::HttpSettings;
pub use openai::{OpenAiCompat, OpenAiSettings};
pub use params::{KindParams, ProviderKind, ProviderParams};
pub use ratelimit::RateReport;
pub use timeout::WithTimeouts;

/// One call to one upstream.
#[derive(Clone, Debug)]
pub struct UpstreamCall {
    /// The client's request, shared between attempts.
    pub request: Arc<ChatRequest>,
    /// The model name the upstream knows.
    pub model: Arc<str>,
    /// The request id, forwarded upstream as `x-request-id`.
    pub request_id: RequestId,
    /// When the client's deadline runs out, if it set one; what is left of it is forwarded
    /// upstream as `x-sluice-timeout-ms`.
    pub deadline: Option<Instant>,
    /// Where the provider leaves what the answer said of its rate limits.
    pub rate_report: RateReport,
    /// The W3C trace context sent upstream, when the call is traced.
    pub trace: Option<TraceHeaders>,
}

/// The `traceparent` (naming the attempt's span as the parent) and the client's
/// `tracestate` an HTTP upstream is sent.
#[derive(Clone, Debug)]
pub struct TraceHeaders {
    /// `traceparent`.
    pub traceparent: ::http::HeaderValue,
    /// `tracestate`, when the client sent one.
    pub tracestate: Option<::http::HeaderValue>,
}

/// The header that carries a request's remaining time budget, in milliseconds: read from
/// clients, forwarded to upstreams.
pub const TIMEOUT_HEADER: &str = "x-sluice-timeout-ms";

/// [`TIMEOUT_HEADER`] as a header name, built at compile time (a lookup by `&str` parses the
/// name every time).
pub const TIMEOUT_HEADER_NAME: ::http::HeaderName = ::http::HeaderName::from_static(TIMEOUT_HEADER);

/// `x-request-id`: read from clients, returned to them, and sent upstream.
pub const REQUEST_ID_HEADER: ::http::HeaderName = ::http::HeaderName::from_static("x-request-id");

impl UpstreamCall {
    /// Whole milliseconds left of the deadline at `now` (zero once it has passed).
    pub fn remaining_ms(&self, now: Instant) -> Option<u64> {
        let left = self.deadline?.saturating_duration_since(now);
        Some(u64::try_from(left.as_millis()).unwrap_or(u64::MAX))
    }
}

/// A complete (non-streaming) answer.
#[derive(Clone, Debug)]
pub struct Completion {
    /// OpenAI `chat.completion` JSON.
    pub body: Bytes,
    /// Usage, when the upstream reported it.
    pub usage: Option<Usage>,
    /// When the first byte of the answer arrived.
    pub first_byte: Instant,
    /// The upstream's own answer, when the client spoke the upstream's API and is to get it
    /// as it came.
    pub native: Option<Bytes>,
}

/// One item of a streamed answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamEvent {
    /// An SSE frame (`data: ...\n\n`) to send to the client as is.
    Frame(Bytes),
    /// Usage, read from the stream; not sent to the client by itself.
    Usage(Usage),
    /// The upstream's own event as it came, for a client that spoke the upstream's API: it
    /// gets these rather than the frames (which still feed the answer cache).
    Native(Bytes),
}

/// A streamed answer: frames in order; an `Err` ends it.
pub type EventStream = BoxStream<'static, Result<StreamEvent, GatewayError>>;

/// What an upstream answered once it accepted the call.
pub enum UpstreamResponse {
    /// The whole answer.
    Complete(Completion),
    /// A stream whose status was 200; frames follow as they arrive.
    Stream(EventStream),
}

impl std::fmt::Debug for UpstreamResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Complete(c) => f.debug_tuple("Complete").field(c).finish(),
            Self::Stream(_) => f.write_str("Stream(..)"),
        }
    }
}

/// Seconds since the epoch, for a translated answer's `created` field.
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A client's own body (kept as its original, in the upstream's API) for the upstream's
/// `model`: as it came, only its model swapped.
pub(crate) fn as_it_came(raw: &[u8], model: &str) -> Result<serde_json::Value, GatewayError> {
    let mut v: serde_json::Value = serde_json::from_slice(raw).map_err(|e| {
        GatewayError::new(
            sluice_core::ErrorKind::Internal,
            format!("the client's own body no longer reads: {e}"),
        )
    })?;
    if let Some(obj) = v.as_object_mut() {
        obj.insert("model".into(), serde_json::Value::from(model));
    }
    Ok(v)
}

/// An upstream the gateway can call: a real provider over HTTP, or the simulator in-process.
pub trait Provider: Send + Sync + 'static {
    /// Sends one call. The future resolves once the upstream has accepted it (a stream) or
    /// answered it (a completion); failures are classified [`GatewayError`]s.
    fn call(
        &self,
        call: UpstreamCall,
    ) -> BoxFuture<'static, Result<UpstreamResponse, GatewayError>>;
}
