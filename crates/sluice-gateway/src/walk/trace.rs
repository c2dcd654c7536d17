//! The trace context at the walk's edges: the client's `traceparent` and `tracestate` read
//! when a traced call opens, and the W3C headers each attempt sends upstream (its own span
//! as the parent, the client's `tracestate` unchanged).

use std::sync::Arc;

use http::{HeaderMap, HeaderValue};
use sluice_core::TraceIds;
use sluice_providers::TraceHeaders;
use sluice_trace::Tracer;

use super::call::Call;

/// Gives the call its trace: the client's, continued, or a new one.
pub fn begin(tracer: &Tracer, call: &mut Call, headers: &HeaderMap) {
    let parent = headers.get("traceparent").map(HeaderValue::as_bytes);
    let state = headers.get("tracestate").map(HeaderValue::as_bytes);
    call.record_mut().trace = Some(Arc::new(tracer.begin(parent, state)));
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
