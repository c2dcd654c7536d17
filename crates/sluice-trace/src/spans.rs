//! A kept call's spans, built from its record after it ended: a server span for the call,
//! one span per step of the walk before dispatch (ingress, auth, route, cache), the queue
//! in its lane, each attempt as a GenAI client span (with its kind, outcome and fallback),
//! the waits between retries, the stream, and the settling. Attributes follow the
//! OpenTelemetry GenAI conventions where one exists (`gen_ai.*`, `server.*`, `error.type`),
//! and say sluice's own facts under `sluice.*`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use opentelemetry::trace::{
    Event, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use sluice_core::trace::STEP_BASE;
use sluice_core::{Attempt, AttemptKind, AttemptOutcome, CallRecord, TraceIds};
use tokio::time::Instant;

use crate::sample::Kept;

mod attrs;

use attrs::{ms, response_attrs, secs, text, usage_attrs};

/// What the spans say of an upstream (a deployment), looked up by its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    /// `sluice.provider`: the provider's name in the configuration.
    pub provider: Arc<str>,
    /// `gen_ai.provider.name`: the well-known name ([`crate::genai::provider_name`]).
    pub system: &'static str,
    /// `gen_ai.request.model`: the model name sent upstream.
    pub model: Arc<str>,
    /// `server.address` and `server.port`, for a provider reached over HTTP.
    pub server: Option<(Arc<str>, u16)>,
}

/// Every deployment's [`Upstream`], by deployment name.
pub type Upstreams = HashMap<Arc<str>, Upstream>;

/// The step numbers of the spans that are not attempts (see [`TraceIds::child`]).
mod step {
    pub const INGRESS: u64 = super::STEP_BASE;
    pub const AUTH: u64 = super::STEP_BASE + 1;
    pub const ROUTE: u64 = super::STEP_BASE + 2;
    pub const CACHE: u64 = super::STEP_BASE + 3;
    pub const QUEUE: u64 = super::STEP_BASE + 4;
    pub const STREAM: u64 = super::STEP_BASE + 5;
    pub const SETTLE: u64 = super::STEP_BASE + 6;
    /// Waits before retries: one per attempt, from here.
    pub const WAIT: u64 = super::STEP_BASE + 16;
}

/// The spans of `record`'s call, kept for `kept`, settled (every account, sink and log told)
/// at `settled`; none when the call was not traced.
pub fn of(
    record: &CallRecord,
    upstreams: &Upstreams,
    kept: Kept,
    settled: Instant,
) -> Vec<SpanData> {
    let Some(ids) = record.trace.as_deref() else {
        return Vec::new();
    };
    let t = &record.timings;
    let done = t.done.unwrap_or(settled);
    let b = Builder::new(record, ids);
    let mut spans = Vec::with_capacity(8 + record.attempts.len() * 2);
    spans.push(b.root(kept, done));

    // The steps before dispatch, each from the end of the one before to its own mark; the
    // step the call ended in (no mark) ends with the call.
    let m = &t.marks;
    let mut from = t.received;
    for (n, name, mark) in [
        (step::INGRESS, "ingress", m.parsed),
        (step::AUTH, "auth", m.identified),
        (step::ROUTE, "route", m.routed),
        (step::CACHE, "cache", m.looked_up),
    ] {
        let end = mark.unwrap_or(done);
        let mut attrs = Vec::new();
        match n {
            step::ROUTE => b.route_attrs(&mut attrs),
            step::CACHE => b.cache_attrs(&mut attrs),
            _ => {}
        }
        let failed_here = mark.is_none() && record.error.is_some();
        spans.push(b.internal(n, name, from, end, attrs, failed_here));
        match mark {
            Some(at) => from = at,
            None => break,
        }
    }

    if let Some(queued) = m.queued {
        let end = record.attempts.first().map_or(done, |a| a.started);
        let lane = record.lane.as_deref().unwrap_or("default");
        let attrs = vec![KeyValue::new("sluice.lane", lane.to_string())];
        let failed_here = record.attempts.is_empty() && record.error.is_some();
        spans.push(b.internal(
            step::QUEUE,
            &format!("queue {lane}"),
            queued,
            end,
            attrs,
            failed_here,
        ));
    }
    for (i, a) in record.attempts.iter().enumerate() {
        if a.kind == AttemptKind::Retry
            && let Some(before) = record.attempts[..i].iter().rev().find_map(|p| p.ended)
            && before < a.started
        {
            spans.push(b.internal(
                step::WAIT + i as u64,
                "retry wait",
                before,
                a.started,
                Vec::new(),
                false,
            ));
        }
        spans.push(b.attempt(i, a, upstreams, done));
    }
    if record.stream
        && let Some(first) = t.first_byte
    {
        let attrs = vec![KeyValue::new(
            "sluice.sent.first_byte_s",
            secs(first.saturating_duration_since(t.received)),
        )];
        spans.push(b.internal(step::STREAM, "stream", first, done, attrs, false));
    }
    spans.push(b.internal(
        step::SETTLE,
        "settle",
        done,
        settled.max(done),
        Vec::new(),
        false,
    ));
    spans
}

/// What every span of one call shares.
struct Builder<'a> {
    record: &'a CallRecord,
    ids: &'a TraceIds,
    trace_id: TraceId,
    state: TraceState,
    scope: InstrumentationScope,
}

impl<'a> Builder<'a> {
    fn new(record: &'a CallRecord, ids: &'a TraceIds) -> Self {
        let state = ids
            .state
            .as_deref()
            .and_then(|s| s.parse::<TraceState>().ok())
            .unwrap_or_default();
        Self {
            record,
            ids,
            trace_id: TraceId::from_bytes(ids.trace_id.to_be_bytes()),
            state,
            scope: InstrumentationScope::builder("sluice")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
        }
    }

    /// The wall-clock time of `at`: the arrival's wall time plus the monotonic time since.
    fn wall(&self, at: Instant) -> SystemTime {
        let t = &self.record.timings;
        t.received_wall + at.saturating_duration_since(t.received)
    }

    #[allow(clippy::too_many_arguments)]
    fn span(
        &self,
        span_id: u64,
        parent: Option<u64>,
        kind: SpanKind,
        name: String,
        (start, end): (Instant, Instant),
        attributes: Vec<KeyValue>,
        events: Vec<Event>,
        status: Status,
    ) -> SpanData {
        let mut ev = SpanEvents::default();
        ev.events = events;
        SpanData {
            span_context: SpanContext::new(
                self.trace_id,
                SpanId::from_bytes(span_id.to_be_bytes()),
                TraceFlags::SAMPLED,
                false,
                self.state.clone(),
            ),
            parent_span_id: parent.map_or(SpanId::INVALID, |p| SpanId::from_bytes(p.to_be_bytes())),
            parent_span_is_remote: parent.is_some() && parent == self.ids.parent,
            span_kind: kind,
            name: name.into(),
            start_time: self.wall(start),
            end_time: self.wall(end.max(start)),
            attributes,
            dropped_attributes_count: 0,
            events: ev,
            links: SpanLinks::default(),
            status,
            instrumentation_scope: self.scope.clone(),
        }
    }

    /// A step of the call: a child of its server span.
    fn internal(
        &self,
        n: u64,
        name: &str,
        start: Instant,
        end: Instant,
        attributes: Vec<KeyValue>,
        failed: bool,
    ) -> SpanData {
        let status = match (failed, self.record.error) {
            (true, Some(e)) => Status::error(e.code()),
            _ => Status::Unset,
        };
        let mut attributes = attributes;
        if let (true, Some(e)) = (failed, self.record.error) {
            attributes.push(KeyValue::new("error.type", e.code()));
        }
        self.span(
            self.ids.child(n),
            Some(self.ids.span_id),
            SpanKind::Internal,
            name.to_string(),
            (start, end),
            attributes,
            Vec::new(),
            status,
        )
    }

    /// The call's server span.
    fn root(&self, kept: Kept, done: Instant) -> SpanData {
        let r = self.record;
        let mut a = vec![
            KeyValue::new("http.request.method", "POST"),
            KeyValue::new("http.route", "/v1/chat/completions"),
            KeyValue::new("http.response.status_code", i64::from(r.status)),
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.request.stream", r.stream),
            KeyValue::new("sluice.request_id", r.request_id.as_str().to_string()),
            KeyValue::new("sluice.trace.kept", kept.label()),
        ];
        let asked = r
            .route
            .as_ref()
            .map(|t| &t.route)
            .or(r.model_group.as_ref());
        text(&mut a, "gen_ai.request.model", asked);
        text(&mut a, "sluice.group", r.model_group.as_ref());
        text(&mut a, "sluice.lane", r.lane.as_ref());
        text(&mut a, "sluice.tenant", r.tenant.as_ref());
        text(&mut a, "sluice.api_key", r.api_key.as_ref());
        text(&mut a, "sluice.upstream", r.upstream.as_ref());
        if let Some(c) = r.cache {
            a.push(KeyValue::new("sluice.cache", c.label()));
        }
        if let Some(u) = &r.usage {
            usage_attrs(&mut a, u);
            a.push(KeyValue::new("sluice.usage.estimated", r.usage_estimated));
        }
        if let Some(c) = r.cost_micros {
            a.push(KeyValue::new("sluice.cost", c as f64 / 1e6));
            a.push(KeyValue::new(
                "sluice.cost.extra",
                r.extra_cost_micros as f64 / 1e6,
            ));
        }
        if let Some(deadline) = r.timings.deadline {
            let budget = deadline.saturating_duration_since(r.timings.received);
            a.push(KeyValue::new("sluice.deadline_ms", ms(budget)));
            let left = deadline.saturating_duration_since(done);
            a.push(KeyValue::new("sluice.deadline_left_ms", ms(left)));
        }
        if let Some(stage) = r.deadline_stage {
            a.push(KeyValue::new("sluice.deadline_stage", stage.label()));
        }
        if let Some(q) = r.timings.queue() {
            a.push(KeyValue::new("sluice.queue_s", secs(q)));
        }
        if let Some(u) = r.timings.upstream_ttfb() {
            a.push(KeyValue::new("sluice.upstream.ttfb_s", secs(u)));
        }
        if r.hedge_denied {
            a.push(KeyValue::new("sluice.hedge_denied", true));
        }
        if let Some(rule) = r.hedge_rule {
            a.push(KeyValue::new("sluice.hedge_rule", rule));
        }
        if r.retry_denied {
            a.push(KeyValue::new("sluice.retry_denied", true));
        }
        if r.upstream_429s > 0 {
            a.push(KeyValue::new(
                "sluice.upstream_429s",
                i64::from(r.upstream_429s),
            ));
        }
        if let Some(e) = r.error {
            a.push(KeyValue::new("error.type", e.code()));
        }
        let events = r
            .fallbacks
            .iter()
            .map(|f| {
                let at = r
                    .attempts
                    .get(f.after.saturating_sub(1))
                    .and_then(|a| a.ended);
                Event::new(
                    "fallback",
                    self.wall(at.unwrap_or(r.timings.received)),
                    vec![
                        KeyValue::new("sluice.fallback.from", f.from.to_string()),
                        KeyValue::new("sluice.fallback.to", f.to.to_string()),
                        KeyValue::new("sluice.fallback.reason", f.reason),
                    ],
                    0,
                )
            })
            .collect();
        let status = if r.status >= 500 || r.status == 429 {
            Status::error(r.error.map_or("error", |e| e.code()))
        } else {
            Status::Unset
        };
        let name = format!("POST /v1/chat/completions {}", asked.map_or("-", |m| &**m));
        self.span(
            self.ids.span_id,
            self.ids.parent,
            SpanKind::Server,
            name,
            (r.timings.received, done),
            a,
            events,
            status,
        )
    }

    /// Attempt `i`: a GenAI inference client span, whose id went upstream as the parent in
    /// `traceparent`.
    fn attempt(&self, i: usize, at: &Attempt, upstreams: &Upstreams, done: Instant) -> SpanData {
        let r = self.record;
        let up = upstreams.get(&at.upstream);
        let model = up.map_or("-", |u| &*u.model);
        let mut a = vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.request.model", model.to_string()),
            KeyValue::new("gen_ai.request.stream", r.stream),
            KeyValue::new("sluice.upstream", at.upstream.to_string()),
            KeyValue::new("sluice.attempt.index", i as i64),
            KeyValue::new("sluice.attempt.kind", at.kind.label()),
            KeyValue::new("sluice.attempt.outcome", at.outcome.label()),
        ];
        if let Some(u) = up {
            a.push(KeyValue::new("gen_ai.provider.name", u.system));
            a.push(KeyValue::new("sluice.provider", u.provider.to_string()));
            if let Some((host, port)) = &u.server {
                a.push(KeyValue::new("server.address", host.to_string()));
                a.push(KeyValue::new("server.port", i64::from(*port)));
            }
        }
        if let Some(f) = r.fallbacks.iter().rev().find(|f| f.after <= i) {
            a.push(KeyValue::new(
                "sluice.attempt.fallback_from",
                f.from.to_string(),
            ));
            a.push(KeyValue::new("sluice.attempt.fallback_reason", f.reason));
        }
        // Every attempt that got a first byte, streamed or not (a complete answer's first
        // chunk is its first byte).
        if let Some(fb) = at.first_byte {
            let ttfc = secs(fb.saturating_duration_since(at.started));
            a.push(KeyValue::new("gen_ai.response.time_to_first_chunk", ttfc));
            a.push(KeyValue::new("sluice.attempt.ttfb_s", ttfc));
        }
        let answered = at.outcome == AttemptOutcome::Ok && at.first_byte.is_some();
        if let (true, Some(u)) = (answered, &r.usage) {
            usage_attrs(&mut a, u);
        }
        if let (true, Some(resp)) = (answered, &r.response) {
            response_attrs(&mut a, resp);
        }
        let status = match at.outcome {
            AttemptOutcome::Failed(e) => {
                a.push(KeyValue::new("error.type", e.code()));
                Status::error(e.code())
            }
            _ => Status::Unset,
        };
        self.span(
            self.ids.attempt(i),
            Some(self.ids.span_id),
            SpanKind::Client,
            format!("chat {model}"),
            (at.started, at.ended.unwrap_or(done)),
            a,
            Vec::new(),
            status,
        )
    }

    fn route_attrs(&self, a: &mut Vec<KeyValue>) {
        let r = self.record;
        text(a, "sluice.group", r.model_group.as_ref());
        if let Some(t) = &r.route {
            a.push(KeyValue::new("sluice.route", t.route.to_string()));
            a.push(KeyValue::new("sluice.route.rule", t.rule.to_string()));
            if let Some(auto) = &t.auto {
                a.push(KeyValue::new("sluice.route.why", auto.why));
            }
        }
    }

    fn cache_attrs(&self, a: &mut Vec<KeyValue>) {
        if let Some(c) = self.record.cache {
            a.push(KeyValue::new("sluice.cache", c.label()));
        }
        if let Some(s) = &self.record.semantic {
            let label = match s {
                sluice_core::SemanticLookup::Hit { .. } => "hit",
                sluice_core::SemanticLookup::Miss { .. } => "miss",
                sluice_core::SemanticLookup::Verify { .. } => "verify",
                sluice_core::SemanticLookup::Unverified { .. } => "unverified",
                sluice_core::SemanticLookup::Ineligible(_) => "ineligible",
            };
            a.push(KeyValue::new("sluice.semantic", label));
        }
    }
}

#[cfg(test)]
mod tests;
