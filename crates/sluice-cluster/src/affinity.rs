//! Prefix affinity kept by every instance: which deployment last served each prompt prefix,
//! so that a request whose prompt starts like one another instance sent goes where that
//! prefix sits in the provider's prompt cache. Each instance holds a replica (routing reads
//! it on every request and never waits on Redis) fed from one log per model group; an
//! instance tells the others where a prefix went when it sends it somewhere new, or when it
//! last told them a quarter of the memory's time ago. Prompts are hashed with a fixed seed,
//! so the instances name a prefix alike.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use sluice_routing::affinity::{AffinityPolicy, PrefixIndex, PrefixMemory, Prefixes};
use tokio::time::Instant;

use crate::health::Kind;
use crate::log::{Logs, Start, Writer};

/// Records the log of one group keeps.
const KEEP: usize = 20_000;
/// Prefixes remembered as told, to tell each only when something changed.
const TOLD_KEPT: u64 = 100_000;

/// A prefix sent to a deployment.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Sent {
    hashes: Vec<u64>,
    len: usize,
    deployment: usize,
    /// When, in milliseconds of the wall clock.
    at_ms: u64,
}

/// One model group's prefix memory, shared.
pub struct RedisPrefixes {
    index: Arc<Mutex<PrefixIndex>>,
    log: Writer,
    /// The longest prefix told, by its hash: the deployment told.
    told: moka::sync::Cache<u64, usize>,
}

impl std::fmt::Debug for RedisPrefixes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisPrefixes").finish_non_exhaustive()
    }
}

impl RedisPrefixes {
    /// Group `group`'s memory by `policy`, shared through `logs`.
    pub(crate) fn new(logs: &Arc<Logs>, group: &str, policy: AffinityPolicy) -> Self {
        let index = Arc::new(Mutex::new(PrefixIndex::new(policy)));
        let replica = index.clone();
        let ttl = policy.ttl;
        let log = logs.topic(
            &format!("affinity:{{{group}}}"),
            Kind::Hints,
            KEEP,
            Start::Kept,
            Arc::new(move |data: &[u8]| {
                apply(&replica, ttl, data, Instant::now(), SystemTime::now())
            }),
        );
        let told = moka::sync::Cache::builder()
            .max_capacity(TOLD_KEPT)
            .time_to_live(ttl / 4)
            .build();
        Self { index, log, told }
    }
}

/// Takes another instance's record at `now` (`wall` on the calendar): the prefix is
/// remembered for what is left of its time.
fn apply(index: &Mutex<PrefixIndex>, ttl: Duration, data: &[u8], now: Instant, wall: SystemTime) {
    let sent: Sent = match serde_json::from_slice(data) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "a prefix affinity record from another instance could not be read; skipped");
            return;
        }
    };
    let age = crate::wall::age(sent.at_ms, wall);
    if age >= ttl {
        return;
    }
    let p = Prefixes {
        hashes: sent.hashes,
        len: sent.len,
    };
    let at = now.checked_sub(age).unwrap_or(now);
    index.lock().remember(&p, sent.deployment, at);
}

impl PrefixMemory for RedisPrefixes {
    fn preferred(&self, p: &Prefixes, now: Instant) -> Option<usize> {
        self.index.lock().preferred(p, now)
    }

    fn remember(&self, p: &Prefixes, deployment: usize, now: Instant) {
        self.index.lock().remember(p, deployment, now);
        let Some(&longest) = p.hashes.last() else {
            return;
        };
        if self.told.get(&longest) == Some(deployment) {
            return;
        }
        self.told.insert(longest, deployment);
        let sent = Sent {
            hashes: p.hashes.clone(),
            len: p.len,
            deployment,
            at_ms: crate::wall::ms(SystemTime::now()),
        };
        match serde_json::to_vec(&sent) {
            Ok(v) => self.log.append(v),
            Err(e) => tracing::error!(error = %e, "a prefix affinity record could not be written"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_routing::affinity::Affinity;

    #[test]
    fn a_prefix_sent_by_another_instance_is_preferred_here() {
        let policy = AffinityPolicy::default();
        // Two instances cut the same prompt into the same hashes.
        let (a, b) = (Affinity::new(policy), Affinity::new(policy));
        let prompt = vec![b'x'; 4 * 1024 + 100];
        let p = a.prefixes(&prompt);
        assert_eq!(p, b.prefixes(&prompt));
        let index = Mutex::new(PrefixIndex::new(policy));
        let (now, wall) = (Instant::now(), SystemTime::now());
        let sent = |at_ms| {
            serde_json::to_vec(&Sent {
                hashes: p.hashes.clone(),
                len: p.len,
                deployment: 2,
                at_ms,
            })
            .unwrap()
        };
        apply(
            &index,
            policy.ttl,
            &sent(crate::wall::ms(wall) - 1_000),
            now,
            wall,
        );
        assert_eq!(index.lock().preferred(&p, now), Some(2));
        // Remembered for what was left of its time.
        assert_eq!(index.lock().preferred(&p, now + policy.ttl), None);
        let stale = Mutex::new(PrefixIndex::new(policy));
        apply(
            &stale,
            policy.ttl,
            &sent(crate::wall::ms(wall) - 301_000),
            now,
            wall,
        );
        assert_eq!(stale.lock().preferred(&p, now), None);
        apply(&stale, policy.ttl, b"[1,2]", now, wall);
        assert_eq!(stale.lock().preferred(&p, now), None);
    }
}
