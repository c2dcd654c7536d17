//! The label sets of the metric families: one struct a family's dimensions.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;

/// Labels of per-request counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The lane it waited in (`-` before one was chosen).
    pub lane: Arc<str>,
    /// Model group (`-` before routing).
    pub group: Arc<str>,
    /// Upstream that answered (`-` when none did).
    pub upstream: Arc<str>,
    /// HTTP status sent to the client.
    pub status: u16,
    /// `ok`, or the error code.
    pub code: &'static str,
}

/// Labels of fallbacks between groups.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FallbackLabels {
    /// The group that could not take the request.
    pub group: Arc<str>,
    /// The group that took it next.
    pub to: Arc<str>,
    /// `unavailable`, `quota`, `context_window` or `context_length`.
    pub reason: &'static str,
}

/// Labels of task-route decisions.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    /// The route (the model name the client sent).
    pub route: Arc<str>,
    /// The rule that fired, or `default`.
    pub rule: Arc<str>,
    /// The group it chose.
    pub group: Arc<str>,
}

/// Labels of what an automatic router learnt from.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FeedbackLabels {
    /// The router.
    pub route: Arc<str>,
    /// `explicit` (`POST /v1/feedback`), or an implicit one: `upstream_error`, `length`,
    /// `invalid_json`, `retried`.
    pub signal: &'static str,
}

/// Labels of the semantic cache's lookups.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SemanticLabels {
    /// The model group.
    pub group: Arc<str>,
    /// `hit`, `miss`, `refused` (the nearest entry differed in a number, negation or
    /// entity), `verify`, `unverified` (the route's verification budget was spent) or
    /// `ineligible` (not matched by meaning).
    pub result: &'static str,
    /// For `refused`: `number`, `negation`, `entity`; for `ineligible`: why; else empty.
    pub why: &'static str,
}

/// Labels of per-(group, upstream, mode) series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PairLabels {
    /// Model group.
    pub group: Arc<str>,
    /// Upstream.
    pub upstream: Arc<str>,
    /// `stream` or `complete`: a complete answer's first byte is its last.
    pub mode: &'static str,
}

/// Labels of a store's series: which store.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StoreLabels {
    /// `postgresql` or `sqlite` (the ledger's store).
    pub store: &'static str,
}

/// Labels of the cluster's series: the kind of shared state.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    /// `budgets`, `pacing` or `directory`.
    pub state: &'static str,
}

/// Labels of per-group series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GroupLabels {
    /// Model group (`-` before routing).
    pub group: Arc<str>,
}

/// Labels of token counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TokenLabels {
    /// Model group.
    pub group: Arc<str>,
    /// Upstream.
    pub upstream: Arc<str>,
    /// `prompt`, `completion`, `cached` or `cache_write`.
    pub kind: &'static str,
}

/// Labels of the prompt-cache counters: per tenant (`-` for none), group and upstream.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PromptCacheLabels {
    /// The tenant.
    pub tenant: Arc<str>,
    /// Model group.
    pub group: Arc<str>,
    /// Upstream.
    pub upstream: Arc<str>,
    /// Tokens: `prompt`, `cached` or `cache_write`; money: `saved` or `write_premium`.
    pub kind: &'static str,
}

/// Labels of the prefix-churn counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ChurnLabels {
    /// The tenant (`-` for none).
    pub tenant: Arc<str>,
    /// Model group.
    pub group: Arc<str>,
    /// What parted the prefixes: `timestamp`, `date`, `uuid`, `request_id`, `whitespace`,
    /// `tool_order`, `key_order`.
    pub cause: &'static str,
}

/// Labels of the cost counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CostLabels {
    /// Model group.
    pub group: Arc<str>,
    /// Upstream.
    pub upstream: Arc<str>,
}

/// Labels of attempt counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AttemptLabels {
    /// Upstream.
    pub upstream: Arc<str>,
    /// `ok`, `cancelled`, or the error code.
    pub outcome: &'static str,
}

/// Labels of the hedge counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HedgeLabels {
    /// Model group.
    pub group: Arc<str>,
    /// `won` (the hedge answered first), `lost`, `failed`, `cancelled` (the client left), or
    /// `denied` (slow enough to hedge, but the budget was spent).
    pub result: &'static str,
}

/// Labels of the concurrency-limit gauges.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimitLabels {
    /// Model group.
    pub group: String,
    /// Upstream.
    pub upstream: String,
}

/// Labels of the admission gauges.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LaneLabels {
    /// Model group.
    pub group: String,
    /// Upstream.
    pub upstream: String,
    /// Lane.
    pub lane: String,
    /// `inflight` or `queued`.
    pub state: &'static str,
}

/// Labels of the admission's refusals.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    /// Model group.
    pub group: String,
    /// Upstream.
    pub upstream: String,
    /// `at_arrival` (its predicted wait was too long) or `waited_out` (accepted, then its
    /// wait ran out: a misprediction).
    pub reason: &'static str,
}

/// Labels of the breaker gauges.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BreakerLabels {
    /// Model group.
    pub group: String,
    /// Upstream.
    pub upstream: String,
    /// `closed`, `open` or `half_open`.
    pub state: &'static str,
}

/// Labels of the breaker transition counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransitionLabels {
    /// Model group.
    pub group: String,
    /// Upstream.
    pub upstream: String,
    /// `open` or `closed`: the state it went to.
    pub to: &'static str,
}

/// Labels of the deadline counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DeadlineLabels {
    /// Model group.
    pub group: Arc<str>,
    /// Where the deadline ran out: `queue`, `upstream`, `retry` or `stream`.
    pub stage: &'static str,
}

/// Labels of the counter of calls held for the upstream's rate limit.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RateWaitLabels {
    /// Model group.
    pub group: Arc<str>,
    /// The lane it waited in (`-` for none).
    pub lane: Arc<str>,
}

/// Labels of the answer-cache counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CacheLabels {
    /// Model group.
    pub group: Arc<str>,
    /// `hit`, `coalesced`, `miss` or `bypass`.
    pub result: &'static str,
}

/// Labels of the prefix-affinity counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AffinityLabels {
    /// Model group.
    pub group: Arc<str>,
    /// `prefix` (a remembered prefix chose the deployment) or `weight`.
    pub routed: &'static str,
}

/// Labels of the retry counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RetryLabels {
    /// Model group.
    pub group: Arc<str>,
    /// How the retry ended: `ok`, or the error code, or `lost`/`cancelled`; `denied` for a
    /// retry the budget refused.
    pub outcome: &'static str,
}

/// Labels of counters per (model group, upstream).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UpstreamLabels {
    /// Model group.
    pub group: Arc<str>,
    /// Upstream.
    pub upstream: Arc<str>,
}

/// Labels of the window-percentile gauges (one family per percentile, so that no gauge
/// carries the `quantile` label Prometheus keeps for summaries).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WindowLabels {
    /// Model group.
    pub group: String,
    /// Upstream.
    pub upstream: String,
    /// `stream` or `complete`.
    pub mode: &'static str,
    /// `ttfb` or `total`.
    pub phase: &'static str,
}

/// Labels of what callers waited for: per lane, model group and tenant class, each from the
/// configuration, so the series are as few as it is long.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClientLabels {
    /// The lane (`-` before one was chosen).
    pub lane: Arc<str>,
    /// Model group (`-` before routing).
    pub group: Arc<str>,
    /// The tenant's class (`-` for none).
    pub class: Arc<str>,
}
