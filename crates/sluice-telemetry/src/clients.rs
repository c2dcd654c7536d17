//! What callers waited for, per (lane, model group, tenant class): rotating windows of the
//! time from a request's arrival to its first byte and to its last, kept apart from the
//! upstreams' attempt windows (each attempt timed from its own start), because a request that
//! queued, paused after a 429 or retried waited far longer than any one attempt took.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;
use sluice_tail::{LatencyWindow, Percentiles, WindowConfig};
use tokio::time::Instant;

/// Whose wait a client window holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClientKey {
    /// The lane (`-` before one was chosen).
    pub lane: Arc<str>,
    /// The model group (`-` before routing).
    pub group: Arc<str>,
    /// The tenant's class (`-` for none).
    pub class: Arc<str>,
}

/// A client key's two windows.
#[derive(Debug)]
pub struct ClientWindows {
    ttfb: LatencyWindow,
    total: LatencyWindow,
}

impl ClientWindows {
    /// Records one request's waits (`ttfb` to its first byte, `total` to its last), as of
    /// `now`.
    pub fn record(&mut self, now: Instant, ttfb: Duration, total: Duration) {
        self.ttfb.record(now, ttfb);
        self.total.record(now, total);
    }
}

/// Percentiles of what callers of one (lane, group, class) waited.
#[derive(Clone, Debug, Serialize)]
pub struct ClientLatency {
    /// The lane.
    pub lane: String,
    /// The model group.
    pub group: String,
    /// The tenant class.
    pub class: String,
    /// From arrival to the first byte, milliseconds.
    pub ttfb: Percentiles,
    /// From arrival to the last byte, milliseconds.
    pub total: Percentiles,
}

/// Every client key's windows, created on first use.
#[derive(Debug)]
pub struct Clients {
    config: WindowConfig,
    keys: Mutex<HashMap<ClientKey, Arc<Mutex<ClientWindows>>>>,
}

impl Clients {
    /// No windows yet, each to be made with `config` (already checked by the caller).
    pub fn new(config: WindowConfig) -> Self {
        Self {
            config,
            keys: Mutex::new(HashMap::new()),
        }
    }

    /// The windows of `key`, created if new.
    pub fn get(&self, key: &ClientKey, now: Instant) -> Option<Arc<Mutex<ClientWindows>>> {
        let mut keys = self.keys.lock();
        if let Some(w) = keys.get(key) {
            return Some(w.clone());
        }
        let fresh = ClientWindows {
            ttfb: LatencyWindow::new(self.config, now).ok()?,
            total: LatencyWindow::new(self.config, now).ok()?,
        };
        let w = Arc::new(Mutex::new(fresh));
        keys.insert(key.clone(), w.clone());
        Some(w)
    }

    /// Every key's percentiles at `now`, sorted by lane, group and class.
    pub fn report(&self, now: Instant) -> Vec<ClientLatency> {
        let keys: Vec<(ClientKey, Arc<Mutex<ClientWindows>>)> = self
            .keys
            .lock()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut out: Vec<(ClientKey, ClientLatency)> = keys
            .into_iter()
            .map(|(k, w)| {
                let mut w = w.lock();
                let row = ClientLatency {
                    lane: k.lane.to_string(),
                    group: k.group.to_string(),
                    class: k.class.to_string(),
                    ttfb: w.ttfb.percentiles(now),
                    total: w.total.percentiles(now),
                };
                (k, row)
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out.into_iter().map(|(_, row)| row).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_lane_group_and_class_keeps_its_own_waits() {
        let now = Instant::now();
        let clients = Clients::new(WindowConfig::default());
        let key = |lane: &str| ClientKey {
            lane: Arc::from(lane),
            group: Arc::from("chat"),
            class: Arc::from("-"),
        };
        for i in 0..100u64 {
            let w = clients.get(&key("interactive"), now).unwrap();
            w.lock().record(
                now,
                Duration::from_millis(100 + i),
                Duration::from_millis(900 + i),
            );
        }
        let b = clients.get(&key("batch"), now).unwrap();
        b.lock()
            .record(now, Duration::from_secs(20), Duration::from_secs(30));
        let report = clients.report(now);
        assert_eq!(report.len(), 2);
        // Sorted by lane: batch first.
        assert_eq!(report[0].lane, "batch");
        assert_eq!(report[0].total.count, 1);
        assert!(report[0].total.p99 >= Duration::from_secs(29));
        assert_eq!(report[1].ttfb.count, 100);
        assert!(report[1].ttfb.p99 < Duration::from_millis(250));
        assert!(report[1].total.p50 >= Duration::from_millis(900));
    }
}
