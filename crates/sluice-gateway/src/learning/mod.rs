//! What automatic routers learn from. Each answer a router chose is remembered (request id,
//! tenant, router, task, the candidate that answered) until feedback for it arrives; implicit
//! signals score it at once: an upstream error, an answer cut at `length`, an answer that is
//! not JSON when JSON was asked for, the same request sent again by the same tenant soon
//! after. `POST /v1/feedback` (`api`) scores it explicitly, replacing an implicit score.
//! Without feedback a router learns only from failures, and, knowing nothing good of any
//! candidate, keeps to the one believed best (the dearest of equals).

mod shared;

pub(crate) use shared::share;
use sluice_routing::auto::Told;

use std::sync::Arc;
use std::time::Duration;

use moka::sync::Cache;
use serde_json::Value;
use sluice_core::{AnswerFlaw, CallRecord, ChatRequest, RequestId};
use sluice_routing::auto::Router;
use tokio::time::Instant;

use sluice_routing::Routes;
use sluice_telemetry::Telemetry;

/// Routed answers remembered for feedback (the oldest are forgotten first).
pub const ANSWERS_KEPT: u64 = 100_000;

/// How soon the same request from the same tenant counts as a retry of the first.
pub const RETRY_WINDOW: Duration = Duration::from_secs(120);

/// Why a score was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// `POST /v1/feedback`.
    Explicit,
    /// The upstream failed the call.
    UpstreamError,
    /// The answer stopped at `max_tokens` (`finish_reason: "length"`).
    Length,
    /// JSON was asked for and the answer is not JSON.
    InvalidJson,
    /// The client sent the same request again.
    Retried,
}

impl Signal {
    /// Its label in metrics and the feedback answer.
    pub fn label(self) -> &'static str {
        match self {
            Self::Explicit => "explicit",
            Self::UpstreamError => "upstream_error",
            Self::Length => "length",
            Self::InvalidJson => "invalid_json",
            Self::Retried => "retried",
        }
    }
}

/// One routed answer waiting for its score.
#[derive(Clone, Debug)]
pub struct Routed {
    /// Its tenant (feedback from another is refused).
    pub tenant: Option<Arc<str>>,
    /// The router.
    pub router: Arc<str>,
    /// The task as learnt.
    pub task: Arc<str>,
    /// The candidate that answered (index into the router's candidates).
    pub candidate: usize,
    /// The score it counts now, and why.
    pub scored: Option<(f64, Signal)>,
}

/// A request as sent by its tenant: the tenant and a hash of its fields.
type Sent = (Option<Arc<str>>, u64);

/// The answers remembered, and the recent requests (to tell a retry).
pub struct Learning {
    answers: Cache<RequestId, Routed>,
    recent: Cache<Sent, (RequestId, Instant)>,
    /// Each router's version when it was last saved to the store.
    saved: parking_lot::Mutex<Vec<(Arc<str>, u64)>>,
    /// The cluster's log of routers' learning, when the gateway is one of several.
    shared: std::sync::OnceLock<Arc<dyn sluice_routing::auto::RouterLog>>,
}

impl Default for Learning {
    fn default() -> Self {
        Self {
            answers: Cache::new(ANSWERS_KEPT),
            recent: Cache::new(ANSWERS_KEPT),
            saved: parking_lot::Mutex::new(Vec::new()),
            shared: std::sync::OnceLock::new(),
        }
    }
}

impl std::fmt::Debug for Learning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Learning").finish_non_exhaustive()
    }
}

/// A 64-bit hash of a request's fields as written (FNV-1a), to tell the same request sent
/// again.
pub fn body_hash(request: &ChatRequest) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (name, value) in request.fields() {
        for b in name
            .bytes()
            .chain([0])
            .chain(value.iter().copied())
            .chain([0])
        {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// `hash` continued over the request's task (none: as sent), so that a retry is the same
/// body under the same task.
pub fn with_task(mut hash: u64, task: Option<&str>) -> u64 {
    for b in task.unwrap_or("").bytes().chain([0xff]) {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

impl From<AnswerFlaw> for Signal {
    fn from(f: AnswerFlaw) -> Self {
        match f {
            AnswerFlaw::Length => Self::Length,
            AnswerFlaw::InvalidJson => Self::InvalidJson,
        }
    }
}

/// What is wrong with a complete answer as an answer, if anything; read only for calls a
/// router chose.
pub fn flaw(body: &[u8], wants_json: bool) -> Option<AnswerFlaw> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let choice = v.get("choices")?.get(0)?;
    if choice.get("finish_reason").and_then(Value::as_str) == Some("length") {
        return Some(AnswerFlaw::Length);
    }
    if wants_json {
        let content = choice.get("message")?.get("content")?.as_str()?;
        if serde_json::from_str::<serde::de::IgnoredAny>(content).is_err() {
            return Some(AnswerFlaw::InvalidJson);
        }
    }
    None
}

impl Learning {
    /// The version router `name` had when last saved.
    pub fn saved_version(&self, name: &str) -> Option<u64> {
        self.saved
            .lock()
            .iter()
            .find(|(n, _)| &**n == name)
            .map(|(_, v)| *v)
    }

    /// Notes that router `name` was saved at `version`.
    pub fn mark_saved(&self, name: Arc<str>, version: u64) {
        let mut saved = self.saved.lock();
        match saved.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = version,
            None => saved.push((name, version)),
        }
    }

    /// Notes that `id` (of `tenant`, body hash `hash`) arrived `now`; if the same request
    /// arrived within [`RETRY_WINDOW`], the earlier answer is scored bad.
    pub fn arrived(
        &self,
        routes: &Routes,
        telemetry: &Telemetry,
        tenant: Option<&Arc<str>>,
        hash: u64,
        id: &RequestId,
        now: Instant,
    ) {
        self.arrived_elsewhere(routes, telemetry, tenant.cloned(), hash, id.clone(), now);
        self.tell(|| Told::Sent {
            tenant: tenant.map(|t| t.to_string()),
            hash,
            id: id.as_str().to_string(),
        });
    }

    /// As [`Learning::arrived`], for a request another instance saw (not told again).
    fn arrived_elsewhere(
        &self,
        routes: &Routes,
        telemetry: &Telemetry,
        tenant: Option<Arc<str>>,
        hash: u64,
        id: RequestId,
        now: Instant,
    ) {
        let key = (tenant, hash);
        if let Some((earlier, at)) = self.recent.get(&key)
            && earlier != id
            && now.saturating_duration_since(at) <= RETRY_WINDOW
        {
            self.implicit(routes, telemetry, &earlier, Signal::Retried);
        }
        self.recent.insert(key, (id, now));
    }

    /// Remembers `routed` under `id` for feedback, telling the other instances.
    fn remember(&self, id: RequestId, routed: Routed) {
        self.tell(|| shared::routed(&id, &routed));
        self.answers.insert(id, routed);
    }

    /// Router `router` learns `score` for `candidate` on `task` (replacing `replaces`),
    /// telling the other instances.
    fn observe(
        &self,
        r: &mut Router,
        task: &Arc<str>,
        candidate: usize,
        score: f64,
        replaces: Option<f64>,
    ) {
        r.observe(task, candidate, score, replaces);
        if let Some(c) = r.candidates.get(candidate) {
            self.tell(|| Told::Score {
                router: r.name.to_string(),
                task: task.to_string(),
                candidate: c.to_string(),
                score,
                replaces,
            });
        }
    }

    /// Learns what a finished call a router chose says: its answer is remembered for
    /// feedback, an implicit signal scores it, its usage teaches output length and cached
    /// share.
    pub fn settled(&self, routes: &Routes, telemetry: &Telemetry, record: &CallRecord) {
        let Some(route) = &record.route else { return };
        let Some(auto) = &route.auto else { return };
        // An answer from a cache says nothing of the candidate it was routed to.
        if record.cache.is_some_and(sluice_core::CacheLookup::served) {
            return;
        }
        let Some(router) = routes.router(&route.route) else {
            return;
        };
        let served = record.model_group.as_ref().unwrap_or(&route.group);
        let mut r = router.lock();
        // A candidate whose upstreams failed before the request fell back to another is
        // scored for its error, as if it had answered with it.
        for f in &record.fallbacks {
            if f.reason == sluice_routing::fallback::Reason::Failed.label()
                && let Some(failed) = r.candidates.iter().position(|c| *c == f.from)
            {
                self.observe(&mut r, &auto.task, failed, 0.0, None);
                telemetry.router_feedback(&route.route, Signal::UpstreamError.label());
            }
        }
        let Some(candidate) = r.candidates.iter().position(|c| c == served) else {
            return;
        };
        let task = auto.task.clone();
        if let Some(u) = &record.usage {
            let cached = if u.prompt_tokens == 0 {
                0.0
            } else {
                u.cached_tokens as f64 / u.prompt_tokens as f64
            };
            r.observe_usage(&task, candidate, u.completion_tokens, cached);
            self.tell(|| Told::Usage {
                router: r.name.to_string(),
                task: task.to_string(),
                candidate: served.to_string(),
                output: u.completion_tokens,
                cached,
            });
        }
        let signal = if record.error.is_some_and(|e| e.is_upstream()) {
            Some(Signal::UpstreamError)
        } else {
            record.flaw.map(Signal::from)
        };
        let mut routed = Routed {
            tenant: record.tenant.clone(),
            router: r.name.clone(),
            task: task.clone(),
            candidate,
            scored: None,
        };
        if let Some(signal) = signal {
            self.observe(&mut r, &task, candidate, 0.0, None);
            routed.scored = Some((0.0, signal));
            telemetry.router_feedback(&route.route, signal.label());
        }
        drop(r);
        if record.status == 200 || signal.is_some() {
            self.remember(record.request_id.clone(), routed);
        }
    }

    /// Scores `id`'s answer bad for `signal`, unless feedback already scored it.
    fn implicit(&self, routes: &Routes, telemetry: &Telemetry, id: &RequestId, signal: Signal) {
        let Some(mut routed) = self.answers.get(id) else {
            return;
        };
        if routed.scored.is_some() {
            return;
        }
        if let Some(router) = routes.router(&routed.router) {
            self.observe(
                &mut router.lock(),
                &routed.task,
                routed.candidate,
                0.0,
                None,
            );
            telemetry.router_feedback(&routed.router, signal.label());
        }
        routed.scored = Some((0.0, signal));
        self.remember(id.clone(), routed);
    }

    /// The answer remembered under `id`.
    pub fn answer(&self, id: &RequestId) -> Option<Routed> {
        self.answers.get(id)
    }

    /// Records `score` for `id`'s answer: learnt by its router (replacing an implicit
    /// score), remembered as explicit.
    pub fn score(
        &self,
        routes: &Routes,
        telemetry: &Telemetry,
        id: &RequestId,
        mut routed: Routed,
        score: f64,
    ) {
        let replaces = routed.scored.map(|(s, _)| s);
        if let Some(router) = routes.router(&routed.router) {
            let mut r: parking_lot::MutexGuard<'_, Router> = router.lock();
            self.observe(&mut r, &routed.task, routed.candidate, score, replaces);
        }
        telemetry.router_feedback(&routed.router, Signal::Explicit.label());
        routed.scored = Some((score, Signal::Explicit));
        self.remember(id.clone(), routed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_body_under_another_task_is_another_request() {
        let h = 0xcbf2_9ce4_8422_2325;
        assert_eq!(with_task(h, Some("qa")), with_task(h, Some("qa")));
        assert_ne!(with_task(h, Some("qa")), with_task(h, Some("summary")));
        assert_ne!(with_task(h, Some("qa")), with_task(h, None));
    }
}
