//! Metrics of the prompt's own shaping (compression and progressive loading, whose ratio of
//! tokens sent to tokens received is an SLI of its own), of the SLOs' events, of the
//! traces kept and exported, and of batch jobs' items.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Labels of the shaping counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShapingLabels {
    /// Model group.
    pub group: Arc<str>,
    /// `compress` or `progressive`.
    pub stage: &'static str,
    /// For tokens: `before` or `after`; for requests: what happened (`compressed`, `under`,
    /// `no_document`, `prefix_over_budget`, `no_budget`, `rewrite_failed`; `answered`,
    /// `insufficient`, `whole`, `stream`).
    pub kind: &'static str,
}

/// Labels of the SLO objective gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SloNameLabels {
    /// The SLO.
    pub slo: Arc<str>,
}

/// Labels of SLO events.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SloLabels {
    /// The SLO.
    pub slo: Arc<str>,
    /// `good` or `bad`.
    pub outcome: &'static str,
    /// Whose fault a bad event was (`none` for a good one).
    pub culprit: &'static str,
}

/// Labels of the trace counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TraceLabels {
    /// For kept traces, why (`head`, `error`, `over_slo`); for exports, what happened
    /// (`exported`, `failed`, `dropped`).
    pub outcome: &'static str,
}

/// Labels of the batch-item counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BatchLabels {
    /// `done`, `failed`, `cancelled` (withdrawn unsent), `requeued` (refused before reaching
    /// an upstream, queued again),
    /// `lost_claim` (another gateway had taken it), `store_failed` (its end could not be
    /// written; it is sent again).
    pub outcome: &'static str,
}

/// The shaping families.
#[derive(Clone, Debug, Default)]
pub struct ContextMetrics {
    /// Estimated prompt tokens of shaped requests before shaping and as sent.
    pub tokens: Family<ShapingLabels, Counter>,
    /// Requests over a budget or holding a long document, by what shaping did with them.
    pub requests: Family<ShapingLabels, Counter>,
    /// Calls made by progressive loading's rounds, the first included.
    pub rounds: Family<ShapingLabels, Counter>,
    /// SLO events by verdict and culprit.
    pub slo_events: Family<SloLabels, Counter>,
    /// Each SLO's objective: the share of good events it promises.
    pub slo_objective: Family<SloNameLabels, Gauge<f64, AtomicU64>>,
    /// Traces kept, by why.
    pub traces_kept: Family<TraceLabels, Counter>,
    /// Kept traces by what became of them.
    pub traces: Family<TraceLabels, Counter>,
    /// Batch items this gateway ran, by how each ended.
    pub batch_items: Family<BatchLabels, Counter>,
}

impl ContextMetrics {
    /// Registers the families under `r` (already prefixed `sluice`).
    pub fn register(&self, r: &mut Registry) {
        r.register(
            "context_tokens",
            "Estimated prompt tokens of requests compression or progressive loading shaped, before (kind=before) and as sent (after; every round summed): the ratio is the compression rate",
            self.tokens.clone(),
        );
        r.register(
            "context_requests",
            "Requests compression or progressive loading looked at, by stage and what it did (compressed, under, no_document, prefix_over_budget, no_budget, rewrite_failed; answered, insufficient, whole, stream)",
            self.requests.clone(),
        );
        r.register(
            "slo_events",
            "Requests judged by each configured SLO: good, or bad with its culprit (upstream_slow, upstream_rate_limited, upstream_errors, sluice_queueing, sluice_overhead); `sluice slo rules` turns them into burn-rate alerts",
            self.slo_events.clone(),
        );
        r.register(
            "slo_objective",
            "Each SLO's objective, the share of good events it promises (0.99): its error budget is 1 minus it",
            self.slo_objective.clone(),
        );
        r.register(
            "traces_kept",
            "Calls whose trace was kept, by why: head (sampled when it arrived), error (it failed), over_slo (an SLO judged it bad)",
            self.traces_kept.clone(),
        );
        r.register(
            "traces",
            "Kept traces by what became of them: exported (the collector took them), failed (it refused them, was unreachable or too slow), dropped (the exporter's queue was full)",
            self.traces.clone(),
        );
        r.register(
            "batch_items",
            "Batch-job items this gateway ran, by outcome: done, failed, cancelled (withdrawn unsent: their job was cancelled while they waited for a slot), requeued (refused before reaching an upstream, queued again), lost_claim (another gateway had taken it), store_failed (its end could not be written; it is sent again)",
            self.batch_items.clone(),
        );
        r.register(
            "context_rounds",
            "Upstream calls progressive loading made, by group (kind=round)",
            self.rounds.clone(),
        );
    }
}

impl crate::Telemetry {
    /// Exports SLO `slo`'s objective (`target`, the share of good events it promises).
    pub fn slo_objective(&self, slo: &Arc<str>, target: f64) {
        self.metrics()
            .context
            .slo_objective
            .get_or_create(&SloNameLabels { slo: slo.clone() })
            .set(target);
    }

    /// Counts a call whose trace was kept, and why.
    pub fn trace_kept(&self, why: &'static str) {
        self.metrics()
            .context
            .traces_kept
            .get_or_create(&TraceLabels { outcome: why })
            .inc();
    }

    /// Counts a batch item that ended as `outcome` (see [`BatchLabels`]).
    pub fn batch_item(&self, outcome: &'static str) {
        self.metrics()
            .context
            .batch_items
            .get_or_create(&BatchLabels { outcome })
            .inc();
    }

    /// Counts `n` kept traces that ended as `outcome` (`exported`, `failed`, `dropped`).
    pub fn traces(&self, outcome: &'static str, n: u64) {
        self.metrics()
            .context
            .traces
            .get_or_create(&TraceLabels { outcome })
            .inc_by(n);
    }
}
