//! The call record: one per request, the single source that metrics, logs and reports read.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::{ErrorKind, RequestId, Usage};

mod choices;
mod own;

pub use choices::{AutoChoice, CandidateEstimate, FallbackTaken, Round, RouteTaken};

/// The two latencies sluice tracks per upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// From dispatch to the upstream's first byte.
    Ttfb,
    /// From dispatch to the upstream's last byte.
    Total,
}

impl Phase {
    /// Both phases, in display order.
    pub const ALL: [Phase; 2] = [Phase::Ttfb, Phase::Total];

    /// A short label for metrics and JSON.
    pub fn label(self) -> &'static str {
        match self {
            Phase::Ttfb => "ttfb",
            Phase::Total => "total",
        }
    }
}

/// When each step of a call happened, on the monotonic (and, in tests, virtual) clock.
#[derive(Clone, Debug)]
pub struct Timings {
    /// Wall-clock time the request arrived, for logs.
    pub received_wall: SystemTime,
    /// The request arrived (headers read).
    pub received: Instant,
    /// The first attempt left for an upstream.
    pub dispatched: Option<Instant>,
    /// The first byte of the winning attempt arrived.
    pub first_byte: Option<Instant>,
    /// The response ended (last byte sent, error sent, or client gone).
    pub done: Option<Instant>,
    /// When the request's deadline runs out, if it has one.
    pub deadline: Option<Instant>,
    /// When the steps before dispatch ended, for traced calls.
    pub marks: crate::Marks,
}

impl Timings {
    /// Timings of a request that arrived `now`.
    pub fn start(now: Instant) -> Self {
        Self {
            received_wall: SystemTime::now(),
            received: now,
            dispatched: None,
            first_byte: None,
            done: None,
            deadline: None,
            marks: crate::Marks::default(),
        }
    }

    /// Time spent inside sluice before dispatch (parse, route, queue).
    pub fn queue(&self) -> Option<Duration> {
        Some(self.dispatched?.saturating_duration_since(self.received))
    }

    /// From dispatch to the upstream's first byte.
    pub fn upstream_ttfb(&self) -> Option<Duration> {
        Some(self.first_byte?.saturating_duration_since(self.dispatched?))
    }

    /// From dispatch to the end of the upstream's answer.
    pub fn upstream_total(&self) -> Option<Duration> {
        Some(self.done?.saturating_duration_since(self.dispatched?))
    }

    /// From arrival to the end.
    pub fn total(&self) -> Option<Duration> {
        Some(self.done?.saturating_duration_since(self.received))
    }

    /// The upstream latency of `phase`.
    pub fn upstream(&self, phase: Phase) -> Option<Duration> {
        match phase {
            Phase::Ttfb => self.upstream_ttfb(),
            Phase::Total => self.upstream_total(),
        }
    }
}

/// Where a call stands: what its deadline, when it runs out, ran out on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Waiting for a slot under an upstream's concurrency limit, before any attempt.
    Queue,
    /// Waiting for an upstream's first byte.
    Upstream,
    /// Between attempts: backing off, or queued again, before a retry.
    Retry,
    /// Streaming the answer to the client.
    Stream,
}

impl Stage {
    /// A short label for metrics and headers.
    pub fn label(self) -> &'static str {
        match self {
            Self::Queue => "queue",
            Self::Upstream => "upstream",
            Self::Retry => "retry",
            Self::Stream => "stream",
        }
    }
}

/// How one attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// Still running (the record was taken mid-call).
    Pending,
    /// Answered successfully.
    Ok,
    /// Failed.
    Failed(ErrorKind),
    /// Abandoned because the client left.
    Cancelled,
    /// Abandoned because another attempt of the same call answered first.
    Lost,
}

impl AttemptOutcome {
    /// A short label for metrics.
    pub fn label(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Ok => "ok",
            Self::Failed(k) => k.code(),
            Self::Cancelled => "cancelled",
            Self::Lost => "lost",
        }
    }
}

/// Why an attempt was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptKind {
    /// The first try.
    Primary,
    /// A copy sent because the try in flight was slow.
    Hedge,
    /// A new try after a failed one.
    Retry,
}

impl AttemptKind {
    /// A short label for metrics.
    pub fn label(self) -> &'static str {
        match self {
            Self::Primary => "primary",
            Self::Hedge => "hedge",
            Self::Retry => "retry",
        }
    }
}

/// One try at one upstream.
#[derive(Clone, Debug)]
pub struct Attempt {
    /// The upstream (deployment) name.
    pub upstream: Arc<str>,
    /// Why it was made.
    pub kind: AttemptKind,
    /// When it left.
    pub started: Instant,
    /// When its first byte arrived.
    pub first_byte: Option<Instant>,
    /// When it ended.
    pub ended: Option<Instant>,
    /// How it ended.
    pub outcome: AttemptOutcome,
}

impl Attempt {
    /// An attempt at `upstream` leaving `now`.
    pub fn start(upstream: Arc<str>, now: Instant) -> Self {
        Self {
            upstream,
            kind: AttemptKind::Primary,
            started: now,
            first_byte: None,
            ended: None,
            outcome: AttemptOutcome::Pending,
        }
    }
}

/// What the exact answer cache did for a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheLookup {
    /// Served from the cache: no upstream was asked.
    Hit,
    /// Served the answer of an identical request that was out when this one arrived, which
    /// it waited for: no upstream was asked for it.
    Coalesced,
    /// Not in the cache (or expired): the upstream was asked, and its answer is stored if it
    /// ends well.
    Miss,
    /// The client asked the cache to stand aside (`Cache-Control: no-store`, or `no-cache`,
    /// which still stores the fresh answer).
    Bypass,
    /// Served from the semantic cache: an earlier answer to a question that means the same
    /// (the record's `semantic` names the entry and its similarity).
    Semantic,
}

impl CacheLookup {
    /// Whether the answer came from the cache rather than an upstream.
    pub fn served(self) -> bool {
        matches!(self, Self::Hit | Self::Coalesced | Self::Semantic)
    }

    /// A short label for metrics and headers.
    pub fn label(self) -> &'static str {
        match self {
            Self::Hit => "hit",
            Self::Coalesced => "coalesced",
            Self::Miss => "miss",
            Self::Bypass => "bypass",
            Self::Semantic => "semantic",
        }
    }
}

/// Everything sluice knows about one request once it is over.
#[derive(Clone, Debug)]
pub struct CallRecord {
    /// The request id (echoed as `x-request-id`).
    pub request_id: RequestId,
    /// The model group the client asked for, once known.
    pub model_group: Option<Arc<str>>,
    /// The lane the request waited in.
    pub lane: Option<Arc<str>>,
    /// Who the request is for (fairness in queues, later quotas and billing).
    pub tenant: Option<Arc<str>>,
    /// Its tenant's class (`[tenants.NAME] class`), a label of few values for latency by
    /// kind of customer.
    pub class: Option<Arc<str>>,
    /// The name of the API key it came with.
    pub api_key: Option<Arc<str>>,
    /// What the call cost in micro-units, when its upstream model has a price: the answer
    /// plus `extra_cost_micros`.
    pub cost_micros: Option<u64>,
    /// The part of `cost_micros` spent on hedges and retries that did not answer (each
    /// priced as its prompt at the input price when the upstream worked on it: it timed
    /// out, lost the race, or was cancelled; refusals cost nothing).
    pub extra_cost_micros: u64,
    /// The prompt's size in tokens, estimated (a token per four bytes of text): what an
    /// attempt that did not answer is billed for.
    pub prompt_estimate: u64,
    /// The upstream that answered (the winning attempt's).
    pub upstream: Option<Arc<str>>,
    /// Whether the client asked for a stream.
    pub stream: bool,
    /// Every attempt, in the order they started.
    pub attempts: Vec<Attempt>,
    /// When each step happened.
    pub timings: Timings,
    /// The HTTP status the client got (499 when it left first).
    pub status: u16,
    /// The error, when the call failed.
    pub error: Option<ErrorKind>,
    /// Tokens used, when the upstream reported them.
    pub usage: Option<Usage>,
    /// Slow enough to hedge, but no hedge went (budget, no upstream free, deadline).
    pub hedge_denied: bool,
    /// An attempt failed in a way worth retrying, but the retry budget was spent.
    pub retry_denied: bool,
    /// Where the call was when its deadline ran out.
    pub deadline_stage: Option<Stage>,
    /// When the client was told to come back, on a refusal (`Retry-After`).
    pub retry_after: Option<std::time::Duration>,
    /// What the answer cache did, when one is kept.
    pub cache: Option<CacheLookup>,
    /// Whether prefix affinity chose the deployment (`Some(false)`: no remembered prefix did).
    pub by_prefix: Option<bool>,
    /// Served from the cache: what it cost when first bought, micro-units (what was saved).
    pub cache_saved_micros: u64,
    /// What the provider's prompt cache saved, micro-units: cached tokens at the full input
    /// price less their cached price (0 when unpriced).
    pub prompt_cache_saved_micros: u64,
    /// What writing to the provider's prompt cache cost beyond the full input price.
    pub prompt_cache_premium_micros: u64,
    /// What normalisation changed in the prompt: (tools reordered, system lines moved).
    pub normalised: Option<(bool, u32)>,
    /// 429s the upstream answered this call's attempts.
    pub upstream_429s: u32,
    /// It waited in sluice's queue for the upstream's rate limit (the pacer, or a pause
    /// after a 429), not only for a slot: its queueing is the provider's limit's.
    pub rate_waited: bool,
    /// Sluice refused it, or its deadline ran out, in a queue held while the limit read the
    /// upstream answering well above its usual latency: the upstream's slowness carried.
    pub slow_held: bool,
    /// The `prompt_cache_key` sluice added (the client sent none).
    pub prompt_cache_key: Option<Arc<str>>,
    /// Compression of an over-long prompt: its estimated tokens (before, after).
    pub compressed: Option<(u64, u64)>,
    /// Progressive loading of a long document: every round's call, first to last.
    pub rounds: Vec<Round>,
    /// The answer reported no usage: it was settled from the estimate (the prompt's
    /// estimated tokens and the output the call reserved), never at zero.
    pub usage_estimated: bool,
    /// The answering deployment's model has no price: the call cost nothing, by the
    /// configuration's explicit `unpriced = "free"`.
    pub unpriced: bool,
    /// When the client named a task route: the route and the rule that chose the group.
    pub route: Option<RouteTaken>,
    /// Each fallback the call took, in order.
    pub fallbacks: Vec<FallbackTaken>,
    /// What set the time its hedge was due (`quantile`, `body_quantile` or `deadline`),
    /// when its group hedges and a time was set.
    pub hedge_rule: Option<&'static str>,
    /// For a complete answer an automatic router chose: what is wrong with it as an answer.
    pub flaw: Option<AnswerFlaw>,
    /// What the semantic cache did with the request, when it is on.
    pub semantic: Option<SemanticLookup>,
    /// When the call verified a semantic entry: whether the entry's answer agreed with the
    /// upstream's.
    pub semantic_verified: Option<bool>,
    /// Its trace, when sluice traces calls.
    pub trace: Option<Arc<crate::TraceIds>>,
    /// What the answering upstream said of its answer, when it said it.
    pub response: Option<ResponseMeta>,
}

/// What an upstream said of its answer besides the answer: for traces.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResponseMeta {
    /// The answer's id (`chatcmpl-...`, `msg_...`).
    pub id: Option<Arc<str>>,
    /// The model that wrote it, as the upstream names it.
    pub model: Option<Arc<str>>,
    /// Why each choice stopped (`stop`, `length`, `tool_calls`...).
    pub finish_reasons: Vec<Arc<str>>,
}

/// What the semantic cache did with a request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SemanticLookup {
    /// Served entry `entry`'s answer, at `similarity`.
    Hit {
        /// The entry.
        entry: u64,
        /// Its similarity to the question.
        similarity: f64,
    },
    /// Nothing close enough; `refused`: the nearest entry's question differed in a number
    /// (`number`), a negation or an entity, and was passed over.
    Miss {
        /// Why the nearest entry was passed over, if it was.
        refused: Option<&'static str>,
        /// The best similarity among the entries it could have served.
        best: Option<f64>,
    },
    /// Would have been served entry `entry`'s answer, but was sent upstream to verify it
    /// (the verified mode), and served the upstream's.
    Verify {
        /// The entry.
        entry: u64,
        /// Its similarity to the question.
        similarity: f64,
    },
    /// Would have been verified against entry `entry`, but its route's verification budget
    /// was spent: neither served nor verified, sent upstream as a miss.
    Unverified {
        /// The entry.
        entry: u64,
        /// Its similarity to the question.
        similarity: f64,
    },
    /// Not matched by meaning: `temperature`, `n`, `tool_results`, `not_a_question`, or the
    /// client's `Cache-Control`.
    Ineligible(&'static str),
}

/// What can be seen to be wrong with an answer without reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnswerFlaw {
    /// It stopped at `max_tokens` (`finish_reason: "length"`).
    Length,
    /// JSON was asked for and its content is not JSON.
    InvalidJson,
}

/// Status recorded when the client disconnected before the answer ended (nginx's convention).
pub const CLIENT_CLOSED: u16 = 499;

impl CallRecord {
    /// A record for a request that arrived `now`.
    pub fn new(request_id: RequestId, now: Instant) -> Self {
        Self {
            request_id,
            model_group: None,
            lane: None,
            tenant: None,
            class: None,
            api_key: None,
            cost_micros: None,
            extra_cost_micros: 0,
            prompt_estimate: 0,
            upstream: None,
            stream: false,
            attempts: Vec::new(),
            timings: Timings::start(now),
            status: 0,
            error: None,
            usage: None,
            hedge_denied: false,
            retry_denied: false,
            deadline_stage: None,
            retry_after: None,
            cache: None,
            by_prefix: None,
            cache_saved_micros: 0,
            prompt_cache_saved_micros: 0,
            prompt_cache_premium_micros: 0,
            normalised: None,
            prompt_cache_key: None,
            upstream_429s: 0,
            rate_waited: false,
            slow_held: false,
            compressed: None,
            rounds: Vec::new(),
            usage_estimated: false,
            unpriced: false,
            route: None,
            fallbacks: Vec::new(),
            hedge_rule: None,
            flaw: None,
            semantic: None,
            semantic_verified: None,
            trace: None,
            response: None,
        }
    }

    /// Where the call stands now: streaming once a first byte came, queued before any
    /// attempt, waiting on an upstream while an attempt is out, else between attempts.
    pub fn stage(&self) -> Stage {
        if self.timings.first_byte.is_some() {
            Stage::Stream
        } else if self.attempts.is_empty() {
            Stage::Queue
        } else if self
            .attempts
            .iter()
            .any(|a| a.outcome == AttemptOutcome::Pending)
        {
            Stage::Upstream
        } else {
            Stage::Retry
        }
    }

    /// Whether the client got a successful answer.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status) && self.error.is_none()
    }
}

#[cfg(test)]
mod tests;
