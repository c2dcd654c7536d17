//! The Prometheus metric families sluice exports, registered once.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

use crate::buckets;

mod labels;

pub use labels::*;

/// The window percentiles exported, each its own gauge family (`p50` ... `max`), with the
/// quantile it reads.
pub const WINDOW_PERCENTILES: [(&str, f64); 6] = [
    ("p50", 0.5),
    ("p90", 0.9),
    ("p95", 0.95),
    ("p99", 0.99),
    ("p999", 0.999),
    ("max", 1.0),
];

/// Builds histograms with fixed bounds.
#[derive(Clone, Debug)]
pub struct Buckets(Vec<f64>);

impl MetricConstructor<Histogram> for Buckets {
    fn new_metric(&self) -> Histogram {
        Histogram::new(self.0.iter().copied())
    }
}

/// Every family, each registered in [`Metrics::new`].
#[derive(Debug)]
pub struct Metrics {
    /// Requests by outcome.
    pub requests: Family<RequestLabels, Counter>,
    /// What the caller waited for the last byte, per lane, group and tenant class.
    pub request_seconds: Family<ClientLabels, Histogram, Buckets>,
    /// What the caller waited for the first byte, per lane, group and tenant class.
    pub request_ttfb_seconds: Family<ClientLabels, Histogram, Buckets>,
    /// Time inside sluice before dispatch, per lane, group and tenant class.
    pub queue_seconds: Family<ClientLabels, Histogram, Buckets>,
    /// Upstream time to first byte.
    pub upstream_ttfb_seconds: Family<PairLabels, Histogram, Buckets>,
    /// Tokens by kind.
    pub tokens: Family<TokenLabels, Counter>,
    /// What answers cost, in micro-units of the catalog's currency.
    pub cost_micros: Family<CostLabels, Counter>,
    /// Attempts by outcome.
    pub attempts: Family<AttemptLabels, Counter>,
    /// Hedges by result.
    pub hedges: Family<HedgeLabels, Counter>,
    /// Retries by outcome.
    pub retries: Family<RetryLabels, Counter>,
    /// Each deployment's current concurrency limit.
    pub concurrency_limit: Family<LimitLabels, Gauge>,
    /// Requests in flight and queued per deployment and lane.
    pub admission: Family<LaneLabels, Gauge>,
    /// Requests the admission refused at arrival for their predicted wait, and those it
    /// accepted that then waited out their lane (mispredictions), per deployment.
    pub admission_refused: Family<RefusalLabels, Counter>,
    /// 1 for each deployment's current breaker state, 0 for the others.
    pub breaker: Family<BreakerLabels, Gauge>,
    /// Breaker openings and closings per deployment.
    pub breaker_transitions: Family<TransitionLabels, Counter>,
    /// Requests whose deadline ran out, by stage.
    pub deadlines: Family<DeadlineLabels, Counter>,
    /// Calls sluice held in its queue for the upstream's rate limit, per group and lane.
    pub rate_waits: Family<RateWaitLabels, Counter>,
    /// Answer-cache lookups by result.
    pub cache: Family<CacheLabels, Counter>,
    /// Requests of groups with prefix affinity, by what routed them.
    pub affinity: Family<AffinityLabels, Counter>,
    /// What answers served from the cache cost when first bought, in micro-units.
    pub cache_saved_micros: Family<GroupLabels, Counter>,
    /// Answers that reported no usage, settled from the estimate.
    pub usage_estimated: Family<UpstreamLabels, Counter>,
    /// Calls answered by a model with no price (served free by `unpriced = "free"`).
    pub unpriced: Family<UpstreamLabels, Counter>,
    /// Percentiles of the rotating windows, refreshed at each scrape: one family per
    /// percentile, in the order of [`WINDOW_PERCENTILES`].
    pub window_percentiles: [Family<WindowLabels, Gauge<f64, AtomicU64>>; 6],
    /// Requests being served now.
    pub inflight: Gauge,
    /// Tasks alive in the gateway's runtime, read at each scrape.
    pub runtime_tasks: Gauge,
    /// Usage-ledger rows committed.
    pub ledger_committed: Counter,
    /// Usage-ledger rows waiting to be written.
    pub ledger_pending: Gauge,
    /// Usage-ledger writes that failed and were retried.
    pub ledger_failures: Counter,
    /// Access-log lines dropped because its writer could not keep up.
    pub access_log_dropped: Counter,
    /// Fallbacks taken, by group, fallback and reason.
    pub fallbacks: Family<FallbackLabels, Counter>,
    /// Task-route decisions, by route, rule and group.
    pub routed: Family<RouteLabels, Counter>,
    /// Requests that declared a task no rule of their route names.
    pub unknown_tasks: Family<GroupLabels, Counter>,
    /// Scores automatic routers learnt from, by router and signal.
    pub router_feedback: Family<FeedbackLabels, Counter>,
    /// Saves of what automatic routers learnt that failed (each is tried again).
    pub router_save_failures: Counter,
    /// Semantic-cache lookups by group and result.
    pub semantic: Family<SemanticLabels, Counter>,
    /// Semantic entries' answers verified against the upstream's, by group and result.
    pub semantic_verifications: Family<SemanticLabels, Counter>,
    /// What the semantic cache saved (`result="saved"`: its hits' answers at what they cost
    /// when bought) and spent verifying (`result="verification"`), in micro-units, by group.
    pub semantic_micros: Family<SemanticLabels, Counter>,
    /// Each group's current estimate of the share of wrong answers among its semantic
    /// would-be hits.
    pub semantic_error_estimate: Family<GroupLabels, Gauge<f64, AtomicU64>>,
    /// 1 while a verified group has stopped verifying (it cannot certify any similarity).
    pub semantic_stopped: Family<GroupLabels, Gauge>,
    /// Prompt tokens and those the provider's cache served or wrote, per tenant.
    pub prompt_cache_tokens: Family<PromptCacheLabels, Counter>,
    /// What the provider's cache saved, and what writing to it cost beyond the input price.
    pub prompt_cache_micros: Family<PromptCacheLabels, Counter>,
    /// Sampled requests that did not share their tenant and group's prefix, by cause.
    pub prefix_churn: Family<ChurnLabels, Counter>,
    /// Requests whose normalisation failed, by group (they went as they came).
    pub normalise_failures: Family<GroupLabels, Counter>,
    /// Compression and progressive loading.
    pub context: crate::context::ContextMetrics,
    /// 1 while a kind of state shared through the cluster's Redis is degraded.
    pub cluster_degraded: Family<StateLabels, Gauge>,
    /// Commands to the cluster's Redis that failed, by the kind of state they served.
    pub cluster_errors: Family<StateLabels, Counter>,
    /// 1 while the ledger's store does not answer.
    pub store_degraded: Family<StoreLabels, Gauge>,
    /// Rows the ledger's writer holds that its store has not taken yet.
    pub ledger_backlog: Gauge,
    /// Of those, rows waiting in the writer's journal on the disk.
    pub ledger_journal: Gauge,
}

impl Metrics {
    /// Creates every family and registers it in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let llm = Buckets(buckets::llm_latency());
        let internal = Buckets(buckets::internal_latency());
        let m = Self {
            requests: Family::default(),
            request_seconds: Family::new_with_constructor(llm.clone()),
            request_ttfb_seconds: Family::new_with_constructor(llm.clone()),
            queue_seconds: Family::new_with_constructor(internal),
            upstream_ttfb_seconds: Family::new_with_constructor(llm),
            tokens: Family::default(),
            cost_micros: Family::default(),
            attempts: Family::default(),
            hedges: Family::default(),
            retries: Family::default(),
            concurrency_limit: Family::default(),
            admission: Family::default(),
            admission_refused: Family::default(),
            breaker: Family::default(),
            breaker_transitions: Family::default(),
            deadlines: Family::default(),
            rate_waits: Family::default(),
            cache: Family::default(),
            affinity: Family::default(),
            cache_saved_micros: Family::default(),
            usage_estimated: Family::default(),
            unpriced: Family::default(),
            window_percentiles: Default::default(),
            inflight: Gauge::default(),
            runtime_tasks: Gauge::default(),
            ledger_committed: Counter::default(),
            ledger_pending: Gauge::default(),
            ledger_failures: Counter::default(),
            access_log_dropped: Counter::default(),
            fallbacks: Family::default(),
            routed: Family::default(),
            unknown_tasks: Family::default(),
            router_feedback: Family::default(),
            router_save_failures: Counter::default(),
            semantic: Family::default(),
            semantic_verifications: Family::default(),
            semantic_micros: Family::default(),
            semantic_error_estimate: Family::default(),
            semantic_stopped: Family::default(),
            prompt_cache_tokens: Family::default(),
            prompt_cache_micros: Family::default(),
            prefix_churn: Family::default(),
            normalise_failures: Family::default(),
            context: crate::context::ContextMetrics::default(),
            cluster_degraded: Family::default(),
            cluster_errors: Family::default(),
            store_degraded: Family::default(),
            ledger_backlog: Gauge::default(),
            ledger_journal: Gauge::default(),
        };
        let r = registry.sub_registry_with_prefix("sluice");
        m.register_calls(r);
        m.register_policies(r);
        m.register_state(r);
        m.context.register(r);
        m
    }

    /// What clients and upstreams saw: requests, latencies, tokens, cost, attempts, retries.
    fn register_calls(&self, r: &mut Registry) {
        r.register(
            "requests",
            "Requests by lane, model group, upstream, status and error code",
            self.requests.clone(),
        );
        r.register(
            "request_duration_seconds",
            "What the client waited: from arrival to the last byte, by lane, group and tenant class",
            self.request_seconds.clone(),
        );
        r.register(
            "request_ttfb_seconds",
            "What the client waited: from arrival to the first byte, by lane, group and tenant class",
            self.request_ttfb_seconds.clone(),
        );
        r.register(
            "queue_duration_seconds",
            "Time inside sluice before the first upstream attempt, by lane, group and tenant class",
            self.queue_seconds.clone(),
        );
        r.register(
            "upstream_ttfb_seconds",
            "Upstream time to first byte, per attempt",
            self.upstream_ttfb_seconds.clone(),
        );
        r.register(
            "tokens",
            "Tokens by kind (prompt, completion, cached, cache_write)",
            self.tokens.clone(),
        );
        r.register(
            "cost_micros",
            "What answers cost, in micro-units of the price catalog's currency",
            self.cost_micros.clone(),
        );
        r.register(
            "upstream_attempts",
            "Upstream attempts by outcome",
            self.attempts.clone(),
        );
        r.register(
            "retries",
            "Retried attempts by outcome",
            self.retries.clone(),
        );
    }

    /// What the tail policies and billing did: limits, admission, breakers, deadlines, the
    /// answer cache, prefix affinity, estimates, hedges.
    fn register_policies(&self, r: &mut Registry) {
        r.register(
            "upstream_concurrency_limit",
            "Current adaptive concurrency limit per deployment",
            self.concurrency_limit.clone(),
        );
        r.register(
            "admission_requests",
            "Requests in flight and queued per deployment and lane",
            self.admission.clone(),
        );
        r.register(
            "admission_refused",
            "Requests refused at arrival for their predicted wait (reason=at_arrival) and accepted ones that then waited out their lane (reason=waited_out), per deployment",
            self.admission_refused.clone(),
        );
        r.register(
            "upstream_breaker_state",
            "Circuit breaker state per deployment: 1 for the current state",
            self.breaker.clone(),
        );
        r.register(
            "upstream_breaker_transitions",
            "Circuit breaker transitions per deployment, by the state entered (open, closed)",
            self.breaker_transitions.clone(),
        );
        r.register(
            "deadline_exceeded",
            "Requests whose deadline ran out, by the stage it ran out in",
            self.deadlines.clone(),
        );
        r.register(
            "rate_limit_waits",
            "Calls held in sluice's queue by the upstream's rate limit (its pacer, or a pause \
             after a 429), those whose deadline or lane ran out there included",
            self.rate_waits.clone(),
        );
        r.register(
            "answer_cache_requests",
            "Requests by what the exact answer cache did: hit, coalesced, miss, bypass",
            self.cache.clone(),
        );
        r.register(
            "prefix_affinity_requests",
            "Requests of groups with prefix affinity, by what chose the deployment: prefix, weight",
            self.affinity.clone(),
        );
        r.register(
            "answer_cache_saved_micros",
            "What answers served from the cache cost when first bought, in micro-units",
            self.cache_saved_micros.clone(),
        );
        r.register(
            "usage_estimated_calls",
            "Answers that reported no usage, settled from the estimate (prompt and answer bytes)",
            self.usage_estimated.clone(),
        );
        r.register(
            "unpriced_calls",
            "Calls answered by a model with no price, served free by unpriced = \"free\"",
            self.unpriced.clone(),
        );
        r.register(
            "hedges",
            "Hedged requests by result: won, lost, failed, cancelled, denied by the budget",
            self.hedges.clone(),
        );
        for ((name, _), family) in WINDOW_PERCENTILES.iter().zip(&self.window_percentiles) {
            r.register(
                format!("upstream_latency_window_{name}_seconds"),
                format!(
                    "The {name} of each upstream's attempts over the rotating latency window (an HDR histogram), per phase: from each attempt's own start"
                ),
                family.clone(),
            );
        }
    }

    /// The gateway's own state: requests in flight and tasks, the ledger, the access log,
    /// routing and its learning (then [`Metrics::register_caches`]).
    fn register_state(&self, r: &mut Registry) {
        r.register(
            "inflight_requests",
            "Requests being served now",
            self.inflight.clone(),
        );
        r.register(
            "runtime_tasks",
            "Tasks alive in the gateway's async runtime (connections, requests, detached work)",
            self.runtime_tasks.clone(),
        );
        r.register(
            "ledger_rows_committed",
            "Usage-ledger rows committed to its store",
            self.ledger_committed.clone(),
        );
        r.register(
            "ledger_rows_pending",
            "Usage-ledger rows handed over and not yet committed",
            self.ledger_pending.clone(),
        );
        r.register(
            "ledger_write_failures",
            "Usage-ledger writes that failed (each is retried until it lands)",
            self.ledger_failures.clone(),
        );
        r.register(
            "access_log_dropped_lines",
            "Access-log lines dropped because its writer could not keep up with requests",
            self.access_log_dropped.clone(),
        );
        r.register(
            "fallbacks",
            "Requests a group handed to its fallback, by reason: unavailable, quota, context_window, context_length, upstream_failed, rate_limited",
            self.fallbacks.clone(),
        );
        r.register(
            "routed_requests",
            "Task-route decisions by route, the rule that fired (or default) and the group chosen",
            self.routed.clone(),
        );
        r.register(
            "unknown_tasks",
            "Requests whose declared task no rule of their route names (the group label is the route)",
            self.unknown_tasks.clone(),
        );
        r.register(
            "router_feedback",
            "Scores automatic routers learnt from: explicit feedback, or an implicit signal (upstream_error, length, invalid_json, retried)",
            self.router_feedback.clone(),
        );
        r.register(
            "router_save_failures",
            "Saves of what automatic routers learnt to the store that failed (each is tried again)",
            self.router_save_failures.clone(),
        );
        self.register_caches(r);
    }

    /// The semantic and prompt caches, prompt shaping, the cluster's stores.
    fn register_caches(&self, r: &mut Registry) {
        r.register(
            "semantic_cache_lookups",
            "Semantic-cache lookups by group and result (hit, miss, refused by a guard, ineligible) and why",
            self.semantic.clone(),
        );
        r.register(
            "semantic_cache_verifications",
            "Semantic entries' answers verified against the upstream's (the verified mode), by group and result: agreed or differed (a measured error)",
            self.semantic_verifications.clone(),
        );
        r.register(
            "semantic_cache_micros",
            "What the semantic cache saved (result=saved: its hits' answers at what they cost when bought) and spent verifying (result=verification), in micro-units, by group: the net saving is saved less verification",
            self.semantic_micros.clone(),
        );
        r.register(
            "prompt_cache_tokens",
            "Prompt tokens (kind=prompt) and those the provider's cache served (cached) or wrote (cache_write), by tenant, group and upstream: the hit rate is cached over prompt",
            self.prompt_cache_tokens.clone(),
        );
        r.register(
            "prompt_cache_micros",
            "What the provider's prompt cache saved (kind=saved) and what its writes cost beyond the input price (write_premium), in micro-units, by tenant, group and upstream",
            self.prompt_cache_micros.clone(),
        );
        r.register(
            "normalise_failures",
            "Requests whose prompt normalisation or prompt_cache_key failed, by group: they went upstream as they came",
            self.normalise_failures.clone(),
        );
        r.register(
            "prefix_churn",
            "Sampled requests whose tools or system prompt did not share their tenant and group's recent prefix, by the cause seen (timestamp, date, uuid, request_id, whitespace, tool_order, key_order)",
            self.prefix_churn.clone(),
        );
        r.register(
            "semantic_cache_error_estimate",
            "The estimated share of wrong answers among a group's semantic would-be hits, from sampled verifications weighted by the inverse of their probability",
            self.semantic_error_estimate.clone(),
        );
        r.register(
            "semantic_cache_verification_stopped",
            "1 while a group in verified mode has stopped verifying: its evidence says no similarity can be served within its error bound, so its would-be hits are misses but for a trickle of one in a hundred, verified to notice a change",
            self.semantic_stopped.clone(),
        );
        r.register(
            "cluster_degraded",
            "1 while a kind of state shared through the cluster's Redis (budgets, pacing, directory) is degraded and does what [cluster] says instead",
            self.cluster_degraded.clone(),
        );
        r.register(
            "cluster_errors",
            "Commands to the cluster's Redis that failed or timed out, by the kind of state they served",
            self.cluster_errors.clone(),
        );
        r.register(
            "store_degraded",
            "1 while the ledger's store (PostgreSQL or SQLite) does not answer: admin writes are refused with 503, and what it keeps waits in the ledger writer's backlog",
            self.store_degraded.clone(),
        );
        r.register(
            "ledger_backlog",
            "Rows the ledger's writer holds that its store has not taken yet",
            self.ledger_backlog.clone(),
        );
        r.register(
            "ledger_journal",
            "Rows waiting in the ledger writer's journal on the disk while its store cannot answer (PostgreSQL)",
            self.ledger_journal.clone(),
        );
    }
}
