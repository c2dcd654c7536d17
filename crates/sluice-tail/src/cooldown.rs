//! Cool-downs: keys (upstreams) that asked us to back off, until when.
//!
//! An upstream that answers 429 says, in `retry-after`, when to come back; until then sluice
//! sends it no optional work (hedges), because every extra request spends the quota that its
//! other requests need.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

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

    #[tokio::test(start_paused = true)]
    async fn a_key_cools_until_its_end() {
        let now = Instant::now();
        let mut c = Cooldowns::new();
        c.start("glm", now, Duration::from_secs(2));
        assert!(c.active(&"glm", now + Duration::from_millis(1999)));
        assert!(!c.active(&"glm", now + Duration::from_secs(2)));
        assert!(!c.active(&"deepseek", now));
    }

    #[tokio::test(start_paused = true)]
    async fn a_shorter_cooldown_does_not_cut_a_longer_one() {
        let now = Instant::now();
        let mut c = Cooldowns::new();
        c.start("glm", now, Duration::from_secs(10));
        c.start("glm", now, Duration::from_secs(1));
        assert!(c.active(&"glm", now + Duration::from_secs(5)));
    }
}
