//! Who hears of a finished call: telemetry (metrics, percentile windows), the SLO judges,
//! the tracer, the incident explainer's ring of recent calls, the access log and the record
//! sinks. One handle, told once per call as it settles.

pub mod recent;
pub mod slo;

use std::sync::Arc;

use sluice_core::CallRecord;
use sluice_telemetry::Telemetry;
use tokio::time::Instant;

pub use recent::Recent;
pub use slo::{Judged, export_objectives};

/// A function told about every finished call (the demo and tests collect records with it).
pub type RecordSink = Arc<dyn Fn(&CallRecord) + Send + Sync>;

/// The observers of finished calls.
pub struct Observers {
    /// Metrics and percentile windows.
    pub(crate) telemetry: Arc<Telemetry>,
    /// One line per finished request, when configured.
    pub(crate) access_log: Option<sluice_telemetry::AccessLog>,
    /// Told about every finished call.
    pub(crate) sinks: Vec<RecordSink>,
    /// The last calls, for the incident explainer (`None`: kept none).
    pub(crate) recent: Option<Recent>,
    /// The SLOs every finished call is judged by.
    pub(crate) slos: Vec<Judged>,
    /// Tracing, when calls are traced.
    pub(crate) traces: Option<sluice_trace::Tracer>,
}

impl std::fmt::Debug for Observers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observers")
            .field("slos", &self.slos.len())
            .field("sinks", &self.sinks.len())
            .finish_non_exhaustive()
    }
}

impl Observers {
    /// Whether any SLO judges calls (only then is an upstream's 429 pause looked up).
    pub(crate) fn judges(&self) -> bool {
        !self.slos.is_empty()
    }

    /// Tells every observer of the finished `record`; `cooling` says whether its upstream
    /// was pausing after a 429 as it ended (what an SLO's culprit reads).
    pub(crate) fn settled(&self, record: &CallRecord, cooling: bool) {
        self.telemetry.observe(record);
        let over_slo = self.judges() && self.judge_slos(record, cooling);
        if let Some(t) = &self.traces
            && let Some(kept) = t.settle(record, over_slo, Instant::now())
        {
            self.telemetry.trace_kept(kept.label());
        }
        if let Some(recent) = &self.recent {
            recent.push(record);
        }
        if let Some(log) = &self.access_log {
            log.log(record);
        }
        for sink in &self.sinks {
            sink(record);
        }
    }

    /// Counts a batch job that ended as `end` as an event of each batch-window SLO (once:
    /// only the gateway whose write ended the job tells).
    pub(crate) fn job_ended(&self, end: sluice_telemetry::slo::JobEnd) {
        for judged in &self.slos {
            if let Some(v) = judged.slo.judge_job(end) {
                self.telemetry.slo_event(&judged.slo.name, v);
                judged.count(v);
            }
        }
    }

    /// Counts `record` as an event of each SLO that covers it; returns whether one judged it
    /// bad.
    fn judge_slos(&self, record: &CallRecord, cooling: bool) -> bool {
        let mut bad = false;
        for judged in &self.slos {
            let slo = &judged.slo;
            let facts = sluice_telemetry::slo::Facts::of(record, slo.measure(), cooling);
            if let Some(v) = slo.judge(&facts) {
                self.telemetry.slo_event(&slo.name, v);
                judged.count(v);
                bad |= v != sluice_telemetry::slo::Verdict::Good;
            }
        }
        bad
    }
}
