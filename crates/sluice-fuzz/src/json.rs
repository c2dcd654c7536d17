//! Edits that keep JSON well formed: one node of a seed's tree replaced by another value of
//! any type (a word of the dictionary, an extreme number, a deep or long array, null), a
//! member renamed or removed, an element repeated. These reach the checks past the parser,
//! which byte edits seldom do.

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Map, Value};

/// One change to a JSON tree.
#[derive(Clone, Debug)]
pub enum JsonEdit {
    /// Replaces the n-th node (in depth-first order) with a value.
    Replace(Index, Novel),
    /// Renames a member of the n-th object to a word.
    Rename(Index, Index),
    /// Removes a member of the n-th object, or an element of the n-th array.
    Remove(Index, Index),
    /// Adds a member named by a word to the n-th object.
    Add(Index, Index, Novel),
    /// Repeats the first element of the n-th array.
    Repeat(Index, u16),
}

/// A value to put in a tree.
#[derive(Clone, Debug)]
pub enum Novel {
    /// A word of the dictionary, as a string.
    Word(Index),
    /// A number chosen to break arithmetic.
    Number(u8),
    /// A string of `n` times a character.
    Long(u16, char),
    /// An array nested `n` deep.
    Deep(u8),
    /// `null`, `true`, `false`, `{}`, `[]`, `""`.
    Plain(u8),
}

fn novel() -> impl Strategy<Value = Novel> {
    prop_oneof![
        3 => any::<Index>().prop_map(Novel::Word),
        2 => any::<u8>().prop_map(Novel::Number),
        1 => (0u16..5000, any::<char>()).prop_map(|(n, c)| Novel::Long(n, c)),
        1 => (0u8..200).prop_map(Novel::Deep),
        1 => (0u8..6).prop_map(Novel::Plain),
    ]
}

/// A random edit of a tree.
pub fn edit() -> impl Strategy<Value = JsonEdit> {
    prop_oneof![
        4 => (any::<Index>(), novel()).prop_map(|(i, v)| JsonEdit::Replace(i, v)),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(i, w)| JsonEdit::Rename(i, w)),
        2 => (any::<Index>(), any::<Index>()).prop_map(|(i, k)| JsonEdit::Remove(i, k)),
        2 => (any::<Index>(), any::<Index>(), novel()).prop_map(|(i, w, v)| JsonEdit::Add(i, w, v)),
        1 => (any::<Index>(), 0u16..2000).prop_map(|(i, n)| JsonEdit::Repeat(i, n)),
    ]
}

/// The most nodes a tree may have after edits: more than the structure limit allows (so
/// inputs past it are made), few enough to make quickly.
const MAX_NODES: usize = 150_000;

const NUMBERS: &[f64] = &[
    0.0,
    -1.0,
    1.0,
    2.0,
    -0.5,
    0.5,
    1e-300,
    1e300,
    -1e300,
    4294967295.0,
    4294967296.0,
    18446744073709551615.0,
    9007199254740993.0,
    -9007199254740993.0,
    128000.0,
    3.5,
];

fn word(words: &[&[u8]], i: &Index) -> String {
    if words.is_empty() {
        return String::new();
    }
    String::from_utf8_lossy(words[i.index(words.len())]).into_owned()
}

fn make(n: &Novel, words: &[&[u8]]) -> Value {
    match n {
        Novel::Word(i) => Value::from(word(words, i)),
        Novel::Number(k) => match k % 20 {
            16 => Value::from(u64::MAX),
            17 => Value::from(i64::MIN),
            18 => Value::from(u64::from(u32::MAX) + 1),
            19 => Value::from(-1i64),
            k => serde_json::Number::from_f64(NUMBERS[usize::from(k)])
                .map_or(Value::Null, Value::Number),
        },
        Novel::Long(n, c) => Value::from(c.to_string().repeat(usize::from(*n))),
        Novel::Deep(d) => (0..*d).fold(Value::Null, |v, _| Value::Array(vec![v])),
        Novel::Plain(k) => match k {
            0 => Value::Null,
            1 => Value::Bool(true),
            2 => Value::Bool(false),
            3 => Value::Object(Map::new()),
            4 => Value::Array(Vec::new()),
            _ => Value::from(""),
        },
    }
}

fn count(v: &Value) -> usize {
    1 + match v {
        Value::Array(a) => a.iter().map(count).sum(),
        Value::Object(o) => o.values().map(count).sum(),
        _ => 0,
    }
}

/// The n-th node of `v` in depth-first order, counting down `n`.
fn nth<'a>(v: &'a mut Value, n: &mut usize) -> Option<&'a mut Value> {
    if *n == 0 {
        return Some(v);
    }
    *n -= 1;
    match v {
        Value::Array(a) => a.iter_mut().find_map(|c| nth(c, n)),
        Value::Object(o) => o.values_mut().find_map(|c| nth(c, n)),
        _ => None,
    }
}

/// Applies `edit` to `tree`, with `words` as the dictionary.
pub fn apply(tree: &mut Value, edit: &JsonEdit, words: &[&[u8]]) {
    let total = count(tree);
    let pick = |i: &Index| i.index(total);
    match edit {
        JsonEdit::Replace(i, v) => {
            if let Some(node) = nth(tree, &mut pick(i)) {
                *node = make(v, words);
            }
        }
        JsonEdit::Rename(i, w) => {
            if let Some(Value::Object(o)) = nth(tree, &mut pick(i))
                && let Some(key) = o.keys().next().cloned()
                && let Some(v) = o.remove(&key)
            {
                o.insert(word(words, w), v);
            }
        }
        JsonEdit::Remove(i, k) => match nth(tree, &mut pick(i)) {
            Some(Value::Object(o)) if !o.is_empty() => {
                let key = o.keys().nth(k.index(o.len())).cloned().unwrap_or_default();
                o.remove(&key);
            }
            Some(Value::Array(a)) if !a.is_empty() => {
                a.remove(k.index(a.len()));
            }
            _ => {}
        },
        JsonEdit::Add(i, w, v) => {
            if let Some(Value::Object(o)) = nth(tree, &mut pick(i)) {
                o.insert(word(words, w), make(v, words));
            }
        }
        JsonEdit::Repeat(i, n) => {
            if let Some(Value::Array(a)) = nth(tree, &mut pick(i))
                && let Some(first) = a.first().cloned()
            {
                // Edits compound (a repeat of a repeat): the tree stays under MAX_NODES.
                let room = MAX_NODES.saturating_sub(total) / count(&first).max(1);
                a.extend(std::iter::repeat_n(first, usize::from(*n).min(room)));
            }
        }
    }
}
