//! Traces: which calls are traced ([`sample`]), the W3C trace context read from clients and
//! sent upstream ([`w3c`]), the spans a kept call makes ([`spans`]), and the OTLP exporter
//! that sends them off the request path ([`export`]).
//!
//! A call's spans are built from its record once it has ended, so a trace can be kept for
//! how the call ended (it failed, or an SLO judged it bad) whatever its head sampling said,
//! and a call that is not kept costs nothing but its ids.

pub mod export;
pub mod sample;
pub mod spans;
pub mod w3c;

use std::sync::Arc;

use sluice_core::{CallRecord, TraceIds};
use tokio::time::Instant;

pub use export::{ExportConfig, Exporter, Protocol, StartError, Tally};
pub use sample::{Kept, Sampler};
pub use spans::{Upstream, Upstreams};

/// Tracing as the gateway uses it: the sampler, and the exporter kept calls go to.
#[derive(Debug)]
pub struct Tracer {
    sampler: Sampler,
    exporter: Exporter,
}

impl Tracer {
    /// A tracer sampling with `sampler` and exporting to `exporter`.
    pub fn new(sampler: Sampler, exporter: Exporter) -> Self {
        Self { sampler, exporter }
    }

    /// The trace of a call that arrived with these `traceparent` and `tracestate` headers:
    /// the client's trace, continued, or a new one; `seed` gives the new ids (random bits).
    pub fn begin(
        &self,
        traceparent: Option<&[u8]>,
        tracestate: Option<&[u8]>,
        seed: u128,
    ) -> TraceIds {
        let parent = traceparent.and_then(|t| w3c::parse(t, tracestate));
        let span_id = sluice_core::trace::mix(seed as u64 ^ 0x5EED).max(1);
        match parent {
            Some(p) => TraceIds {
                trace_id: p.trace_id,
                span_id,
                parent: Some(p.span_id),
                sampled: self.sampler.head(p.trace_id, Some(p.sampled)),
                state: p.state.map(Arc::from),
            },
            None => {
                let trace_id = seed.max(1);
                TraceIds {
                    trace_id,
                    span_id,
                    parent: None,
                    sampled: self.sampler.head(trace_id, None),
                    state: None,
                }
            }
        }
    }

    /// Decides, for a call that ended as `record` says (and was or was not judged bad by an
    /// SLO), whether its trace is kept, and queues it when it is; returns why it was kept.
    pub fn settle(&self, record: &CallRecord, over_slo: bool, now: Instant) -> Option<Kept> {
        let ids = record.trace.as_deref()?;
        let kept = self.sampler.keep(record, ids.sampled, over_slo)?;
        self.exporter.send(record, kept, now);
        Some(kept)
    }

    /// Sends what is queued and waits up to `wait` for it (at shutdown).
    pub fn close(&self, wait: std::time::Duration) {
        self.exporter.close(wait);
    }
}
