//! A long text (a document sent with a question) cut into passages that respect paragraph,
//! clause and sentence boundaries, its boilerplate (page headers and footers repeated with
//! only their numbers changed) and its duplicated passages marked, and its passages ranked
//! by BM25 relevance to a question. Everything here is a pure function of the text: the same
//! document and question always give the same passages in the same order, so a prompt built
//! from them is byte for byte the same each time and the provider's prompt cache can hit.

mod bm25;
mod split;

pub use bm25::{rank, terms};
pub use split::{MAX_PASSAGE_BYTES, looks_like_heading};

use crate::count::Count;

/// Tokens the separators around a passage add when it is written (a blank line, perhaps a
/// `[...]` line).
const SEPARATOR_TOKENS: u64 = 3;

/// What a passage is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A heading (an article, section or clause title): kept with what it heads.
    Heading,
    /// Body text.
    Body,
    /// A line repeated across the document with only its digits changed (a page header or
    /// footer): only its first occurrence is kept.
    Boilerplate,
    /// A passage that already appeared (digits and whitespace aside).
    Duplicate,
}

/// One passage: a byte range of the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Passage {
    /// Where it starts in the text.
    pub start: usize,
    /// Where it ends.
    pub end: usize,
    /// What it is.
    pub kind: Kind,
    /// The heading it sits under (an index into the passages), if any.
    pub heading: Option<usize>,
    /// Its tokens, counted once when the text is cut.
    pub tokens: u64,
}

impl Passage {
    /// Its tokens.
    pub fn tokens(&self) -> u64 {
        self.tokens
    }
}

/// A text and its passages.
#[derive(Clone)]
pub struct Passages<'a> {
    text: &'a str,
    list: Vec<Passage>,
    count: &'a dyn Count,
}

impl std::fmt::Debug for Passages<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Passages")
            .field("list", &self.list)
            .finish()
    }
}

impl<'a> Passages<'a> {
    /// `text` cut into passages, each counted with `count`.
    pub fn of(text: &'a str, count: &'a dyn Count) -> Self {
        let mut list = split::split(text);
        for p in &mut list {
            p.tokens = count.tokens(text.get(p.start..p.end).unwrap_or(""));
        }
        Self { text, list, count }
    }

    /// `text` cut again, its passages' tokens taken from `tokens` (what an earlier cut of
    /// the same text counted, [`Passages::token_counts`]) rather than counted anew.
    pub fn recut(text: &'a str, count: &'a dyn Count, tokens: &[u64]) -> Self {
        let mut list = split::split(text);
        if list.len() != tokens.len() {
            return Self::of(text, count);
        }
        for (p, t) in list.iter_mut().zip(tokens) {
            p.tokens = *t;
        }
        Self { text, list, count }
    }

    /// The tokens of every passage together: the document's, less the blank lines between
    /// passages (the document is counted once, passage by passage).
    pub fn tokens(&self) -> u64 {
        self.list.iter().map(|p| p.tokens).sum()
    }

    /// Every passage's tokens, in document order.
    pub fn token_counts(&self) -> Vec<u64> {
        self.list.iter().map(|p| p.tokens).collect()
    }

    /// The tokens of `text`, counted as the passages are.
    pub fn count(&self, text: &str) -> u64 {
        self.count.tokens(text)
    }

    /// Every passage, in document order.
    pub fn list(&self) -> &[Passage] {
        &self.list
    }

    /// The text of passage `i`.
    pub fn text(&self, i: usize) -> &'a str {
        self.list
            .get(i)
            .and_then(|p| self.text.get(p.start..p.end))
            .unwrap_or("")
    }

    /// The body passages worth sending (neither boilerplate nor duplicates), by index.
    pub fn bodies(&self) -> impl Iterator<Item = usize> + '_ {
        self.list
            .iter()
            .enumerate()
            .filter(|(_, p)| p.kind == Kind::Body)
            .map(|(i, _)| i)
    }

    /// The body passages, most relevant to `question` first (ties in document order).
    pub fn ranked(&self, question: &str) -> Vec<usize> {
        rank(self, question)
    }

    /// The tokens of passages `chosen` written out with [`Passages::write`].
    pub fn written_tokens(&self, chosen: &[usize]) -> u64 {
        self.count.tokens(&self.write(chosen))
    }

    /// Passages `chosen` (body indexes, any order) written in document order, each under
    /// its heading (once), separated by blank lines, with a `[...]` line where passages
    /// worth sending were left out between them.
    pub fn write(&self, chosen: &[usize]) -> String {
        let mut keep = vec![false; self.list.len()];
        for &i in chosen {
            if let Some(p) = self.list.get(i) {
                keep[i] = true;
                if let Some(h) = p.heading {
                    keep[h] = true;
                }
            }
        }
        let mut out = String::new();
        let mut gap = false;
        for (i, p) in self.list.iter().enumerate() {
            if keep[i] {
                if !out.is_empty() {
                    out.push_str("\n\n");
                    if gap {
                        out.push_str("[...]\n\n");
                    }
                }
                out.push_str(self.text(i));
                gap = false;
            } else if matches!(p.kind, Kind::Body | Kind::Heading) {
                gap = true;
            }
        }
        out
    }

    /// As many passages as fit in `budget` tokens when written, taken in the order of
    /// `ranked` (a passage that does not fit is passed over for the next), with the
    /// headings they need counted.
    pub fn fill(&self, ranked: &[usize], budget: u64) -> Vec<usize> {
        let mut chosen = Vec::new();
        let mut headed = vec![false; self.list.len()];
        // Each passage adds itself, its heading the first time, and a separator or two.
        let mut used: u64 = 0;
        for &i in ranked {
            let Some(p) = self.list.get(i) else {
                continue;
            };
            let head = p
                .heading
                .filter(|h| !headed[*h])
                .and_then(|h| self.list.get(h))
                .map_or(0, |h| h.tokens + SEPARATOR_TOKENS);
            let cost = p.tokens + SEPARATOR_TOKENS + head;
            if used + cost > budget {
                continue;
            }
            used += cost;
            if let Some(h) = p.heading {
                headed[h] = true;
            }
            chosen.push(i);
        }
        chosen
    }
}

#[cfg(test)]
mod tests;
