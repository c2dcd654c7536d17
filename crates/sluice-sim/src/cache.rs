//! Prompt-cache emulation: a prompt prefix seen recently on an upstream is reported as cached
//! tokens and shortens the time to first token, as provider prefix caches do.

use std::collections::HashMap;
use std::hash::DefaultHasher;
use std::time::Duration;

use sluice_core::prefix::block_hashes;
use tokio::time::Instant;

pub use sluice_core::prefix::BLOCK_BYTES;
/// Entries kept at most; the oldest expire first.
const MAX_ENTRIES: usize = 200_000;

/// Approximate token count of `bytes` of prompt text.
pub fn tokens_of(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

/// Hashes of every whole-block prefix of `text`, shortest first.
pub fn prefix_hashes(text: &[u8]) -> Vec<u64> {
    block_hashes(DefaultHasher::new(), text)
}

/// One upstream's cache.
#[derive(Debug)]
pub struct PromptCache {
    ttl: Duration,
    min_tokens: u64,
    entries: HashMap<u64, Instant>,
}

impl PromptCache {
    /// A cache whose entries live `ttl` after their last use and that only caches prefixes of
    /// at least `min_tokens` (OpenAI: 1,024).
    pub fn new(ttl: Duration, min_tokens: u64) -> Self {
        Self {
            ttl,
            min_tokens,
            entries: HashMap::new(),
        }
    }

    /// Returns how many leading tokens of the prompt were cached, then stores (and refreshes)
    /// every block prefix of it.
    pub fn lookup_and_store(&mut self, now: Instant, hashes: &[u64]) -> u64 {
        let mut hit_blocks = 0;
        for (i, h) in hashes.iter().enumerate() {
            match self.entries.get(h) {
                Some(exp) if *exp > now => hit_blocks = i + 1,
                _ => break,
            }
        }
        if self.entries.len() + hashes.len() > MAX_ENTRIES {
            self.entries.retain(|_, exp| *exp > now);
        }
        for h in hashes {
            self.entries.insert(*h, now + self.ttl);
        }
        let cached = tokens_of(hit_blocks * BLOCK_BYTES);
        if cached >= self.min_tokens { cached } else { 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_prefix_hits_until_it_expires() {
        let now = Instant::now();
        let mut c = PromptCache::new(Duration::from_secs(300), 1024);
        let shared = vec![b'a'; 8 * BLOCK_BYTES];
        let mut first = shared.clone();
        first.extend_from_slice(b"question one");
        let mut second = shared.clone();
        second.extend_from_slice(b"question two, a different tail");
        assert_eq!(c.lookup_and_store(now, &prefix_hashes(&first)), 0, "cold");
        assert_eq!(
            c.lookup_and_store(now, &prefix_hashes(&second)),
            2048,
            "8 blocks of 256 tokens"
        );
        let later = now + Duration::from_secs(301);
        assert_eq!(
            c.lookup_and_store(later, &prefix_hashes(&second)),
            0,
            "expired"
        );
    }

    #[test]
    fn short_prefixes_are_not_cached() {
        let now = Instant::now();
        let mut c = PromptCache::new(Duration::from_secs(300), 1024);
        let p = vec![b'x'; 2 * BLOCK_BYTES];
        c.lookup_and_store(now, &prefix_hashes(&p));
        assert_eq!(
            c.lookup_and_store(now, &prefix_hashes(&p)),
            0,
            "512 tokens is under the minimum"
        );
    }

    #[test]
    fn a_changed_first_block_misses_everything() {
        let now = Instant::now();
        let mut c = PromptCache::new(Duration::from_secs(300), 0);
        let a = vec![b'a'; 6 * BLOCK_BYTES];
        let mut b = a.clone();
        b[0] = b'z';
        c.lookup_and_store(now, &prefix_hashes(&a));
        assert_eq!(c.lookup_and_store(now, &prefix_hashes(&b)), 0);
    }
}
