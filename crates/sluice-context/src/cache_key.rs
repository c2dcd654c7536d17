//! Provider prompt-cache keys (OpenAI's `prompt_cache_key`): requests of one tenant that
//! share a stable prefix (tools and system prompt) get the same key, so the provider routes
//! them to the machine that holds that prefix. A provider keeps one key on one machine only
//! up to a rate (about 15 requests a minute for OpenAI); past it, requests overflow to
//! machines without the prefix. So a prefix busier than that is spread over a few keys, each
//! kept under the rate: the first key with room in the last minute takes the request, and
//! when every key is full, the least used. State and a pure decision of `now`.

use std::collections::VecDeque;
use std::time::Duration;

use hashbrown::HashMap;
use tokio::time::Instant;

/// The window a key's rate is counted over.
const WINDOW: Duration = Duration::from_secs(60);
/// Prefixes remembered at most; past it the idle ones are forgotten.
const PREFIXES_KEPT: usize = 10_000;

/// How keys are spread: `prompt_cache_key = { ... }` of a `[models.GROUP]`, one key per
/// tenant and stable prefix spread over up to `keys` keys so that none carries more than
/// `per_key_rpm` requests a minute (every field optional, unknown fields refused).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Spread {
    /// Requests a minute one key may carry.
    pub per_key_rpm: u32,
    /// Keys one prefix may be spread over.
    pub keys: u32,
}

impl Default for Spread {
    fn default() -> Self {
        Self {
            per_key_rpm: 15,
            keys: 4,
        }
    }
}

impl Spread {
    /// What is wrong with it, if anything: (field, message).
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if self.per_key_rpm == 0 {
            out.push(("per_key_rpm", "must be at least 1".into()));
        }
        if self.keys == 0 {
            out.push(("keys", "must be at least 1".into()));
        }
        out
    }
}

/// The keys handed out lately, per tenant and prefix.
#[derive(Debug)]
pub struct Keys {
    spread: Spread,
    /// Per prefix hash: each key's recent uses.
    recent: HashMap<u64, Vec<VecDeque<Instant>>>,
}

/// FNV-1a over the tenant, a separator and the prefix: stable across runs and instances, so
/// every gateway instance derives the same key.
fn digest(tenant: &str, prefix: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in tenant.bytes().chain([0xff]).chain(prefix.iter().copied()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl Keys {
    /// No keys handed out yet.
    pub fn new(spread: Spread) -> Self {
        Self {
            spread,
            recent: HashMap::new(),
        }
    }

    /// The key for a request of `tenant` whose stable prefix is `prefix`, at `now`.
    pub fn key(&mut self, now: Instant, tenant: &str, prefix: &[u8]) -> String {
        let h = digest(tenant, prefix);
        if self.recent.len() >= PREFIXES_KEPT && !self.recent.contains_key(&h) {
            self.forget_idle(now);
        }
        let n = self.spread.keys.max(1) as usize;
        let slots = self
            .recent
            .entry(h)
            .or_insert_with(|| vec![VecDeque::new(); n]);
        for s in slots.iter_mut() {
            while s
                .front()
                .is_some_and(|t| now.saturating_duration_since(*t) >= WINDOW)
            {
                s.pop_front();
            }
        }
        let limit = self.spread.per_key_rpm.max(1) as usize;
        let i = slots
            .iter()
            .position(|s| s.len() < limit)
            .or_else(|| (0..slots.len()).min_by_key(|i| slots[*i].len()))
            .unwrap_or(0);
        if let Some(s) = slots.get_mut(i) {
            if s.len() >= limit * 4 {
                s.pop_front();
            }
            s.push_back(now);
        }
        format!("sluice-{h:016x}-{i}")
    }

    /// Prefixes remembered.
    pub fn len(&self) -> usize {
        self.recent.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.recent.is_empty()
    }

    fn forget_idle(&mut self, now: Instant) {
        self.recent.retain(|_, slots| {
            slots.iter().any(|s| {
                s.back()
                    .is_some_and(|t| now.saturating_duration_since(*t) < WINDOW)
            })
        });
        if self.recent.len() >= PREFIXES_KEPT {
            self.recent.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn at(s: u64) -> Instant {
        // A fixed origin: tests compare instants relative to it only.
        static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        *ORIGIN.get_or_init(Instant::now) + Duration::from_secs(s)
    }

    #[test]
    fn one_prefix_keeps_one_key_under_the_rate() {
        let mut k = Keys::new(Spread::default());
        let first = k.key(at(0), "acme", b"system prompt");
        for s in 1..15 {
            assert_eq!(k.key(at(s), "acme", b"system prompt"), first);
        }
        assert!(first.starts_with("sluice-") && first.ends_with("-0"));
    }

    #[test]
    fn a_busier_prefix_spreads_over_keys_each_under_the_rate() {
        let mut k = Keys::new(Spread {
            per_key_rpm: 15,
            keys: 4,
        });
        let mut counts: HashMap<String, u32> = HashMap::new();
        // 50 requests in 50 seconds: 15, 15, 15, 5.
        for s in 0..50 {
            *counts.entry(k.key(at(s), "acme", b"p")).or_default() += 1;
        }
        let mut v: Vec<u32> = counts.values().copied().collect();
        v.sort_unstable();
        assert_eq!(v, [5, 15, 15, 15]);
        // A minute later the first key has room again.
        assert!(k.key(at(200), "acme", b"p").ends_with("-0"));
    }

    #[test]
    fn with_every_key_full_the_least_used_takes_it() {
        let mut k = Keys::new(Spread {
            per_key_rpm: 2,
            keys: 2,
        });
        let keys: Vec<String> = (0..6).map(|_| k.key(at(0), "t", b"p")).collect();
        assert_eq!(keys.iter().filter(|x| x.ends_with("-0")).count(), 3);
        assert_eq!(keys.iter().filter(|x| x.ends_with("-1")).count(), 3);
    }

    #[test]
    fn tenants_and_prefixes_get_their_own_keys_the_same_everywhere() {
        let mut a = Keys::new(Spread::default());
        let mut b = Keys::new(Spread::default());
        let x = a.key(at(0), "acme", b"p");
        assert_eq!(
            x,
            b.key(at(9), "acme", b"p"),
            "another instance derives the same key"
        );
        assert_ne!(x, a.key(at(0), "globex", b"p"));
        assert_ne!(x, a.key(at(0), "acme", b"q"));
        assert_eq!(a.len(), 3);
    }
}
