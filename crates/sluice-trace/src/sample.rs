//! Which calls are traced: a head decision when the call arrives (the client's sampled flag
//! when it sent one and the parent is honoured, else a share of trace ids), and a tail
//! decision when it ends (a call that failed, or that an SLO judged bad, is kept whatever
//! the head said). Spans are built only for kept calls, after they end, so the tail
//! decision costs nothing on the way.

use sluice_core::{AttemptOutcome, CallRecord};

/// The sampling policy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampler {
    /// The share of traces kept at the head, from 0 to 1.
    pub ratio: f64,
    /// Whether a client's sampled flag decides the head instead of the ratio.
    pub honour_parent: bool,
    /// Whether failed calls are kept whatever the head said.
    pub keep_errors: bool,
    /// Whether calls an SLO judged bad are kept whatever the head said.
    pub keep_over_slo: bool,
}

impl Default for Sampler {
    fn default() -> Self {
        Self {
            ratio: 0.01,
            honour_parent: true,
            keep_errors: true,
            keep_over_slo: true,
        }
    }
}

/// Why a call's trace was kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kept {
    /// Sampled at its head.
    Head,
    /// It failed: a 5xx or 429 to the client, or an attempt that failed.
    Error,
    /// An SLO judged it bad.
    OverSlo,
}

impl Kept {
    /// A short label for metrics and the span's `sluice.trace.kept`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Head => "head",
            Self::Error => "error",
            Self::OverSlo => "over_slo",
        }
    }
}

impl Sampler {
    /// The head decision for trace `trace_id`; `parent`: the client's sampled flag, when it
    /// sent a valid `traceparent`. The ratio reads the trace id's low 56 bits (random in
    /// ids made to the W3C spec), so every service sampling by ratio agrees on a trace.
    pub fn head(&self, trace_id: u128, parent: Option<bool>) -> bool {
        if let (true, Some(sampled)) = (self.honour_parent, parent) {
            return sampled;
        }
        if self.ratio >= 1.0 {
            return true;
        }
        if self.ratio <= 0.0 {
            return false;
        }
        let low = (trace_id as u64) & ((1 << 56) - 1);
        (low as f64) < self.ratio * (1u64 << 56) as f64
    }

    /// The tail decision for a call that ended as `record` says, sampled at its head or not,
    /// and judged bad by an SLO or not.
    pub fn keep(&self, record: &CallRecord, head: bool, over_slo: bool) -> Option<Kept> {
        if head {
            Some(Kept::Head)
        } else if self.keep_errors && failed(record) {
            Some(Kept::Error)
        } else if self.keep_over_slo && over_slo {
            Some(Kept::OverSlo)
        } else {
            None
        }
    }
}

/// Whether a call failed on the server's side or on an upstream's: a 5xx or 429 to the
/// client, or an attempt that failed (a retried or hedged call that still answered). A
/// client's own error (400, 401, 404, 413) and a client going away are not failures.
pub fn failed(record: &CallRecord) -> bool {
    record.status >= 500
        || record.status == 429
        || record
            .attempts
            .iter()
            .any(|a| matches!(a.outcome, AttemptOutcome::Failed(_)))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use sluice_core::{Attempt, ErrorKind, RequestId};
    use tokio::time::Instant;

    use super::*;

    fn record(status: u16) -> CallRecord {
        let mut r = CallRecord::new(
            RequestId::from_client_or_generate(Some("t")),
            Instant::now(),
        );
        r.status = status;
        r
    }

    #[test]
    fn the_ratio_keeps_its_share_of_trace_ids() {
        let s = Sampler {
            ratio: 0.25,
            ..Sampler::default()
        };
        let kept = (0..100_000u64)
            .filter(|i| s.head(u128::from(sluice_core::trace::mix(*i)), None))
            .count();
        assert!((24_000..26_000).contains(&kept), "{kept}");
        let none = Sampler { ratio: 0.0, ..s };
        let all = Sampler { ratio: 1.0, ..s };
        assert!((0..1000u128).all(|i| !none.head(i * 7919, None) && all.head(i * 7919, None)));
    }

    #[test]
    fn the_clients_flag_decides_when_the_parent_is_honoured() {
        let s = Sampler {
            ratio: 0.0,
            ..Sampler::default()
        };
        assert!(s.head(1, Some(true)));
        let all = Sampler { ratio: 1.0, ..s };
        assert!(!all.head(1, Some(false)));
        let own = Sampler {
            honour_parent: false,
            ..all
        };
        assert!(own.head(1, Some(false)));
    }

    #[test]
    fn failures_and_bad_slo_events_are_kept_whatever_the_head_said() {
        let s = Sampler {
            ratio: 0.0,
            ..Sampler::default()
        };
        assert_eq!(s.keep(&record(200), true, false), Some(Kept::Head));
        assert_eq!(s.keep(&record(200), false, false), None);
        assert_eq!(s.keep(&record(502), false, false), Some(Kept::Error));
        assert_eq!(s.keep(&record(429), false, false), Some(Kept::Error));
        assert_eq!(s.keep(&record(400), false, false), None);
        assert_eq!(s.keep(&record(499), false, false), None);
        assert_eq!(s.keep(&record(200), false, true), Some(Kept::OverSlo));
        let mut retried = record(200);
        let mut a = Attempt::start(Arc::from("a"), Instant::now());
        a.outcome = AttemptOutcome::Failed(ErrorKind::UpstreamServerError);
        retried.attempts.push(a);
        assert_eq!(s.keep(&retried, false, false), Some(Kept::Error));
        let quiet = Sampler {
            keep_errors: false,
            keep_over_slo: false,
            ..s
        };
        assert_eq!(quiet.keep(&record(502), false, true), None);
    }
}
