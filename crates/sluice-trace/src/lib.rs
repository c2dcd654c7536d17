//! Traces: which calls are traced ([`sample`]), the W3C trace context read from clients and
//! sent upstream ([`w3c`]), the spans a kept call makes ([`spans`]), and the OTLP exporter
//! that sends them off the request path ([`export`]).
//!
//! A call's spans are built from its record once it has ended, so a trace can be kept for
//! how the call ended (it failed, or an SLO judged it bad) whatever its head sampling said,
//! and a call that is not kept costs nothing but its ids.

pub mod export;
pub mod genai;
pub mod sample;
pub mod spans;
pub mod w3c;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sluice_core::trace::mix;
use sluice_core::{CallRecord, TraceIds};
use tokio::time::Instant;

pub use export::{ExportConfig, Exporter, Protocol, StartError, Tally};
pub use sample::{Kept, Sampler};
pub use spans::{Upstream, Upstreams};

/// Tracing as the gateway uses it: the sampler, the exporter kept calls go to, and where new
/// ids come from.
#[derive(Debug)]
pub struct Tracer {
    sampler: Sampler,
    exporter: Exporter,
    /// Random bits drawn once; each new id mixes them with the next count, so ids are
    /// unique within the process (the mix is a bijection) and spread like random ones.
    seed: [u64; 3],
    next: AtomicU64,
}

impl Tracer {
    /// A tracer sampling with `sampler` and exporting to `exporter`; `seed`: random bits
    /// the new ids are drawn from.
    pub fn new(sampler: Sampler, exporter: Exporter, seed: u128) -> Self {
        let (hi, lo) = ((seed >> 64) as u64, seed as u64);
        Self {
            sampler,
            exporter,
            seed: [mix(hi), mix(lo), mix(hi ^ lo ^ 0x5EED)],
            next: AtomicU64::new(0),
        }
    }

    /// A new trace id and span id.
    fn fresh(&self) -> (u128, u64) {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let [a, b, c] = self.seed;
        let trace = (u128::from(mix(a ^ n)) << 64) | u128::from(mix(b ^ n));
        (trace.max(1), mix(c ^ n).max(1))
    }

    /// The trace of a call that arrived with these `traceparent` and `tracestate` headers:
    /// the client's trace, continued, or a new one.
    pub fn begin(&self, traceparent: Option<&[u8]>, tracestate: Option<&[u8]>) -> TraceIds {
        let parent = traceparent.and_then(|t| w3c::parse(t, tracestate));
        let (fresh_trace, span_id) = self.fresh();
        match parent {
            Some(p) => TraceIds {
                trace_id: p.trace_id,
                span_id,
                parent: Some(p.span_id),
                sampled: self.sampler.head(p.trace_id, Some(p.sampled)),
                state: p.state.map(Arc::from),
            },
            None => {
                let trace_id = fresh_trace;
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
