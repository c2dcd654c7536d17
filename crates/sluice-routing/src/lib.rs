//! Routing: model groups (the names clients use) mapped to weighted upstream deployments,
//! and the choice of one for each request: by weight, passing over open breakers and busy
//! deployments, or by prefix affinity ([`affinity`]). A deployment carries its limiter
//! ([`limiter`]: the admission queue, pacer and concurrency algorithm of `sluice-tail`) and
//! its breaker. Depends on `sluice-core`, `sluice-tail` and `sluice-providers`, never on
//! the gateway.

pub mod affinity;
pub mod auto;
pub mod fallback;
pub mod limiter;
pub mod rules;

use hashbrown::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use sluice_core::{ChatRequest, ErrorKind, GatewayError, RequestId};
use sluice_economy::{ModelInfo, Price};
use sluice_providers::Provider;
use sluice_tail::admission::Ask;
use sluice_tail::{Breaker, BreakerState, HedgePolicy, Hedging, RetryPolicy, Retrying, Verdict};
use tokio::time::{Duration, Instant};

use crate::limiter::Limiter;
use crate::rules::TaskRoute;
use affinity::{Affinity, AffinityPolicy, Prefixes};

/// One place a group's requests can go.
#[derive(Clone)]
pub struct Deployment {
    /// Name in headers and metrics.
    pub name: Arc<str>,
    /// The upstream adapter (shared by every deployment on that provider).
    pub provider: Arc<dyn Provider>,
    /// The model name the upstream knows.
    pub model: Arc<str>,
    /// Relative share of traffic.
    pub weight: u32,
    /// What its model's tokens cost, resolved from the price catalog when the gateway was
    /// assembled (`None`: unpriced, served only by an explicit `unpriced = "free"`).
    pub price: Option<Price>,
    /// What its model can take and do, from the catalog (`None`: not catalogued, so no
    /// context window is enforced before the call).
    pub info: Option<ModelInfo>,
    /// Its concurrency limit and queue, when the group limits concurrency.
    pub limiter: Option<Arc<Limiter>>,
    /// Its circuit breaker, when the group breaks circuits.
    pub breaker: Option<Arc<Mutex<Breaker>>>,
    /// What other instances saw of its breaker, when several instances share hints.
    pub hints: Option<Arc<dyn BreakerHints>>,
}

/// Breakers' openings told between instances that front the same upstreams: a hint, never a
/// verdict. A deployment another instance broke is passed over while its breaker there is
/// open, for one no one broke, while there is one; each instance still opens and closes its
/// own breaker on its own evidence, and a hinted deployment still serves when it is all
/// that is left.
pub trait BreakerHints: Send + Sync + std::fmt::Debug {
    /// Whether another instance's breaker of `deployment` is open at `now`, as it told.
    fn suspect(&self, deployment: &str, now: Instant) -> bool;
    /// Tells the others that this instance's breaker of `deployment` opened at `now`, until
    /// `until`.
    fn opened(&self, deployment: &str, now: Instant, until: Instant);
}

impl Deployment {
    /// Whether its breaker lets a call through at `now` (always, without a breaker).
    pub fn healthy(&self, now: Instant) -> bool {
        self.breaker
            .as_ref()
            .is_none_or(|b| b.lock().would_allow(now))
    }

    /// Whether `ask` would wait in its queue now (paused by a 429, paced, or full).
    pub fn would_wait(&self, ask: &Ask) -> bool {
        self.limiter.as_ref().is_some_and(|l| l.would_wait(ask))
    }

    /// Claims a call at `now` from its breaker (while half-open, the probe slot).
    pub fn claim(&self, now: Instant) {
        if let Some(b) = &self.breaker {
            b.lock().allow(now);
        }
    }

    /// Feeds a finished call to its breaker: a verdict on the upstream's health, or `None`
    /// for an outcome that says nothing about it (a 429, a 4xx). A breaker this opens is
    /// told to the other instances, when hints are shared.
    pub fn record_health(&self, now: Instant, verdict: Option<Verdict>) {
        let (Some(b), Some(v)) = (&self.breaker, verdict) else {
            return;
        };
        let mut b = b.lock();
        let Some(h) = &self.hints else {
            b.record(now, v);
            return;
        };
        let was_open = matches!(b.state(now), BreakerState::Open { .. });
        let after = b.record(now, v);
        drop(b);
        if let (BreakerState::Open { until }, false) = (after, was_open) {
            h.opened(&self.name, now, until);
        }
    }

    /// Whether another instance told that its breaker of this deployment is open at `now`.
    pub fn hinted(&self, now: Instant) -> bool {
        self.hints
            .as_ref()
            .is_some_and(|h| h.suspect(&self.name, now))
    }
}

impl std::fmt::Debug for Deployment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deployment")
            .field("name", &self.name)
            .field("model", &self.model)
            .field("weight", &self.weight)
            .finish_non_exhaustive()
    }
}

/// A model group.
#[derive(Debug)]
pub struct ModelGroup {
    /// The name clients send as `model`.
    pub name: Arc<str>,
    /// Where its requests may go.
    pub deployments: Vec<Deployment>,
    /// How it hedges slow requests, if it does.
    pub hedging: Option<Hedging>,
    /// How it retries failed attempts, if it does.
    pub retrying: Option<Retrying>,
    /// The deadline of a request that carries none of its own.
    pub timeout: Option<Duration>,
    /// Where recent prompt prefixes went, when the group routes by prefix affinity.
    pub affinity: Option<Affinity>,
    /// The groups that take its requests, in order, when it cannot (see [`fallback`]).
    pub fallbacks: Vec<Arc<str>>,
    total_weight: u64,
}

impl ModelGroup {
    /// A group over `deployments` (weights of zero count as one), hedging by `hedge` if given.
    pub fn new(name: &str, deployments: Vec<Deployment>, hedge: Option<HedgePolicy>) -> Self {
        let total_weight = deployments.iter().map(|d| u64::from(d.weight.max(1))).sum();
        Self {
            name: Arc::from(name),
            deployments,
            hedging: hedge.map(Hedging::new),
            retrying: None,
            timeout: None,
            affinity: None,
            fallbacks: Vec::new(),
            total_weight,
        }
    }

    /// The same group, falling back to `groups` in that order.
    pub fn with_fallbacks(mut self, groups: &[String]) -> Self {
        self.fallbacks = groups.iter().map(|g| Arc::from(g.as_str())).collect();
        self
    }

    /// Whether some deployment of the group takes a prompt of `prompt` tokens and an answer
    /// of `output` (one whose model is not catalogued is taken to).
    pub fn fits(&self, prompt: u64, output: u64) -> bool {
        self.deployments
            .iter()
            .any(|d| d.info.is_none_or(|i| i.fits(prompt, output)))
    }

    /// The smallest context window among its deployments, when every one is catalogued.
    pub fn smallest_window(&self) -> Option<u64> {
        self.deployments
            .iter()
            .map(|d| d.info.map(|i| i.context_window))
            .min()
            .flatten()
    }

    /// The same group, retrying by `retry` if given.
    pub fn with_retries(mut self, retry: Option<RetryPolicy>) -> Self {
        self.retrying = retry.map(Retrying::new);
        self
    }

    /// The same group, routing by prefix affinity by `policy` if given.
    pub fn with_affinity(self, policy: Option<AffinityPolicy>) -> Self {
        self.with_affinity_of(policy.map(Affinity::new))
    }

    /// The same group, routing by `affinity` if given (one whose memory several instances
    /// share, say).
    pub fn with_affinity_of(mut self, affinity: Option<Affinity>) -> Self {
        self.affinity = affinity;
        self
    }

    /// The prompt prefixes of `request`, when the group routes by them: the raw bytes of
    /// its `messages`, as the client wrote them.
    pub fn prefixes(&self, request: &ChatRequest) -> Option<Prefixes> {
        let affinity = self.affinity.as_ref()?;
        let (_, messages) = request.fields().find(|(name, _)| *name == "messages")?;
        Some(affinity.prefixes(messages))
    }

    /// The same group, giving requests without a deadline of their own `timeout`.
    pub fn with_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// The deployment a ticket in `0..total` falls on, among those `keep` accepts.
    fn by_ticket(
        &self,
        mut ticket: u64,
        keep: impl Fn(&Deployment) -> bool,
    ) -> Option<&Deployment> {
        for d in self.deployments.iter().filter(|d| keep(d)) {
            let w = u64::from(d.weight.max(1));
            if ticket < w {
                return Some(d);
            }
            ticket -= w;
        }
        self.deployments.last()
    }
}

/// Every model group, and the seed that spreads traffic by weight.
///
/// A request's deployment is a hash of the seed and its request id, not a draw from a shared
/// generator: no lock on the hot path, and a request goes to the same deployment however many
/// other requests came first. That is what lets a rehearsal compare two policies on the same
/// traffic (each request routed, and simulated, the same way in both runs).
pub struct Routes {
    /// Looked up on every request (and again to bill it): foldhash, not SipHash; the keys
    /// are the configuration's own names.
    groups: HashMap<Arc<str>, ModelGroup>,
    order: Vec<Arc<str>>,
    /// Model names that choose a group by rules (`auto`, say).
    task_routes: HashMap<Arc<str>, TaskRoute>,
    /// Model names that learn which candidate group to choose.
    routers: HashMap<Arc<str>, Mutex<auto::Router>>,
    seed: u64,
}

/// A 64-bit hash of `seed`, `salt` and `key` (FNV-1a, then SplitMix64's finaliser so every
/// bit of the key moves every bit of the result).
pub fn ticket_hash(seed: u64, salt: u64, key: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for b in key.bytes().chain(salt.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

impl std::fmt::Debug for Routes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Routes")
            .field("groups", &self.order)
            .finish_non_exhaustive()
    }
}

impl Routes {
    /// Routes over `groups`, in that order, spreading requests by a hash seeded with `seed`.
    pub fn new(groups: Vec<ModelGroup>, seed: u64) -> Self {
        let order = groups.iter().map(|g| g.name.clone()).collect();
        let groups = groups.into_iter().map(|g| (g.name.clone(), g)).collect();
        Self {
            groups,
            order,
            task_routes: HashMap::new(),
            routers: HashMap::new(),
            seed,
        }
    }

    /// The same routes, with automatic routers.
    pub fn with_routers(mut self, routers: Vec<auto::Router>) -> Self {
        self.routers = routers
            .into_iter()
            .map(|r| (r.name.clone(), Mutex::new(r)))
            .collect();
        self
    }

    /// The automatic router called `model`, if it is one (no lookup when there are none).
    pub fn router(&self, model: &str) -> Option<&Mutex<auto::Router>> {
        if self.routers.is_empty() {
            return None;
        }
        self.routers.get(model)
    }

    /// Every automatic router, sorted by name.
    pub fn routers(&self) -> Vec<(&Arc<str>, &Mutex<auto::Router>)> {
        let mut all: Vec<_> = self.routers.iter().collect();
        all.sort_by(|a, b| a.0.cmp(b.0));
        all
    }

    /// The same routes, with model names that choose a group by rules.
    pub fn with_task_routes(mut self, routes: Vec<TaskRoute>) -> Self {
        self.task_routes = routes.into_iter().map(|r| (r.name.clone(), r)).collect();
        self
    }

    /// The names clients may send that are not groups: task routes and automatic routers,
    /// sorted.
    pub fn chooser_names(&self) -> Vec<&Arc<str>> {
        let mut names: Vec<&Arc<str>> =
            self.task_routes.keys().chain(self.routers.keys()).collect();
        names.sort();
        names
    }

    /// The task route called `model`, if it is one.
    pub fn task_route(&self, model: &str) -> Option<&TaskRoute> {
        self.task_routes.get(model)
    }

    /// The group names, in configuration order.
    pub fn names(&self) -> &[Arc<str>] {
        &self.order
    }

    /// Every group, in configuration order.
    pub fn groups(&self) -> impl Iterator<Item = &ModelGroup> {
        self.order.iter().filter_map(|n| self.groups.get(n))
    }

    /// The group called `model`, or a 404 naming the known ones.
    pub fn group(&self, model: &str) -> Result<&ModelGroup, GatewayError> {
        self.group_among(model, |_| true)
    }

    /// The group called `model`, or a 404 naming only the known ones `allowed` keeps (the
    /// models a caller's key may use: the others' names are not its to learn).
    pub fn group_among(
        &self,
        model: &str,
        allowed: impl Fn(&str) -> bool,
    ) -> Result<&ModelGroup, GatewayError> {
        self.groups.get(model).ok_or_else(|| {
            let known: Vec<&str> = self
                .order
                .iter()
                .chain(self.chooser_names())
                .map(|n| &**n)
                .filter(|n| allowed(n))
                .collect();
            let mut message = format!("model `{model}` does not exist");
            if !known.is_empty() {
                message.push_str(&format!("; models you may use: {}", known.join(", ")));
            }
            GatewayError::new(ErrorKind::ModelNotFound, message).with_param("model")
        })
    }

    /// Picks a deployment of `group` for request `id`, with probability proportional to its
    /// weight.
    pub fn pick<'a>(
        &self,
        group: &'a ModelGroup,
        id: &RequestId,
    ) -> Result<&'a Deployment, GatewayError> {
        if group.total_weight == 0 {
            return Err(GatewayError::new(
                ErrorKind::Internal,
                format!("model `{}` has no deployments", group.name),
            ));
        }
        let ticket = ticket_hash(self.seed, 0, id.as_str()) % group.total_weight;
        group
            .by_ticket(ticket, |_| true)
            .ok_or_else(|| GatewayError::new(ErrorKind::Internal, "no deployment"))
    }

    /// Picks as [`Routes::pick`] does, but passes over a deployment whose breaker is open,
    /// or where `ask` would wait (a 429 paused it, its pacer holds calls back, its slots are
    /// taken), for one where neither is true, while there is one: the others carry the load
    /// while it catches up. Only waiting counts, not the longer quiet period that keeps
    /// hedges away after a 429, or traffic would pile onto the other deployments until they
    /// too refused it. When every breaker is open, the call fails fast with 503, saying when
    /// the first one will probe again.
    ///
    /// With `prefixes` (the group routes by prefix affinity), the deployment that last served
    /// the request's longest remembered prefix comes first when it covers enough of the
    /// prompt; wherever the request goes is then remembered for its prefixes. The second
    /// value says whether that remembered prefix decided.
    pub fn pick_available<'a>(
        &self,
        group: &'a ModelGroup,
        id: &RequestId,
        ask: &Ask,
        prefixes: Option<&Prefixes>,
    ) -> Result<(&'a Deployment, bool), GatewayError> {
        let now = Instant::now();
        let affinity = group.affinity.as_ref().zip(prefixes);
        let preferred = affinity
            .and_then(|(a, p)| a.preferred(p, now))
            .and_then(|i| group.deployments.get(i));
        let first = match preferred {
            Some(d) => d,
            None => self.pick(group, id)?,
        };
        let usable = |d: &Deployment| d.healthy(now) && !d.would_wait(ask);
        let unhinted = |d: &Deployment| usable(d) && !d.hinted(now);
        let chosen = if unhinted(first) {
            first
        } else if let Some(other) = self.pick_other(group, first, id, unhinted) {
            other
        } else if usable(first) {
            // Every usable deployment was broken elsewhere: this instance's evidence decides.
            first
        } else if let Some(other) = self.pick_other(group, first, id, usable) {
            other
        } else if let Some(healthy) = self.pick_other(group, first, id, |d| d.healthy(now)) {
            // Everyone healthy is busy: queue at the routed one if it is healthy.
            if first.healthy(now) { first } else { healthy }
        } else {
            return Err(no_healthy_upstream(group, now));
        };
        chosen.claim(now);
        if let Some((a, p)) = affinity
            && let Some(i) = group.deployments.iter().position(|d| d.name == chosen.name)
        {
            a.remember(p, i, now);
        }
        let by_prefix = preferred.is_some_and(|d| d.name == chosen.name);
        Ok((chosen, by_prefix))
    }

    /// A number in `[0, 1)` for request `id` and `salt`: the seeded randomness of jitter.
    pub fn unit(&self, id: &RequestId, salt: u64) -> f64 {
        (ticket_hash(self.seed, 16 + salt, id.as_str()) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Picks a deployment for a hedge of a request sent to `not`, among those `available`
    /// accepts, by weight. Another deployment first, because a stall on one upstream is often
    /// shared by its other requests; failing that, `not` itself (a second request usually
    /// lands on another replica behind the same API). `None` when nothing is available.
    pub fn pick_other<'a>(
        &self,
        group: &'a ModelGroup,
        not: &Deployment,
        id: &RequestId,
        available: impl Fn(&Deployment) -> bool,
    ) -> Option<&'a Deployment> {
        let fits = |d: &Deployment| d.name != not.name && available(d);
        let total: u64 = group
            .deployments
            .iter()
            .filter(|d| fits(d))
            .map(|d| u64::from(d.weight.max(1)))
            .sum();
        if total == 0 {
            let same = group.deployments.iter().find(|d| d.name == not.name);
            return same.filter(|d| available(d));
        }
        let ticket = ticket_hash(self.seed, 1, id.as_str()) % total;
        group.by_ticket(ticket, fits)
    }
}

/// The 503 for a group whose every breaker is open, with when to come back.
fn no_healthy_upstream(group: &ModelGroup, now: Instant) -> GatewayError {
    let reopen = group
        .deployments
        .iter()
        .filter_map(|d| d.breaker.as_ref().and_then(|b| b.lock().reopens_at(now)))
        .min();
    let wait = reopen.map_or(std::time::Duration::from_secs(1), |t| {
        t.saturating_duration_since(now)
    });
    GatewayError::new(
        ErrorKind::UpstreamUnavailable,
        format!(
            "every upstream of model `{}` is failing and its circuit is open; retry after {} s",
            group.name,
            wait.as_secs().max(1)
        ),
    )
    .with_retry_after(wait)
}

#[cfg(test)]
mod tests;
