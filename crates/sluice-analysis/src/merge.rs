//! Clauses reviewed once for several findings. Two flagged clauses share a review when they
//! tripped the same rules, carry the same numbers, and either their words are near enough
//! (the same once case, spacing, punctuation and their own numbering (`4.1`, `(a)`) are set
//! aside, or nine in ten of their three-word runs shared), or they are of one kind in one
//! document: the same clause kind, the rules matched on the same words, and the same words
//! that turn an obligation (negation, permission, exception, softening: [`TURNS`]). Numbers
//! are never set aside: a notice of 30 days and one of 90 days are different clauses to
//! review; nor are the turning words: "shall not" and "may" are. A [`Merger`] lives as long
//! as a batch, so that near-identical clauses repeated across its documents are merged too.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt, Shared};
use parking_lot::Mutex;

use crate::review::{ReviewFailed, Reviewed};

/// A review's answer, awaited by every clause merged into it.
pub type Pending = Shared<BoxFuture<'static, Result<Reviewed, ReviewFailed>>>;

/// The share of three-word runs two clauses must have in common to be merged.
pub const NEAR: f64 = 0.9;

/// The words that change what a clause obliges: negation, permission and obligation,
/// exception and condition, softening (English words whole, Chinese terms anywhere).
pub const TURNS: [&str; 24] = [
    "not",
    "no",
    "never",
    "neither",
    "nor",
    "without",
    "except",
    "unless",
    "only",
    "may",
    "shall",
    "must",
    "mutual",
    "mutually",
    "reasonable",
    "reasonably",
    "capped",
    "provided",
    "不",
    "除",
    "应当",
    "可以",
    "双方",
    "合理",
];

/// What makes clauses of one kind in one document: where they are, what they are, the
/// words the rules matched and the turning words they hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kind {
    /// The document.
    pub document: String,
    /// The clause's kind.
    pub kind: sluice_documents::ClauseKind,
    /// The words the rules matched, lower-cased.
    pub matched: String,
    /// The [`TURNS`] the clause holds, in that order.
    pub turns: Vec<&'static str>,
}

impl Kind {
    /// The kind of clause `text`, a `kind` in `document` whose rules matched `matched`.
    pub fn of(
        document: &str,
        kind: sluice_documents::ClauseKind,
        matched: &str,
        text: &str,
    ) -> Self {
        let lower = text.to_lowercase();
        let whole = |w: &str| {
            lower.match_indices(w).any(|(at, _)| {
                let before = lower[..at].chars().next_back();
                let after = lower[at + w.len()..].chars().next();
                !before.is_some_and(char::is_alphanumeric)
                    && !after.is_some_and(char::is_alphanumeric)
            })
        };
        let turns = TURNS
            .into_iter()
            .filter(|w| {
                if w.is_ascii() {
                    whole(w)
                } else {
                    lower.contains(w)
                }
            })
            .collect();
        Self {
            document: document.to_owned(),
            kind,
            matched: matched.to_lowercase(),
            turns,
        }
    }
}

/// What a clause is compared by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Its words, lower-cased, without punctuation or its own leading number.
    words: Vec<String>,
    /// The numbers it carries, in order.
    numbers: Vec<String>,
    /// Its kind in its document, when known.
    kind: Option<Kind>,
}

impl Shape {
    /// The shape of clause `text`.
    pub fn of(text: &str) -> Self {
        let mut words = Vec::new();
        let mut numbers = Vec::new();
        let mut first = true;
        for raw in text.split(|c: char| c.is_whitespace()) {
            let w: String = raw
                .chars()
                .filter(|c| c.is_alphanumeric())
                .flat_map(char::to_lowercase)
                .collect();
            if w.is_empty() {
                continue;
            }
            let numbering = first
                && raw
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "().".contains(c))
                && raw.len() <= 6
                && raw.chars().any(|c| c.is_ascii_digit() || c == '(');
            first = false;
            if numbering {
                continue;
            }
            if w.chars().any(|c| c.is_ascii_digit()) {
                numbers.push(w.clone());
            }
            // Text without spaces (Chinese) is compared character by character.
            if w.chars().count() > 12 && !w.is_ascii() {
                words.extend(w.chars().map(String::from));
            } else {
                words.push(w);
            }
        }
        Self {
            words,
            numbers,
            kind: None,
        }
    }

    /// The shape of clause `text`, of `kind` in its document.
    pub fn of_kind(text: &str, kind: Kind) -> Self {
        Self {
            kind: Some(kind),
            ..Self::of(text)
        }
    }

    /// The three-word runs.
    fn runs(&self) -> HashSet<&[String]> {
        if self.words.len() < 3 {
            return std::iter::once(&self.words[..]).collect();
        }
        self.words.windows(3).collect()
    }

    /// Whether `self` and `other` are near-identical.
    pub fn near(&self, other: &Self) -> bool {
        if self.numbers != other.numbers {
            return false;
        }
        if self.words == other.words {
            return true;
        }
        if self.kind.is_some() && self.kind == other.kind {
            return true;
        }
        let (a, b) = (self.runs(), other.runs());
        let shared = a.intersection(&b).count() as f64;
        let all = a.union(&b).count().max(1) as f64;
        shared / all >= NEAR
    }
}

/// A review already asked for.
struct Group {
    shape: Shape,
    pending: Pending,
}

/// The reviews asked for so far, by the rules their clauses tripped.
#[derive(Default)]
pub struct Merger {
    groups: Mutex<HashMap<Vec<usize>, Vec<Group>>>,
    merged: Mutex<u64>,
}

impl std::fmt::Debug for Merger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Merger")
            .field("merged", &self.merged())
            .finish()
    }
}

impl Merger {
    /// A merger with nothing asked yet.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The review of a clause of shape `shape` that tripped `rules`: one already asked for
    /// a near-identical clause (and `true`), or the one `ask` starts (and `false`).
    pub fn review(
        &self,
        rules: &[usize],
        shape: Shape,
        ask: impl FnOnce() -> BoxFuture<'static, Result<Reviewed, ReviewFailed>>,
    ) -> (Pending, bool) {
        let mut groups = self.groups.lock();
        let bucket = groups.entry(rules.to_vec()).or_default();
        if let Some(g) = bucket.iter().find(|g| g.shape.near(&shape)) {
            *self.merged.lock() += 1;
            return (g.pending.clone(), true);
        }
        let pending = ask().shared();
        bucket.push(Group {
            shape,
            pending: pending.clone(),
        });
        (pending, false)
    }

    /// How many clauses were merged into a review asked for another.
    pub fn merged(&self) -> u64 {
        *self.merged.lock()
    }
}
