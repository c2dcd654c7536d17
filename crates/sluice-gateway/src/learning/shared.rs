//! Routers' learning kept by every instance of a cluster: what one instance learns (a score,
//! an answer's usage), the answers it routed (so feedback reaches them through any instance)
//! and the requests it saw (so a retry sent to another instance is still told) are appended
//! to one log, and every other instance applies them to its own routers, so their beliefs
//! agree without a round trip on a request's path. Scores only ever come from the log
//! after the instance that learnt them applied them, so nothing is counted twice.

use std::sync::{Arc, Weak};

use serde::{Deserialize, Serialize};
use sluice_core::RequestId;
use tokio::time::Instant;

use super::{Learning, Routed, Signal};
use crate::Gateway;

/// Records the log keeps (only instances running when a record is written apply it).
const KEEP: usize = 100_000;

/// What one instance tells the others of its routers' learning.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(crate) enum Told {
    /// A candidate's answer for a task scored `score` (replacing `replaces`).
    Score {
        router: String,
        task: String,
        candidate: String,
        score: f64,
        replaces: Option<f64>,
    },
    /// A candidate's answer's output length and cached share.
    Usage {
        router: String,
        task: String,
        candidate: String,
        output: u64,
        cached: f64,
    },
    /// An answer routed, remembered for feedback.
    Routed {
        id: String,
        tenant: Option<String>,
        router: String,
        task: String,
        candidate: usize,
        scored: Option<(f64, String)>,
    },
    /// A request seen (to tell a retry of it).
    Sent {
        tenant: Option<String>,
        hash: u64,
        id: String,
    },
}

impl Told {
    pub(crate) fn routed(id: &RequestId, r: &Routed) -> Self {
        Self::Routed {
            id: id.as_str().to_string(),
            tenant: r.tenant.as_deref().map(str::to_string),
            router: r.router.to_string(),
            task: r.task.to_string(),
            candidate: r.candidate,
            scored: r.scored.map(|(s, sig)| (s, sig.label().to_string())),
        }
    }
}

fn signal(label: &str) -> Option<Signal> {
    [
        Signal::Explicit,
        Signal::UpstreamError,
        Signal::Length,
        Signal::InvalidJson,
        Signal::Retried,
    ]
    .into_iter()
    .find(|s| s.label() == label)
}

impl Learning {
    /// Appends `told` to the cluster's log, when the gateway is one of several.
    pub(crate) fn tell(&self, told: impl FnOnce() -> Told) {
        let Some(log) = self.shared.get() else {
            return;
        };
        match serde_json::to_vec(&told()) {
            Ok(v) => log.append(v),
            Err(e) => tracing::error!(error = %e, "a router's observation could not be written"),
        }
    }
}

/// Shares `gw`'s routers' learning with the other instances of its cluster.
pub(crate) fn share(gw: &Arc<Gateway>) {
    let Some(c) = &gw.cluster else { return };
    if gw.routes.routers().is_empty() {
        return;
    }
    let weak: Weak<Gateway> = Arc::downgrade(gw);
    let writer = c.log(
        "routers",
        sluice_cluster::Kind::Hints,
        KEEP,
        sluice_cluster::Start::Now,
        Arc::new(move |data: &[u8]| {
            if let Some(gw) = weak.upgrade() {
                apply(&gw, data);
            }
        }),
    );
    if gw.learning.shared.set(writer).is_err() {
        tracing::warn!("routers' learning was already shared");
    }
}

/// Applies another instance's record to this one's routers and memory.
fn apply(gw: &Gateway, data: &[u8]) {
    let told: Told = match serde_json::from_slice(data) {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(error = %e, "a router's observation from another instance could not be read; skipped");
            return;
        }
    };
    let routes = &gw.routes;
    match told {
        Told::Score {
            router,
            task,
            candidate,
            score,
            replaces,
        } => learn(routes, &router, &task, &candidate, |r, t, i| {
            r.observe(t, i, score, replaces);
        }),
        Told::Usage {
            router,
            task,
            candidate,
            output,
            cached,
        } => learn(routes, &router, &task, &candidate, |r, t, i| {
            r.observe_usage(t, i, output, cached);
        }),
        Told::Routed {
            id,
            tenant,
            router,
            task,
            candidate,
            scored,
        } => {
            let Some(id) = RequestId::named(&id) else {
                return;
            };
            let routed = Routed {
                tenant: tenant.map(|t| Arc::from(t.as_str())),
                router: Arc::from(router.as_str()),
                task: Arc::from(task.as_str()),
                candidate,
                scored: scored.and_then(|(s, l)| Some((s, signal(&l)?))),
            };
            gw.learning.answers.insert(id, routed);
        }
        Told::Sent { tenant, hash, id } => {
            let Some(id) = RequestId::named(&id) else {
                return;
            };
            let tenant = tenant.map(|t| Arc::from(t.as_str()));
            gw.learning.arrived_elsewhere(
                routes,
                &gw.observers.telemetry,
                tenant,
                hash,
                id,
                Instant::now(),
            );
        }
    }
}

/// Teaches router `router` by `f`, for `task` and the candidate named `candidate`, when this
/// instance knows both.
fn learn(
    routes: &sluice_routing::Routes,
    router: &str,
    task: &str,
    candidate: &str,
    f: impl FnOnce(&mut sluice_routing::auto::Router, &Arc<str>, usize),
) {
    let Some(r) = routes.router(router) else {
        return;
    };
    let mut r = r.lock();
    if let Some(i) = r.candidates.iter().position(|c| **c == *candidate) {
        f(&mut r, &Arc::from(task), i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_as_written() {
        let told = Told::Routed {
            id: "r-1".into(),
            tenant: Some("acme".into()),
            router: "auto".into(),
            task: "summarise".into(),
            candidate: 1,
            scored: Some((0.0, Signal::Retried.label().into())),
        };
        let v = serde_json::to_vec(&told).unwrap();
        assert_eq!(serde_json::from_slice::<Told>(&v).unwrap(), told);
        for s in [
            Signal::Explicit,
            Signal::UpstreamError,
            Signal::Length,
            Signal::InvalidJson,
            Signal::Retried,
        ] {
            assert_eq!(signal(s.label()), Some(s));
        }
        assert_eq!(signal("nonsense"), None);
    }
}
