//! Byte edits: how an input is made from a seed of the corpus, blind to its format, with the
//! target's dictionary of words it knows (field names, keywords, delimiters).

use proptest::prelude::*;
use proptest::sample::Index;

/// One change to a byte string.
#[derive(Clone, Debug)]
pub enum Edit {
    /// Flips one bit.
    Flip(Index, u8),
    /// Sets one byte.
    Set(Index, u8),
    /// Inserts a word of the dictionary.
    Word(Index, Index),
    /// Inserts a byte that often means something (a quote, a bracket, a line end, 0xff).
    Special(Index, Index),
    /// Removes up to `n` bytes.
    Cut(Index, u8),
    /// Repeats a stretch of up to 64 bytes up to 64 times.
    Repeat(Index, u8, u8),
    /// Ends the input there.
    Truncate(Index),
    /// Moves a stretch to another place.
    Move(Index, u8, Index),
}

const SPECIAL: &[u8] = b"\"\\{}[],:\n\r\t 0-9.eE+\x00\xff\xfe\xc3\xa9/=;&?%#<>";

/// A random edit.
pub fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        1 => (any::<Index>(), 0u8..8).prop_map(|(i, b)| Edit::Flip(i, b)),
        1 => (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Edit::Set(i, b)),
        3 => (any::<Index>(), any::<Index>()).prop_map(|(i, w)| Edit::Word(i, w)),
        2 => (any::<Index>(), any::<Index>()).prop_map(|(i, s)| Edit::Special(i, s)),
        1 => (any::<Index>(), 1u8..64).prop_map(|(i, n)| Edit::Cut(i, n)),
        1 => (any::<Index>(), 1u8..64, 1u8..64).prop_map(|(i, n, t)| Edit::Repeat(i, n, t)),
        1 => any::<Index>().prop_map(Edit::Truncate),
        1 => (any::<Index>(), 1u8..64, any::<Index>()).prop_map(|(i, n, j)| Edit::Move(i, n, j)),
    ]
}

fn at(i: &Index, len: usize) -> usize {
    i.index(len + 1)
}

/// Applies `edit` to `bytes`, with `words` as the dictionary.
pub fn apply(bytes: &mut Vec<u8>, edit: &Edit, words: &[&[u8]]) {
    let len = bytes.len();
    match edit {
        Edit::Flip(i, bit) if len > 0 => bytes[i.index(len)] ^= 1 << (bit % 8),
        Edit::Set(i, b) if len > 0 => bytes[i.index(len)] = *b,
        Edit::Word(i, w) if !words.is_empty() => {
            let p = at(i, len);
            bytes.splice(p..p, words[w.index(words.len())].iter().copied());
        }
        Edit::Special(i, s) => bytes.insert(at(i, len), SPECIAL[s.index(SPECIAL.len())]),
        Edit::Cut(i, n) => {
            let p = at(i, len);
            bytes.drain(p..(p + usize::from(*n)).min(len));
        }
        Edit::Repeat(i, n, times) => {
            let p = at(i, len);
            let piece = bytes[p..(p + usize::from(*n)).min(len)].to_vec();
            for _ in 0..*times {
                bytes.splice(p..p, piece.iter().copied());
            }
        }
        Edit::Truncate(i) => bytes.truncate(at(i, len)),
        Edit::Move(i, n, j) => {
            let p = at(i, len);
            let piece: Vec<u8> = bytes.drain(p..(p + usize::from(*n)).min(len)).collect();
            let q = at(j, bytes.len());
            bytes.splice(q..q, piece);
        }
        _ => {}
    }
}
