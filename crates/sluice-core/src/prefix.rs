//! Prompt prefixes cut into blocks: block `i`'s hash covers blocks `0..=i`, so equal hashes
//! mean equal prefixes. Prefix affinity remembers where such prefixes went; the simulator's
//! prompt cache remembers which it has seen. Only whole blocks count.

use std::hash::Hasher;

/// Bytes a block holds: about 256 tokens at 4 bytes a token. Providers cache prompts in
/// blocks of 64 to 128 tokens from 1,024 on; finer blocks would cost more hashing for little
/// more precision.
pub const BLOCK_BYTES: usize = 1024;

/// The chained hash of every whole-block prefix of `text`, shortest first, with `hasher`.
pub fn block_hashes(mut hasher: impl Hasher, text: &[u8]) -> Vec<u64> {
    text.chunks_exact(BLOCK_BYTES)
        .map(|block| {
            hasher.write(block);
            hasher.finish()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::DefaultHasher;

    #[test]
    fn equal_prefixes_hash_alike_and_a_partial_block_is_left_out() {
        let mut a = vec![b'a'; 3 * BLOCK_BYTES + 10];
        let b = a.clone();
        a[2 * BLOCK_BYTES] = b'z';
        let (ha, hb) = (
            block_hashes(DefaultHasher::new(), &a),
            block_hashes(DefaultHasher::new(), &b),
        );
        assert_eq!(ha.len(), 3);
        assert_eq!(ha[..2], hb[..2], "the first two blocks are the same");
        assert_ne!(ha[2], hb[2], "the third differs, and so does its chain");
    }
}
