//! Prefix affinity: which deployment last served each prompt prefix, so that a request whose
//! `messages` start like a recent one's goes where that prefix is likely still in the
//! provider's prompt cache.
//!
//! A prompt is cut into blocks of [`BLOCK_BYTES`]; block `i`'s hash covers blocks `0..=i`,
//! so equal hashes mean equal prefixes. The index maps those hashes to the deployment that
//! was sent them and when they expire. The longest remembered prefix decides, but only when
//! it covers at least `min_share` of the request: a system prompt every request shares would
//! otherwise pull the whole group onto one deployment. The algorithm takes `now` and knows
//! nothing of HTTP; the router asks it and tells it where each request went.

#[cfg(any(test, feature = "conformance"))]
pub mod conformance;

use std::hash::BuildHasher;
use std::time::Duration;

use foldhash::fast::FixedState;
use hashbrown::HashMap;
use parking_lot::Mutex;
use sluice_core::prefix::block_hashes;
use tokio::time::Instant;

pub use sluice_core::prefix::BLOCK_BYTES;

/// Prefixes remembered at most per group; past it, expired ones are dropped, then (if that
/// was not enough) all, which only costs the next requests their affinity.
const MAX_ENTRIES: usize = 100_000;

/// How affinity decides: `affinity = { ... }` of a `[models.GROUP]`, read as it is written
/// (every field optional, unknown fields refused).
#[derive(Clone, Copy, Debug, PartialEq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AffinityPolicy {
    /// The least share of a request's `messages` its remembered prefix must cover (0 to 1):
    /// a system prompt every request shares must not pull all traffic onto one deployment.
    pub min_share: f64,
    /// How long a prefix is remembered after it was last sent (providers keep prompt caches
    /// for 5 to 60 minutes).
    #[serde(with = "humantime_serde")]
    pub ttl: Duration,
}

impl AffinityPolicy {
    /// What is wrong with it, if anything: (field, message).
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if !(0.0..=1.0).contains(&self.min_share) {
            out.push(("min_share", "must be between 0 and 1".into()));
        }
        if self.ttl.is_zero() {
            out.push(("ttl", "must be longer than zero".into()));
        }
        out
    }
}

impl Default for AffinityPolicy {
    fn default() -> Self {
        Self {
            min_share: 0.5,
            ttl: Duration::from_secs(300),
        }
    }
}

/// A request's prompt, cut into chained block hashes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prefixes {
    /// The chained hash of each whole block's prefix, shortest first.
    pub hashes: Vec<u64>,
    /// The prompt's length in bytes.
    pub len: usize,
}

/// Where one prefix went.
#[derive(Clone, Copy, Debug)]
struct Seen {
    deployment: usize,
    expires: Instant,
}

/// Where a group's prompt prefixes went, as routing reads and writes it. One process keeps a
/// [`PrefixIndex`] under a lock; several instances keep one memory between them by another
/// implementation, routing unchanged.
pub trait PrefixMemory: Send + Sync + std::fmt::Debug {
    /// The deployment (by index) that last served the longest remembered prefix of `p`, if
    /// that prefix covers enough of it and is still remembered at `now`.
    fn preferred(&self, p: &Prefixes, now: Instant) -> Option<usize>;
    /// Notes that `p` was sent to `deployment` at `now`.
    fn remember(&self, p: &Prefixes, deployment: usize, now: Instant);
}

impl PrefixMemory for Mutex<PrefixIndex> {
    fn preferred(&self, p: &Prefixes, now: Instant) -> Option<usize> {
        self.lock().preferred(p, now)
    }

    fn remember(&self, p: &Prefixes, deployment: usize, now: Instant) {
        self.lock().remember(p, deployment, now);
    }
}

impl<M: PrefixMemory> PrefixMemory for std::sync::Arc<M> {
    fn preferred(&self, p: &Prefixes, now: Instant) -> Option<usize> {
        (**self).preferred(p, now)
    }

    fn remember(&self, p: &Prefixes, deployment: usize, now: Instant) {
        (**self).remember(p, deployment, now);
    }
}

/// The seed prompts are hashed with: fixed, so that every instance of a cluster (the same
/// build) names a prefix alike and one instance's memory of it serves the others.
const SEED: u64 = 0x51_1c_e0_af_f1_41_17_00;

/// A model group's affinity: the hasher its prompts are cut with (no lock needed) and the
/// memory of where their prefixes went.
#[derive(Debug)]
pub struct Affinity {
    hasher: FixedState,
    index: Box<dyn PrefixMemory>,
}

impl Affinity {
    /// Affinity by `policy`, remembering nothing yet, in this process.
    pub fn new(policy: AffinityPolicy) -> Self {
        Self::with_memory(Box::new(Mutex::new(PrefixIndex::new(policy))))
    }

    /// Affinity remembering in `memory`.
    pub fn with_memory(memory: Box<dyn PrefixMemory>) -> Self {
        Self {
            hasher: FixedState::with_seed(SEED),
            index: memory,
        }
    }

    /// The prefixes of `prompt` (only whole blocks count).
    pub fn prefixes(&self, prompt: &[u8]) -> Prefixes {
        Prefixes {
            hashes: block_hashes(self.hasher.build_hasher(), prompt),
            len: prompt.len(),
        }
    }

    /// See [`PrefixMemory::preferred`].
    pub fn preferred(&self, p: &Prefixes, now: Instant) -> Option<usize> {
        self.index.preferred(p, now)
    }

    /// See [`PrefixMemory::remember`].
    pub fn remember(&self, p: &Prefixes, deployment: usize, now: Instant) {
        self.index.remember(p, deployment, now);
    }
}

/// The remembered prefixes of one model group.
#[derive(Debug)]
pub struct PrefixIndex {
    policy: AffinityPolicy,
    seen: HashMap<u64, Seen>,
}

impl PrefixIndex {
    /// An empty index deciding by `policy`.
    pub fn new(policy: AffinityPolicy) -> Self {
        Self {
            policy,
            seen: HashMap::new(),
        }
    }

    /// The deployment (by index) that last served the longest remembered prefix of `p`, if
    /// that prefix covers at least the policy's share of it and has not expired at `now`.
    pub fn preferred(&self, p: &Prefixes, now: Instant) -> Option<usize> {
        // Prefixes were stored together, so the remembered ones are the first few; the last
        // of them is the longest.
        let mut best = None;
        for (i, h) in p.hashes.iter().enumerate() {
            match self.seen.get(h) {
                Some(s) if s.expires > now => best = Some((i + 1, s.deployment)),
                _ => break,
            }
        }
        let (blocks, deployment) = best?;
        let covered = (blocks * BLOCK_BYTES) as f64;
        (covered >= self.policy.min_share * p.len as f64).then_some(deployment)
    }

    /// Notes that `p` was sent to `deployment` at `now`.
    pub fn remember(&mut self, p: &Prefixes, deployment: usize, now: Instant) {
        if p.hashes.is_empty() {
            return;
        }
        if self.seen.len() + p.hashes.len() > MAX_ENTRIES {
            self.seen.retain(|_, s| s.expires > now);
            if self.seen.len() + p.hashes.len() > MAX_ENTRIES {
                self.seen.clear();
            }
        }
        let seen = Seen {
            deployment,
            expires: now + self.policy.ttl,
        };
        for h in &p.hashes {
            self.seen.insert(*h, seen);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn prompt(parts: &[(u8, usize)]) -> Vec<u8> {
        parts
            .iter()
            .flat_map(|(b, n)| std::iter::repeat_n(*b, *n))
            .collect()
    }

    #[test]
    fn a_long_shared_prefix_goes_back_where_it_went() {
        let t0 = Instant::now();
        let a = Affinity::new(AffinityPolicy::default());
        let doc = prompt(&[(b's', 2048), (b'd', 8192), (b'q', 500)]);
        let p = a.prefixes(&doc);
        assert_eq!(p.hashes.len(), 10);
        assert_eq!(a.preferred(&p, t0), None, "nothing seen yet");
        a.remember(&p, 1, t0);
        // Another question on the same document: 10 of its ~10.7 blocks are known.
        let again = a.prefixes(&prompt(&[(b's', 2048), (b'd', 8192), (b'r', 700)]));
        assert_eq!(a.preferred(&again, t0 + Duration::from_secs(10)), Some(1));
        // Until the prefix expires.
        assert_eq!(a.preferred(&again, t0 + Duration::from_secs(300)), None);
    }

    #[test]
    fn a_shared_system_prompt_alone_does_not_decide() {
        let t0 = Instant::now();
        let one = prompt(&[(b's', 2048), (b'a', 8192)]);
        // Same 2 KiB system prompt, another document: 2 of 10 blocks known, under half.
        let other = prompt(&[(b's', 2048), (b'b', 8192)]);
        let a = Affinity::new(AffinityPolicy::default());
        a.remember(&a.prefixes(&one), 0, t0);
        assert_eq!(a.preferred(&a.prefixes(&other), t0), None);
        let lenient = Affinity::new(AffinityPolicy {
            min_share: 0.1,
            ..AffinityPolicy::default()
        });
        lenient.remember(&lenient.prefixes(&one), 0, t0);
        assert_eq!(lenient.preferred(&lenient.prefixes(&other), t0), Some(0));
    }

    #[test]
    fn the_latest_deployment_wins_and_short_prompts_have_no_prefix() {
        let t0 = Instant::now();
        let index = Arc::new(Mutex::new(PrefixIndex::new(AffinityPolicy::default())));
        let a = Affinity::with_memory(Box::new(index.clone()));
        let p = a.prefixes(&prompt(&[(b'x', 4096)]));
        a.remember(&p, 0, t0);
        a.remember(&p, 2, t0);
        assert_eq!(a.preferred(&p, t0), Some(2));
        let short = a.prefixes(b"hello");
        assert!(short.hashes.is_empty());
        a.remember(&short, 1, t0);
        assert_eq!(a.preferred(&short, t0), None);
        assert_eq!(index.lock().seen.len(), 4);
    }

    #[test]
    fn the_index_stays_bounded() {
        let t0 = Instant::now();
        let index = Arc::new(Mutex::new(PrefixIndex::new(AffinityPolicy::default())));
        let a = Affinity::with_memory(Box::new(index.clone()));
        for i in 0..(MAX_ENTRIES / 4 + 10) {
            let mut text = vec![0u8; 4 * BLOCK_BYTES];
            text[..8].copy_from_slice(&(i as u64).to_le_bytes());
            a.remember(&a.prefixes(&text), 0, t0);
        }
        assert!(index.lock().seen.len() <= MAX_ENTRIES);
        assert!(!index.lock().seen.is_empty());
    }
}
