//! Routers' learning kept by every instance: each record one instance tells
//! ([`sluice_routing::auto::Told`]) is appended to one log as JSON, and every other instance
//! is handed the records the others appended, read back into the same type. A record that
//! does not read is skipped, logged and counted with the log's unreadable records.

use std::sync::Arc;

use sluice_routing::auto::{RouterLog, Told};

use crate::health::Kind;
use crate::log::{Logs, Start, Writer};

/// Records the log keeps (only instances running when a record is written apply it).
const KEEP: usize = 100_000;

/// What this instance tells of its routers' learning, and hears of the others'.
pub struct RedisRouterLog {
    log: Writer,
}

impl std::fmt::Debug for RedisRouterLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisRouterLog").finish_non_exhaustive()
    }
}

impl RedisRouterLog {
    /// The log, handing the other instances' records to `apply` from now on (observations
    /// made before this instance started were counted by the others already).
    pub(crate) fn new(logs: &Arc<Logs>, apply: Arc<dyn Fn(Told) + Send + Sync>) -> Self {
        let counted = Arc::downgrade(logs);
        let log = logs.topic(
            "routers",
            Kind::Hints,
            KEEP,
            Start::Now,
            Arc::new(move |data: &[u8]| match serde_json::from_slice::<Told>(data) {
                Ok(t) => apply(t),
                Err(e) => {
                    if let Some(logs) = counted.upgrade() {
                        logs.unreadable
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    tracing::warn!(error = %e, "a router's observation from another instance could not be read; skipped");
                }
            }),
        );
        Self { log }
    }
}

impl RouterLog for RedisRouterLog {
    fn tell(&self, told: &Told) {
        match serde_json::to_vec(told) {
            Ok(v) => self.log.append(v),
            Err(e) => tracing::error!(error = %e, "a router's observation could not be written"),
        }
    }
}
