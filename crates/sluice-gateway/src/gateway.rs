//! The gateway's shared state: routes, lanes, tenants' default lanes, API keys, prices,
//! telemetry, cool-downs, record sinks, the usage ledger and the answer cache.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::{Mutex, RwLock};
use sluice_core::{CallRecord, GatewayError};
use sluice_economy::{Accounts, KeyRing, Unpriced};
use sluice_ledger::{AnyStore, Ledger, StoredTenant};
use sluice_tail::admission::LaneSpec;
use sluice_tail::pace::{Cooldowns, after_429};
use sluice_telemetry::Telemetry;
use tokio::time::Instant;

use sluice_cache::AnswerCache;
use sluice_routing::{Deployment, Routes};

pub use crate::assemble::{BuildError, GatewayBuilder, GroupPolicies, TraceSetup};

/// A function told about every finished call (the demo and tests collect records with it).
pub type RecordSink = Arc<dyn Fn(&CallRecord) + Send + Sync>;

/// Everything a request needs, shared by all requests.
pub struct Gateway {
    pub(crate) routes: Routes,
    pub(crate) lanes: Vec<LaneSpec>,
    /// The lane of each tenant that has one (by index into `lanes`).
    pub(crate) tenant_lanes: RwLock<HashMap<Arc<str>, usize>>,
    /// Tenants the configuration sets (the admin API may not change them).
    pub(crate) configured_tenants: HashSet<Arc<str>>,
    /// Tenants set through the admin API, as set.
    pub(crate) api_tenants: Mutex<BTreeMap<Arc<str>, StoredTenant>>,
    /// Held by each admin change (keys, tenants) across its write to the store and to
    /// memory, so that two changes cannot land in one order in the store and the other in
    /// memory.
    pub(crate) admin_writes: tokio::sync::Mutex<()>,
    /// API keys.
    pub(crate) keys: KeyRing,
    /// Tenants' credits and quotas.
    pub(crate) accounts: Accounts,
    /// Counts the prompts of tenants with credits or quotas; loaded before the gateway is.
    pub(crate) tokenizer: sluice_economy::estimate::Tokenizer,
    /// When requests need a key.
    pub(crate) key_check: crate::walk::auth::KeyCheck,
    /// The token `/admin/*` requires, if any.
    pub(crate) admin_token: Option<String>,
    /// What a call to a model with no price gets.
    pub(crate) unpriced: Unpriced,
    pub(crate) telemetry: Arc<Telemetry>,
    /// One line per finished request, when configured.
    pub(crate) access_log: Option<sluice_telemetry::AccessLog>,
    pub(crate) max_body_bytes: usize,
    pub(crate) draining: AtomicBool,
    pub(crate) sinks: Vec<RecordSink>,
    /// The usage ledger's writer and the store it writes to.
    pub(crate) ledger: Option<(Ledger, Arc<AnyStore>)>,
    /// Deployments that answered 429 recently: no optional work (hedges) goes to them.
    pub(crate) cooling: Mutex<Cooldowns<Arc<str>>>,
    /// The exact answer cache, when answers are cached.
    pub(crate) cache: Option<AnswerCache>,
    /// The semantic cache and its embedder, when answers are cached by meaning.
    pub(crate) semantic: Option<Arc<crate::walk::semantic::Semantic>>,
    /// Whether requests that should share a cached prefix do, when watched.
    pub(crate) prefixes: Option<crate::walk::prefixes::PrefixWatch>,
    /// Groups whose prompts are shaped (normalised, compressed, loaded progressively), and how.
    pub(crate) shapes: HashMap<Arc<str>, sluice_context::Shaping>,
    /// The last calls, for the incident explainer (`None`: kept none).
    pub(crate) recent: Option<crate::admin::diagnose::Recent>,
    /// The SLOs every finished call is judged by.
    pub(crate) slos: Vec<crate::admin::slo::Judged>,
    /// Per group deriving prompt-cache keys: the keys handed out lately.
    pub(crate) cache_keys: HashMap<Arc<str>, Mutex<sluice_context::cache_key::Keys>>,
    /// What automatic routers learn from: their answers awaiting feedback.
    pub(crate) learning: crate::feedback::Learning,
    /// Tracing, when calls are traced.
    pub(crate) traces: Option<sluice_trace::Tracer>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("routes", &self.routes)
            .field("max_body_bytes", &self.max_body_bytes)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// The telemetry hub (metrics, windows).
    pub fn telemetry(&self) -> &Arc<Telemetry> {
        &self.telemetry
    }

    /// The model groups.
    pub fn routes(&self) -> &Routes {
        &self.routes
    }

    /// The lanes, in priority order.
    pub fn lanes(&self) -> &[LaneSpec] {
        &self.lanes
    }

    /// The lane of `tenant`'s requests that name none: its configured lane, else the first.
    pub fn tenant_lane(&self, tenant: &str) -> usize {
        self.tenant_lanes.read().get(tenant).copied().unwrap_or(0)
    }

    /// Whether shutdown has begun (`/readyz` answers 503 from then on).
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    /// Waits until every access-log line of the calls settled so far is written (at
    /// shutdown, and in tests). Blocks the calling thread briefly.
    pub fn sync_access_log(&self) {
        if let Some(log) = &self.access_log {
            log.sync();
        }
    }

    /// Marks the gateway as draining.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    /// Notes an attempt's failure. A 429 pauses the deployment's admission until its
    /// `retry-after` (queued work waits in sluice rather than meet the same wall), and keeps
    /// hedges away from it a while longer.
    pub(crate) fn attempt_failed(&self, deployment: &Deployment, e: &GatewayError, now: Instant) {
        if !e.is_rate_limited() {
            return;
        }
        let pushback = after_429(now, e.upstream.as_deref().and_then(|r| r.retry_after()));
        if let Some(limiter) = &deployment.limiter {
            limiter.pause_until(pushback.pause_until);
        }
        self.cooling
            .lock()
            .start(deployment.name.clone(), now, pushback.quiet_for);
    }

    /// Counts `record` as an event of each SLO that covers it; returns whether one judged it
    /// bad. Whether its upstream is pausing after a 429 is read once, for the SLOs that ask.
    fn judge_slos(&self, record: &CallRecord) -> bool {
        let upstream = record
            .upstream
            .as_ref()
            .or_else(|| record.attempts.last().map(|a| &a.upstream));
        // The call settled just now: its end is the clock's reading.
        let now = record.timings.done.unwrap_or_else(Instant::now);
        let cooling = upstream.is_some_and(|u| self.is_cooling(u, now));
        let mut bad = false;
        for judged in &self.slos {
            let slo = &judged.slo;
            let facts = sluice_telemetry::slo::Facts::of(record, slo.measure(), cooling);
            if let Some(v) = slo.judge(&facts) {
                self.telemetry.slo_event(&slo.name, v);
                judged.count(v);
                bad |= v != sluice_telemetry::slo::Verdict::Good;
            }
        }
        bad
    }

    /// Sends what the trace exporter holds and waits up to `wait` for it (at shutdown).
    /// Blocks the calling thread.
    pub fn close_traces(&self, wait: std::time::Duration) {
        if let Some(t) = &self.traces {
            t.close(wait);
        }
    }

    /// Whether `deployment` answered 429 recently enough that no hedge should go there.
    pub fn is_cooling(&self, deployment: &Arc<str>, now: Instant) -> bool {
        self.cooling.lock().active(deployment, now)
    }

    /// The API keys.
    pub fn keys(&self) -> &KeyRing {
        &self.keys
    }

    /// Tenants' credits and quotas.
    pub fn accounts(&self) -> &Accounts {
        &self.accounts
    }

    /// The usage ledger, when one is kept.
    pub fn ledger(&self) -> Option<&Ledger> {
        self.ledger.as_ref().map(|(l, _)| l)
    }

    /// The ledger's store, to read usage from.
    pub fn usage_store(&self) -> Option<&Arc<AnyStore>> {
        self.ledger.as_ref().map(|(_, s)| s)
    }

    /// Hands a finished call to telemetry, every sink and the ledger (its row, made when a
    /// ledger is kept).
    pub(crate) fn settle(&self, record: &CallRecord, entry: Option<sluice_ledger::Entry>) {
        self.telemetry.observe(record);
        let over_slo = !self.slos.is_empty() && self.judge_slos(record);
        if let Some(t) = &self.traces
            && let Some(kept) = t.settle(record, over_slo, Instant::now())
        {
            self.telemetry.trace_kept(kept.label());
        }
        if let Some(recent) = &self.recent {
            recent.push(record);
        }
        if record.route.as_ref().is_some_and(|r| r.auto.is_some()) {
            self.learning.settled(self, record);
        }
        if let Some(log) = &self.access_log {
            log.log(record);
        }
        for sink in &self.sinks {
            sink(record);
        }
        if let (Some((ledger, _)), Some(entry)) = (&self.ledger, entry) {
            ledger.record(entry);
        }
    }
}
