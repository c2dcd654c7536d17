//! Routers' learning shared with the other instances of a cluster: this instance's records
//! go out through the cluster's [`RouterLog`]; the others' come back typed and are applied
//! here to this instance's routers and memory of routed answers.

use std::sync::{Arc, Weak};

use sluice_core::RequestId;
use sluice_routing::auto::{RouterLog, Told};
use tokio::time::Instant;

use super::{Learning, Routed, Signal};
use crate::Gateway;

/// The record of an answer routed.
pub(crate) fn routed(id: &RequestId, r: &Routed) -> Told {
    Told::Routed {
        id: id.as_str().to_string(),
        tenant: r.tenant.as_deref().map(str::to_string),
        router: r.router.to_string(),
        task: r.task.to_string(),
        candidate: r.candidate,
        scored: r.scored.map(|(s, sig)| (s, sig.label().to_string())),
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
    /// Tells the other instances `told`, when the gateway is one of several.
    pub(crate) fn tell(&self, told: impl FnOnce() -> Told) {
        if let Some(log) = self.shared.get() {
            log.tell(&told());
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
    let log: Arc<dyn RouterLog> = Arc::new(c.router_log(Arc::new(move |told: Told| {
        if let Some(gw) = weak.upgrade() {
            apply(&gw, told);
        }
    })));
    if gw.learning.shared.set(log).is_err() {
        tracing::warn!("routers' learning was already shared");
    }
}

/// Applies another instance's record to this one's routers and memory.
fn apply(gw: &Gateway, told: Told) {
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
    fn every_signal_reads_back_from_its_label() {
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
