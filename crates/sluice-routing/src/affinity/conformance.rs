//! The behaviour every [`PrefixMemory`] keeps, whatever holds the memory: one suite, run
//! against the in-process index here and against the Redis one in `sluice-cluster`'s tests
//! (with the `conformance` feature). `a` and `b` are two instances on one store (the same
//! object in one process), each deciding by the default [`AffinityPolicy`]; what `a`
//! remembers, `b` knows within [`LANDS_WITHIN`].

// Test support: a check that fails panics, as a test's assertion does.
#![allow(clippy::panic, clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use tokio::time::Instant;

use super::{AffinityPolicy, BLOCK_BYTES, PrefixMemory, Prefixes};

/// How long a prefix remembered on one instance may take to reach another.
pub const LANDS_WITHIN: Duration = Duration::from_secs(5);

/// A prompt of `blocks` whole blocks whose prefixes hash from `seed`.
fn prompt(seed: u64, blocks: usize) -> Prefixes {
    Prefixes {
        hashes: (0..blocks as u64).map(|i| seed * 1_000 + i).collect(),
        len: blocks * BLOCK_BYTES,
    }
}

/// Runs every check; `seed` keeps this run's prefixes apart from others' on one store.
pub async fn run(a: &dyn PrefixMemory, b: &dyn PrefixMemory, seed: u64) {
    let ttl = AffinityPolicy::default().ttl;
    let now = Instant::now();
    let sent = prompt(seed, 3);
    let longer = prompt(seed, 4);
    assert_eq!(a.preferred(&longer, now), None, "nothing remembered yet");
    a.remember(&sent, 1, now);
    assert_eq!(
        a.preferred(&longer, now),
        Some(1),
        "3 of 4 blocks known: the deployment that served them"
    );
    let mostly_new = Prefixes {
        hashes: vec![
            sent.hashes[0],
            seed * 1_000 + 500,
            seed * 1_000 + 501,
            seed * 1_000 + 502,
        ],
        len: 4 * BLOCK_BYTES,
    };
    assert_eq!(
        a.preferred(&mostly_new, now),
        None,
        "1 of 4 blocks is below the policy's share"
    );
    assert_eq!(
        a.preferred(&longer, now + ttl + Duration::from_secs(1)),
        None,
        "a prefix is forgotten after its time"
    );
    a.remember(&longer, 2, now);
    assert_eq!(
        a.preferred(&longer, now),
        Some(2),
        "the latest sending wins"
    );
    let deadline = tokio::time::Instant::now() + LANDS_WITHIN;
    while b.preferred(&longer, Instant::now()) != Some(2) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the other instance never learnt where the prefix went"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        b.preferred(&longer, Instant::now() + ttl + Duration::from_secs(1)),
        None,
        "the other instance forgets it after its time too"
    );
}

#[cfg(test)]
mod tests {
    use parking_lot::Mutex;

    use super::super::{AffinityPolicy, PrefixIndex};

    /// The in-process index keeps the behaviour every memory keeps.
    #[tokio::test]
    async fn the_local_index_conforms() {
        let local = Mutex::new(PrefixIndex::new(AffinityPolicy::default()));
        super::run(&local, &local, 7).await;
    }
}
