//! Cool-downs: what a 429 decides, and the keys (upstreams) that asked us to back off, until
//! when.
//!
//! An upstream that answers 429 says, in `retry-after`, when to come back. Until then its
//! admission grants no slot (queued work waits in sluice rather than meet the same wall),
//! and for a while longer sluice sends it no optional work (hedges), because every extra
//! request spends the quota that its other requests need.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

/// The wait a 429 without `retry-after` is taken to ask for.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// How long hedges keep away from a deployment that answered 429: at least this long, or its
/// `retry-after` if longer. An upstream that just refused us has no quota to spare, and a
/// hedge that spends it is paid for by the upstream's next ordinary request.
pub const HEDGE_QUIET_AFTER_429: Duration = Duration::from_secs(10);

/// What a 429 at `now` decides for its deployment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pushback {
    /// Its admission grants no slot before this (`None`: its pacer's emptied bucket is the
    /// wait).
    pub pause_until: Option<Instant>,
    /// No hedge goes to it for this long.
    pub quiet_for: Duration,
}

/// How long a 429 asks its deployment to wait: its `retry-after` when it said; nothing more
/// than the pacer's own wait when the deployment's requests are `paced` (a limit configured,
/// announced, or learnt from this very refusal: its bucket was just emptied, and refills at
/// the rate the upstream takes); else [`DEFAULT_RETRY_AFTER`]. (A whole second's pause after
/// each 429 that names no wait would stall every instance's calls, interactive ones too,
/// where the learnt pace alone keeps the upstream under its limit.)
pub fn wait_after_429(retry_after: Option<Duration>, paced: bool) -> Duration {
    match retry_after {
        Some(d) => d,
        None if paced => Duration::ZERO,
        None => DEFAULT_RETRY_AFTER,
    }
}

/// What a 429 that asked for `retry_after` (if it said) decides at `now`, its deployment's
/// requests `paced` or not once the pacer heard of it.
pub fn after_429(now: Instant, retry_after: Option<Duration>, paced: bool) -> Pushback {
    let wait = wait_after_429(retry_after, paced);
    Pushback {
        pause_until: (!wait.is_zero()).then(|| now + wait),
        quiet_for: retry_after
            .unwrap_or(DEFAULT_RETRY_AFTER)
            .max(HEDGE_QUIET_AFTER_429),
    }
}

/// The deployments cooling down after a 429, as the gateway reads and writes them. One
/// process keeps [`Cooldowns`] under a lock; several instances share them by another
/// implementation, no step changing.
pub trait Cooling: Send + Sync + std::fmt::Debug {
    /// `key` cools for `d` from `now` (a later end wins over an earlier one).
    fn start(&self, key: &std::sync::Arc<str>, now: Instant, d: Duration);
    /// Whether `key` is still cooling at `now`.
    fn active(&self, key: &std::sync::Arc<str>, now: Instant) -> bool;
}

impl Cooling for parking_lot::Mutex<Cooldowns<std::sync::Arc<str>>> {
    fn start(&self, key: &std::sync::Arc<str>, now: Instant, d: Duration) {
        self.lock().start(key.clone(), now, d);
    }

    fn active(&self, key: &std::sync::Arc<str>, now: Instant) -> bool {
        self.lock().active(key, now)
    }
}

/// Keys cooling down, and until when.
#[derive(Debug)]
pub struct Cooldowns<K> {
    until: HashMap<K, Instant>,
}

impl<K> Default for Cooldowns<K> {
    fn default() -> Self {
        Self {
            until: HashMap::new(),
        }
    }
}

impl<K: Hash + Eq> Cooldowns<K> {
    /// No key cooling.
    pub fn new() -> Self {
        Self::default()
    }

    /// `key` cools for `d` from `now` (a later end wins over an earlier one).
    pub fn start(&mut self, key: K, now: Instant, d: Duration) {
        let end = now + d;
        let slot = self.until.entry(key).or_insert(end);
        if *slot < end {
            *slot = end;
        }
    }

    /// Whether `key` is still cooling at `now`.
    pub fn active(&self, key: &K, now: Instant) -> bool {
        self.until.get(key).is_some_and(|end| *end > now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_429_pauses_for_what_it_asked_and_keeps_hedges_away_longer() {
        let t = Instant::now();
        let p = after_429(t, Some(Duration::from_secs(3)), true);
        assert_eq!(p.pause_until, Some(t + Duration::from_secs(3)));
        assert_eq!(p.quiet_for, HEDGE_QUIET_AFTER_429);
        let p = after_429(t, None, false);
        assert_eq!(p.pause_until, Some(t + DEFAULT_RETRY_AFTER));
        let p = after_429(t, None, true);
        assert_eq!(
            p.pause_until, None,
            "the pacer's emptied bucket is the wait"
        );
        assert_eq!(
            p.quiet_for, HEDGE_QUIET_AFTER_429,
            "hedges keep away all the same"
        );
        let p = after_429(t, Some(Duration::from_secs(30)), false);
        assert_eq!(p.quiet_for, Duration::from_secs(30), "a longer ask wins");
    }

    #[test]
    fn a_key_cools_until_its_end() {
        let now = Instant::now();
        let mut c = Cooldowns::new();
        c.start("glm", now, Duration::from_secs(2));
        assert!(c.active(&"glm", now + Duration::from_millis(1999)));
        assert!(!c.active(&"glm", now + Duration::from_secs(2)));
        assert!(!c.active(&"deepseek", now));
    }

    #[test]
    fn a_shorter_cooldown_does_not_cut_a_longer_one() {
        let now = Instant::now();
        let mut c = Cooldowns::new();
        c.start("glm", now, Duration::from_secs(10));
        c.start("glm", now, Duration::from_secs(1));
        assert!(c.active(&"glm", now + Duration::from_secs(5)));
    }
}
