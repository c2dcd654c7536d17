//! Following the ledger's store: whether it answers (for `/readyz`, a metric and a log line
//! on the way down and back) and, when every instance shares it (PostgreSQL), the key and
//! tenant changes made through it, read every second off the request path whether or not
//! Redis answers.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use serde_json::{Value, json};
use sluice_ledger::Store;

use crate::Gateway;

/// How often each instance reads the store's directory version: a key or tenant change
/// reaches every instance within about this long, whether or not Redis answers.
pub const FOLLOW_STORE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether the ledger's store answers, as the last read of it found.
#[derive(Debug, Default)]
pub struct StoreHealth {
    down: AtomicBool,
    cause: Mutex<Option<String>>,
}

impl StoreHealth {
    /// Marks it down for `cause`; whether it was up until now.
    fn failed(&self, cause: String) -> bool {
        *self.cause.lock() = Some(cause);
        !self.down.swap(true, Ordering::Relaxed)
    }

    /// Marks it up; whether it was down until now.
    fn answered(&self) -> bool {
        let was_down = self.down.swap(false, Ordering::Relaxed);
        if was_down {
            *self.cause.lock() = None;
        }
        was_down
    }

    /// Whether the last read of the store failed.
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }
}

/// Whether the ledger's store is one every instance shares (PostgreSQL).
pub(crate) fn shared(gw: &Gateway) -> bool {
    matches!(
        gw.usage_store().map(|s| &**s),
        Some(sluice_ledger::AnyStore::Postgres(_))
    )
}

/// What `/readyz` says of the ledger: its store, whether it answers (and why not), and the
/// rows its writer holds that the store has not taken yet (`backlog`; of which `journal` wait
/// on the disk, and `journal_failures` counts journal writes that failed, a full disk).
pub(crate) fn readiness(gw: &Gateway) -> Option<Value> {
    let (ledger, store) = gw.ledger.as_ref()?;
    let h = &gw.store_health;
    let stats = ledger.stats();
    Some(json!({
        "store": store.name(),
        "state": if h.is_down() { "unreachable" } else { "ok" },
        "cause": h.cause.lock().clone(),
        "backlog": stats.pending(),
        "journal": stats.spilled,
        "journal_failures": stats.spill_failures,
    }))
}

/// Reads the store's directory version every [`FOLLOW_STORE_EVERY`]: a read that fails or
/// takes longer marks the store down (logged once, `sluice_store_degraded` 1) until one
/// answers. With a shared store, a version that moved takes keys and tenants again (Redis's
/// change counter tells sooner; this holds when Redis cannot answer).
pub async fn follow_store(gw: Arc<Gateway>) {
    let Some(store) = gw.usage_store().cloned() else {
        return;
    };
    let shared = shared(&gw);
    if shared && let Some(c) = &gw.cluster {
        c.health().directory_followed_in_store();
    }
    let label = if shared { "postgresql" } else { "sqlite" };
    let mut seen = None;
    let mut tick = tokio::time::interval(FOLLOW_STORE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Some((ledger, _)) = &gw.ledger {
            let s = ledger.stats();
            gw.telemetry().set_ledger_backlog(s.pending(), s.spilled);
        }
        let read = tokio::time::timeout(FOLLOW_STORE_EVERY, store.directory_version()).await;
        let version = match read {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => {
                went_down(&gw, label, store.name(), e.to_string());
                continue;
            }
            Err(_) => {
                let cause = format!("no answer within {} s", FOLLOW_STORE_EVERY.as_secs());
                went_down(&gw, label, store.name(), cause);
                continue;
            }
        };
        gw.telemetry().set_store(label, false);
        if gw.store_health.answered() {
            tracing::warn!(store = store.name(), "the ledger's store answers again");
        }
        if !shared || seen == Some(version) {
            continue;
        }
        match super::reload(&gw).await {
            Ok(()) => seen = Some(version),
            Err(e) => {
                tracing::error!(error = %e, "reading keys and tenants from the store failed; retried in a second")
            }
        }
    }
}

/// The store did not answer: said once per outage, counted in the metric while it lasts.
fn went_down(gw: &Gateway, label: &'static str, name: &str, cause: String) {
    gw.telemetry().set_store(label, true);
    if gw.store_health.failed(cause.clone()) {
        tracing::error!(
            store = name,
            cause = %cause,
            "the ledger's store does not answer: admin writes are refused with 503, the ledger writer keeps its rows (on PostgreSQL, in its journal on the disk) until it answers"
        );
    }
}
