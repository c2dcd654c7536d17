//! The gauges a scrape reads from the policies' own state: each deployment's admission and
//! breaker, each group's semantic error estimate, the usage ledger's writer.

use std::sync::Arc;

use sluice_tail::BreakerSnapshot;

use super::Telemetry;
use crate::metrics::{
    BreakerLabels, LaneLabels, LimitLabels, RefusalLabels, StateLabels, TransitionLabels,
};

impl Telemetry {
    /// Sets the admission gauges of one deployment: its limit, and (lane, in flight, queued).
    pub fn set_admission(
        &self,
        group: &str,
        upstream: &str,
        limit: usize,
        lanes: &[(&str, usize, usize)],
    ) {
        let m = &self.metrics;
        let key = LimitLabels {
            group: group.to_string(),
            upstream: upstream.to_string(),
        };
        m.concurrency_limit
            .get_or_create(&key)
            .set(i64::try_from(limit).unwrap_or(i64::MAX));
        for (lane, inflight, queued) in lanes {
            for (state, n) in [("inflight", inflight), ("queued", queued)] {
                let labels = LaneLabels {
                    group: group.to_string(),
                    upstream: upstream.to_string(),
                    lane: (*lane).to_string(),
                    state,
                };
                m.admission
                    .get_or_create(&labels)
                    .set(i64::try_from(*n).unwrap_or(i64::MAX));
            }
        }
    }

    /// Catches one deployment's refusal counters up to its admission's own counts: refused
    /// at arrival, and accepted then waited out.
    pub fn set_admission_refusals(
        &self,
        group: &str,
        upstream: &str,
        at_arrival: u64,
        waited_out: u64,
    ) {
        for (reason, total) in [("at_arrival", at_arrival), ("waited_out", waited_out)] {
            let labels = RefusalLabels {
                group: group.to_string(),
                upstream: upstream.to_string(),
                reason,
            };
            let c = self.metrics.admission_refused.get_or_create(&labels);
            c.inc_by(total.saturating_sub(c.get()));
        }
    }

    /// Sets the breaker metrics of one deployment: the state gauges (1 for its state, 0 for
    /// the others) and the transition counters.
    pub fn set_breaker(&self, group: &str, upstream: &str, b: &BreakerSnapshot) {
        let state = b.state.label();
        for s in ["closed", "open", "half_open"] {
            let labels = BreakerLabels {
                group: group.to_string(),
                upstream: upstream.to_string(),
                state: s,
            };
            self.metrics
                .breaker
                .get_or_create(&labels)
                .set(i64::from(s == state));
        }
        // The breaker keeps its own running counts; the counters catch up to them.
        for (to, total) in [("open", b.opened), ("closed", b.closed)] {
            let labels = TransitionLabels {
                group: group.to_string(),
                upstream: upstream.to_string(),
                to,
            };
            let c = self.metrics.breaker_transitions.get_or_create(&labels);
            c.inc_by(total.saturating_sub(c.get()));
        }
    }

    /// Sets a group's semantic error estimate, read at a scrape.
    pub fn set_semantic_error(&self, group: &Arc<str>, estimate: f64) {
        self.metrics
            .semantic_error_estimate
            .get_or_create(&crate::metrics::GroupLabels {
                group: group.clone(),
            })
            .set(estimate);
    }

    /// Sets whether `group` has stopped verifying (`sluice_semantic_cache_verification_stopped`).
    pub fn set_semantic_stopped(&self, group: &Arc<str>, stopped: bool) {
        self.metrics
            .semantic_stopped
            .get_or_create(&crate::metrics::GroupLabels {
                group: group.clone(),
            })
            .set(i64::from(stopped));
    }

    /// Sets the usage ledger's figures, read at a scrape: rows committed, rows waiting, and
    /// failed writes (the writer keeps the running counts; the counters catch up to them).
    pub fn set_ledger(&self, committed: u64, pending: u64, failures: u64) {
        let m = &self.metrics;
        m.ledger_committed
            .inc_by(committed.saturating_sub(m.ledger_committed.get()));
        m.ledger_failures
            .inc_by(failures.saturating_sub(m.ledger_failures.get()));
        m.ledger_pending
            .set(i64::try_from(pending).unwrap_or(i64::MAX));
    }

    /// Sets the count of tasks alive in the runtime (`sluice_runtime_tasks`).
    pub fn set_runtime_tasks(&self, tasks: usize) {
        self.metrics
            .runtime_tasks
            .set(i64::try_from(tasks).unwrap_or(i64::MAX));
    }

    /// Sets the cluster's series for the kind of state `state`: whether it is `degraded`, and
    /// the failed commands so far (`errors`).
    pub fn set_cluster(&self, state: &'static str, degraded: bool, errors: u64) {
        let m = &self.metrics;
        let labels = StateLabels { state };
        m.cluster_degraded
            .get_or_create(&labels)
            .set(i64::from(degraded));
        let c = m.cluster_errors.get_or_create(&labels);
        c.inc_by(errors.saturating_sub(c.get()));
    }

    /// The ledger writer's rows not yet in its store, and of those the journal's.
    pub fn set_ledger_backlog(&self, backlog: u64, journal: u64) {
        let g = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        self.metrics.ledger_backlog.set(g(backlog));
        self.metrics.ledger_journal.set(g(journal));
    }

    /// Whether the ledger's store `store` answers now.
    pub fn set_store(&self, store: &'static str, degraded: bool) {
        self.metrics
            .store_degraded
            .get_or_create(&crate::metrics::StoreLabels { store })
            .set(i64::from(degraded));
    }
}
