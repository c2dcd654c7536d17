//! What each step of the walk found, as typed outcomes, and the one place each is written
//! into the call's record. The steps return these (or, for what happens while an answer is
//! out, say them as they happen); no step writes a field of the record itself.

use std::sync::Arc;

use sluice_core::{
    AnswerFlaw, CacheLookup, FallbackTaken, GatewayError, Round, RouteTaken, SemanticLookup, Stage,
    TraceIds, Usage,
};
use sluice_routing::ModelGroup;
use tokio::time::Instant;

use super::Call;

/// Who is calling, as identification found it.
#[derive(Debug, Default)]
pub struct Identified {
    /// The API key's name, when one was sent.
    pub api_key: Option<Arc<str>>,
    /// The lane the request queues in.
    pub lane: Option<Arc<str>>,
    /// The tenant it is billed to.
    pub tenant: Option<Arc<str>>,
    /// The tenant's class, when it has one.
    pub class: Option<Arc<str>>,
    /// Its prompt's tokens, estimated.
    pub prompt_estimate: u64,
}

/// Where routing sent a request.
pub struct Chosen<'g> {
    /// The group it goes to first.
    pub group: &'g ModelGroup,
    /// When an automatic router chose, the other candidates in the order to fall back to.
    pub others: Vec<&'g ModelGroup>,
    /// What to record: the group, and the route or router that chose it.
    pub routed: Routed,
}

/// A request routing refused, with the group it named when that was the reason (a group
/// the caller's key may not use).
pub struct NotRouted {
    /// Why.
    pub error: GatewayError,
    /// The group it named, when it named one.
    pub group: Option<Arc<str>>,
}

/// Where routing sent the request.
#[derive(Debug)]
pub struct Routed {
    /// The model group.
    pub group: Arc<str>,
    /// The task route (or automatic router) that chose it, when one did.
    pub route: Option<RouteTaken>,
}

/// What shaping did to the prompt before it went upstream.
#[derive(Debug, Default)]
pub struct Shaping {
    /// The `prompt_cache_key` sluice added.
    pub prompt_cache_key: Option<Arc<str>>,
    /// Compressed from this many prompt tokens to that many.
    pub compressed: Option<(u64, u64)>,
}

impl Call {
    /// The client's trace, continued or begun.
    pub fn traced(&mut self, trace: TraceIds) {
        self.record.trace = Some(Arc::new(trace));
    }

    /// The request parsed: whether it asked for a stream.
    pub fn parsed(&mut self, stream: bool) {
        self.record.stream = stream;
    }

    /// The caller identified.
    pub fn identified(&mut self, who: Identified) {
        let r = &mut self.record;
        r.api_key = who.api_key;
        r.lane = who.lane;
        r.tenant = who.tenant;
        r.class = who.class;
        r.prompt_estimate = who.prompt_estimate;
    }

    /// The request routed.
    pub fn routed(&mut self, routed: Routed) {
        self.record.model_group = Some(routed.group);
        if routed.route.is_some() {
            self.record.route = routed.route;
        }
    }

    /// The call's deadline, when it has one.
    pub fn deadline(&mut self, deadline: Option<Instant>) {
        self.record.timings.deadline = deadline;
    }

    /// Normalisation reordered the tools (or not) and moved `lines` system-prompt lines.
    pub fn normalised(&mut self, tools: bool, lines: u32) {
        self.record.normalised = Some((tools, lines));
    }

    /// What the answer cache did.
    pub fn looked_up(&mut self, lookup: CacheLookup) {
        self.record.cache = Some(lookup);
    }

    /// What the semantic cache did.
    pub fn looked_up_by_meaning(&mut self, what: SemanticLookup) {
        self.record.semantic = Some(what);
    }

    /// Whether a semantic verification found the entry's answer right.
    pub fn verified(&mut self, right: bool) {
        self.record.semantic_verified = Some(right);
    }

    /// An answer served from a cache, which cost `micros` when it was bought.
    pub fn saved(&mut self, micros: u64) {
        self.record.cache_saved_micros = micros;
    }

    /// What shaping did.
    pub fn shaped(&mut self, shaping: Shaping) {
        if let Some(key) = shaping.prompt_cache_key {
            self.record.prompt_cache_key = Some(key);
        }
        if let Some((before, after)) = shaping.compressed {
            self.record.compressed = Some((before, after));
            // What an attempt that reports no usage is billed from: the prompt as sent.
            self.record.prompt_estimate = after;
        }
    }

    /// A deployment picked, by prefix affinity or not.
    pub fn picked(&mut self, by_prefix: bool) {
        self.record.by_prefix = Some(by_prefix);
    }

    /// The call left group `from` for `to` for `reason` (after the attempts so far).
    pub fn fell_back(&mut self, from: &Arc<str>, to: &Arc<str>, reason: &'static str) {
        let after = self.record.attempts.len();
        self.record.fallbacks.push(FallbackTaken {
            from: from.clone(),
            to: to.clone(),
            reason,
            after,
        });
        self.record.model_group = Some(to.clone());
    }

    /// What set the hedge's time (`None`: nothing yet).
    pub fn hedge_rule(&mut self, rule: Option<&'static str>) {
        self.record.hedge_rule = rule;
    }

    /// The hedge budget refused a hedge the latency window asked for.
    pub fn hedge_denied(&mut self) {
        self.record.hedge_denied = true;
    }

    /// The retry budget refused a retry.
    pub fn retry_denied(&mut self) {
        self.record.retry_denied = true;
    }

    /// Admission held the call back for the upstream's rate limit.
    pub fn rate_waited(&mut self) {
        self.record.rate_waited = true;
    }

    /// Sluice refused the call while the upstream answered far slower than usual.
    pub fn slow_held(&mut self) {
        self.record.slow_held = true;
    }

    /// The call joins `limiter`'s queue now: should its deadline run out there, whether the
    /// upstream's rate limit held the queue meanwhile decides whose wait it was.
    pub fn queues_at(&mut self, limiter: &Arc<sluice_routing::limiter::Limiter>) {
        self.queued = Some((limiter.clone(), Instant::now()));
    }

    /// The call left the queue it joined (admitted or refused).
    pub fn left_queue(&mut self) {
        self.queued = None;
    }

    /// An attempt was answered 429.
    pub fn upstream_429(&mut self) {
        self.record.upstream_429s += 1;
    }

    /// The usage the answer reported (so far, for a stream).
    pub fn used(&mut self, usage: Usage) {
        self.record.usage = Some(usage);
    }

    /// The usage the winning attempt's complete answer reported, or none.
    pub fn set_usage(&mut self, usage: Option<Usage>) {
        self.record.usage = usage;
    }

    /// A round of progressive loading answered; `total` is every round's usage so far, and
    /// `estimated` says this round reported none and was billed from its estimate.
    pub fn round(&mut self, round: Round, total: Usage, estimated: bool) {
        if estimated {
            self.record.usage_estimated = true;
        }
        self.record.rounds.push(round);
        // Should a later round fail, the call still owes what the earlier ones used.
        self.record.usage = Some(total);
    }

    /// What is wrong with the answer, for the automatic router to learn.
    pub fn flawed(&mut self, flaw: Option<AnswerFlaw>) {
        self.record.flaw = flaw;
    }

    /// The deadline ran out: the stage it ran out in, noted in the record.
    pub fn ran_out(&mut self) -> Stage {
        let stage = self.record.stage();
        self.record.deadline_stage = Some(stage);
        // Out of time in a queue the provider's rate limit held back: the provider's wait;
        // in one held while the upstream answered far slower than usual: its slowness.
        if let Some((limiter, since)) = self.queued.take() {
            self.record.rate_waited |= limiter.rate_held_since(since);
            self.record.slow_held |= limiter.upstream_slower();
        }
        stage
    }

    /// Answers the call with error `e` and settles it; its ledger row when it is handed
    /// back to its caller.
    pub fn refused(mut self, e: &GatewayError) -> Option<sluice_ledger::Entry> {
        self.record.retry_after = e.retry_after;
        // The status the client got, in its API (529 for a Messages client sluice shed).
        let status = self.dialect().status(e);
        self.finish(status, Some(e.kind))
    }
}
