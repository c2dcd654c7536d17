//! The trace context at the walk's edges: the client's `traceparent` and `tracestate` read
//! when a traced call opens, and the W3C headers each attempt sends upstream (its own span
//! as the parent, the client's `tracestate` unchanged).

use http::HeaderValue;
use sluice_core::TraceIds;
use sluice_providers::TraceHeaders;
use sluice_trace::Tracer;

/// The call's trace: the client's (its `traceparent` and `tracestate`), continued, or a new
/// one.
pub fn begin(tracer: &Tracer, parent: Option<&[u8]>, state: Option<&[u8]>) -> TraceIds {
    tracer.begin(parent, state)
}

/// The headers attempt `attempt` of a traced call sends upstream.
pub fn upstream(ids: &TraceIds, attempt: usize) -> Option<TraceHeaders> {
    let parent = sluice_trace::w3c::traceparent(ids.trace_id, ids.attempt(attempt), ids.sampled);
    Some(TraceHeaders {
        traceparent: HeaderValue::from_bytes(&parent).ok()?,
        tracestate: ids
            .state
            .as_deref()
            .and_then(|s| HeaderValue::from_str(s).ok()),
    })
}
