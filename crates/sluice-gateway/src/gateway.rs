//! The gateway's shared state, as a few handles, each defined in its own folder and handed
//! to the steps that need it: routes and lanes, [`Tenants`] (keys, accounts, tenants'
//! lanes), [`Caches`] (exact and semantic), [`Pacing`] (429 cool-downs), [`Shaping`]
//! (prompt shaping, prompt-cache keys, the prefix watch), [`Observers`] (telemetry, SLOs,
//! traces, the access log, recent calls, sinks), [`Learning`] (what routers learn from) and
//! the usage ledger.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use sluice_core::{CallRecord, GatewayError};
use sluice_economy::{Books, KeyDirectory};
use sluice_ledger::{AnyStore, Ledger};
use sluice_routing::{Deployment, Routes};
use sluice_tail::admission::LaneSpec;
use sluice_telemetry::Telemetry;
use tokio::time::Instant;

use crate::caches::Caches;
use crate::learning::Learning;
use crate::observers::Observers;
use crate::pacing::Pacing;
use crate::shaping::Shaping;
use crate::tenants::Tenants;

pub use crate::observers::RecordSink;

/// Everything a request needs, shared by all requests.
pub struct Gateway {
    pub(crate) routes: Routes,
    pub(crate) lanes: Vec<LaneSpec>,
    pub(crate) tenants: Tenants,
    pub(crate) caches: Caches,
    pub(crate) pacing: Pacing,
    pub(crate) shaping: Shaping,
    pub(crate) observers: Observers,
    pub(crate) learning: Learning,
    /// The usage ledger's writer and the store it writes to.
    pub(crate) ledger: Option<(Ledger, Arc<AnyStore>)>,
    /// The instances this one shares limits, budgets and pacing with, when any.
    pub(crate) cluster: Option<sluice_cluster::Cluster>,
    pub(crate) max_body_bytes: usize,
    /// The longest pause while a client sends a body (`[server] stall_timeout`).
    pub(crate) body_stall: std::time::Duration,
    pub(crate) draining: AtomicBool,
    /// Whether the ledger's store answers (`cluster::follow_store` reads it every second).
    pub(crate) store_health: crate::cluster::StoreHealth,
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
        &self.observers.telemetry
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
        self.tenants.lane_of(tenant)
    }

    /// Whether shutdown has begun (`/readyz` answers 503 from then on).
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    /// Waits until every access-log line of the calls settled so far is written (at
    /// shutdown, and in tests). Blocks the calling thread briefly.
    pub fn sync_access_log(&self) {
        if let Some(log) = &self.observers.access_log {
            log.sync();
        }
    }

    /// Marks the gateway as draining.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    /// Notes an attempt's failure (a 429 pauses the deployment and keeps hedges away).
    pub(crate) fn attempt_failed(&self, deployment: &Deployment, e: &GatewayError, now: Instant) {
        self.pacing.attempt_failed(deployment, e, now);
    }

    /// Sends what the trace exporter holds and waits up to `wait` for it (at shutdown).
    /// Blocks the calling thread.
    pub fn close_traces(&self, wait: std::time::Duration) {
        if let Some(t) = &self.observers.traces {
            t.close(wait);
        }
    }

    /// Whether `deployment` answered 429 recently enough that no hedge should go there.
    pub fn is_cooling(&self, deployment: &Arc<str>, now: Instant) -> bool {
        self.pacing.is_cooling(deployment, now)
    }

    /// The API keys.
    pub fn keys(&self) -> &dyn KeyDirectory {
        &*self.tenants.keys
    }

    /// Tenants' credits and quotas.
    pub fn accounts(&self) -> &Books {
        &self.tenants.accounts
    }

    /// The usage ledger, when one is kept.
    pub fn ledger(&self) -> Option<&Ledger> {
        self.ledger.as_ref().map(|(l, _)| l)
    }

    /// The ledger's store, to read usage from.
    pub fn usage_store(&self) -> Option<&Arc<AnyStore>> {
        self.ledger.as_ref().map(|(_, s)| s)
    }

    /// Hands a finished call to its observers, the routers' learning and the ledger (its
    /// row, made when a ledger is kept).
    pub(crate) fn settle(&self, record: &CallRecord, entry: Option<sluice_ledger::Entry>) {
        // Whether its upstream is pausing after a 429 is read once, for the SLOs that ask;
        // the call settled just now: its end is the clock's reading.
        let cooling = self.observers.judges()
            && record
                .upstream
                .as_ref()
                .or_else(|| record.attempts.last().map(|a| &a.upstream))
                .is_some_and(|u| {
                    let now = record.timings.done.unwrap_or_else(Instant::now);
                    self.pacing.is_cooling(u, now)
                });
        self.observers.settled(record, cooling);
        if record.route.as_ref().is_some_and(|r| r.auto.is_some()) {
            self.learning
                .settled(&self.routes, &self.observers.telemetry, record);
        }
        if let (Some((ledger, _)), Some(entry)) = (&self.ledger, entry) {
            ledger.record(entry);
        }
    }
}
