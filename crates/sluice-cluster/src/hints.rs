//! Facts with an end told between instances. Breakers' openings: when this instance's
//! breaker of a deployment opens, the others hear it (within a follow of the log) and pass
//! that deployment over while the breaker here stays open, for one no one broke; each still
//! breaks on its own evidence. Cool-downs after a 429: a deployment that refused one instance
//! gets no hedge from any instance until its quiet period ends. Each is kept as "until" on
//! the wall clock and expires by itself.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use hashbrown::HashMap;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use sluice_routing::BreakerHints;
use sluice_tail::pace::Cooling;
use tokio::time::Instant;

use crate::health::Kind;
use crate::log::{Logs, Start, Writer};

/// Records the log keeps.
const KEEP: usize = 1_000;

/// A breaker opened on some instance.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Opened {
    deployment: String,
    /// Until when, in milliseconds of the wall clock.
    until_ms: u64,
}

/// Deployments and until when, as this instance heard and told them on one log.
pub struct Until {
    heard: Arc<Mutex<HashMap<String, Instant>>>,
    log: Writer,
}

impl std::fmt::Debug for Until {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Until").finish_non_exhaustive()
    }
}

impl Until {
    fn new(logs: &Arc<Logs>, topic: &str) -> Self {
        let heard = Arc::new(Mutex::new(HashMap::new()));
        let into = heard.clone();
        let log = logs.topic(
            topic,
            Kind::Hints,
            KEEP,
            Start::Kept,
            Arc::new(move |data: &[u8]| apply(&into, data, Instant::now(), SystemTime::now())),
        );
        Self { heard, log }
    }

    fn holds(&self, deployment: &str, now: Instant) -> bool {
        self.heard.lock().get(deployment).is_some_and(|u| *u > now)
    }

    fn hold(&self, deployment: &str, until: Instant) {
        let mut heard = self.heard.lock();
        let e = heard.entry(deployment.to_string()).or_insert(until);
        *e = (*e).max(until);
    }

    fn tell(&self, deployment: &str, now: Instant, until: Instant) {
        let left = until.saturating_duration_since(now);
        let o = Opened {
            deployment: deployment.to_string(),
            until_ms: crate::wall::ms(SystemTime::now()) + left.as_millis() as u64,
        };
        match serde_json::to_vec(&o) {
            Ok(v) => self.log.append(v),
            Err(e) => tracing::error!(error = %e, "a hint could not be written"),
        }
    }
}

/// Breakers' openings this instance heard, by deployment.
#[derive(Debug)]
pub struct RedisHints(Until);

impl RedisHints {
    pub(crate) fn new(logs: &Arc<Logs>) -> Self {
        Self(Until::new(logs, "breakers"))
    }
}

/// Deployments cooling after a 429 on any instance.
#[derive(Debug)]
pub struct RedisCooling(Until);

impl RedisCooling {
    pub(crate) fn new(logs: &Arc<Logs>) -> Self {
        Self(Until::new(logs, "cooling"))
    }
}

impl Cooling for RedisCooling {
    fn start(&self, key: &Arc<str>, now: Instant, d: Duration) {
        // This instance cools at once; the others within a follow.
        self.0.hold(key, now + d);
        self.0.tell(key, now, now + d);
    }

    fn active(&self, key: &Arc<str>, now: Instant) -> bool {
        self.0.holds(key, now)
    }
}

/// Takes another instance's opening at `now` (`wall` on the calendar).
fn apply(heard: &Mutex<HashMap<String, Instant>>, data: &[u8], now: Instant, wall: SystemTime) {
    let o: Opened = match serde_json::from_slice(data) {
        Ok(o) => o,
        Err(e) => {
            tracing::warn!(error = %e, "a breaker hint from another instance could not be read; skipped");
            return;
        }
    };
    let left = Duration::from_millis(o.until_ms.saturating_sub(crate::wall::ms(wall)));
    if left.is_zero() {
        return;
    }
    let until = now + left;
    let mut heard = heard.lock();
    let e = heard.entry(o.deployment).or_insert(until);
    *e = (*e).max(until);
    heard.retain(|_, u| *u > now);
    tracing::info!(
        "another instance's breaker opened; its deployment is passed over here while it stays open"
    );
}

impl BreakerHints for RedisHints {
    fn suspect(&self, deployment: &str, now: Instant) -> bool {
        self.0.holds(deployment, now)
    }

    fn opened(&self, deployment: &str, now: Instant, until: Instant) {
        // Only the others take the hint: this instance has its own breaker.
        self.0.tell(deployment, now, until);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hint_holds_while_the_breaker_there_stays_open() {
        let heard = Mutex::new(HashMap::new());
        let (now, wall) = (Instant::now(), SystemTime::now());
        let told = |d: &str, until_ms| {
            serde_json::to_vec(&Opened {
                deployment: d.into(),
                until_ms,
            })
            .unwrap()
        };
        apply(
            &heard,
            &told("a", crate::wall::ms(wall) + 30_000),
            now,
            wall,
        );
        apply(&heard, &told("b", crate::wall::ms(wall) - 1), now, wall);
        let suspect = |d: &str, at| heard.lock().get(d).is_some_and(|u: &Instant| *u > at);
        assert!(suspect("a", now + Duration::from_secs(29)));
        assert!(
            !suspect("a", now + Duration::from_secs(31)),
            "the hint ends"
        );
        assert!(!suspect("b", now), "an opening already over is not taken");
        apply(&heard, b"not json", now, wall);
        assert_eq!(heard.lock().len(), 1);
    }
}
