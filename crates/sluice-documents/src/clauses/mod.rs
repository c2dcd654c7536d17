//! A document's pages cut into clauses. The rules, in order:
//!
//! 1. Page furniture is dropped: page numbers at a page's edge, and headers and footers (a
//!    line at a page's edge whose text, digits aside, is at an edge of a third of the pages).
//!    A sentence that repeats in the body is content, however often.
//! 2. Lines are joined into paragraphs. A blank line ends one; a line that opens a numbered
//!    part (`4.`, `4.1`, `(a)`, `Article 5`, `第三条`, `一、`) starts one, but only after a
//!    line that ended a sentence or a short heading: after "... under Section" a line
//!    starting "2.1 of this License" is the rest of the sentence.
//! 3. A paragraph of one short line without a sentence's end is a heading; capitals do not
//!    make a heading, shortness does (a disclaimer in capitals is a clause).
//! 4. A paragraph longer than [`MAX_CLAUSE_BYTES`] is cut at sentence ends.
//! 5. Each clause carries the number of the part it is in (`4.1`, `4(a)`, `第三条`), its page,
//!    its byte offset in the document's text (pages joined by form feeds) and an id made of
//!    the three: `NAME#NUMBER@OFFSET`, the same for the same text every time.

mod lines;
#[cfg(test)]
mod tests;

use lines::{Opening, abbreviation, ends_sentence, opening};

use crate::{Document, Format};

/// The longest clause, in bytes, before a paragraph is cut at sentence ends.
pub const MAX_CLAUSE_BYTES: usize = 1_200;
/// The longest line that can be a heading.
const HEADING_BYTES: usize = 90;

/// What a clause is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClauseKind {
    /// A heading: a part's title.
    Heading,
    /// A definition: `"Licensor" shall mean ...`, `"甲方"是指...`.
    Definition,
    /// Any other clause.
    Clause,
}

impl ClauseKind {
    /// Its name, as rules name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Heading => "heading",
            Self::Definition => "definition",
            Self::Clause => "clause",
        }
    }
}

/// One clause of a document.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Clause {
    /// `NAME#NUMBER@OFFSET` (`-` for a clause before any number).
    pub id: String,
    /// The number of the part it is in, as written.
    pub number: Option<String>,
    /// What it is.
    pub kind: ClauseKind,
    /// Its page, from 1.
    pub page: usize,
    /// Its byte offset in the document's text (pages joined by form feeds).
    pub offset: usize,
    /// Its text, lines joined.
    pub text: String,
}

/// A paragraph being gathered.
#[derive(Default)]
struct Para {
    text: String,
    /// For each line: where it starts in `text` and in the document.
    marks: Vec<(usize, usize)>,
    page: usize,
    first_len: usize,
    last_line: String,
    opening: Option<Opening>,
    heading: bool,
}

impl Para {
    fn push(&mut self, line: &str, at: usize) {
        let line = line.trim();
        if !self.text.is_empty() {
            let cjk = |c: Option<char>| c.is_some_and(is_cjk);
            if !(cjk(self.text.chars().next_back()) && cjk(line.chars().next())) {
                self.text.push(' ');
            }
        }
        self.marks.push((self.text.len(), at));
        self.text.push_str(line);
        self.last_line = line.to_string();
    }

    /// Where byte `i` of the joined text was in the document.
    fn source(&self, i: usize) -> usize {
        let k = self
            .marks
            .partition_point(|(j, _)| *j <= i)
            .saturating_sub(1);
        self.marks.get(k).map_or(0, |(j, at)| at + (i - j))
    }

    /// Whether it is one short line in capitals or a numbered title: a heading, if nothing
    /// follows on its next line.
    fn looks_like_title(&self) -> bool {
        self.marks.len() == 1
            && self.first_len <= 60
            && !ends_sentence(&self.text)
            && !self.text.ends_with(',')
            && (self.opening.as_ref().is_some_and(|o| !o.sub) || capitals(&self.text))
    }
}

/// Whether `c` is written without spaces between words (Chinese, Japanese).
fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3000..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xFF00..=0xFFEF)
}

/// Whether `s` has letters and all of them are capitals.
fn capitals(s: &str) -> bool {
    s.chars().any(char::is_alphabetic)
        && s.chars()
            .filter(|c| c.is_alphabetic())
            .all(|c| c.is_uppercase() || is_cjk(c))
}

/// `doc`'s clauses, in order.
pub fn split(doc: &Document) -> Vec<Clause> {
    split_pages(&doc.name, &doc.pages, doc.format == Format::Markdown)
}

/// The clauses of pages `pages` of document `name` (`markdown`: `#` lines are headings).
pub fn split_pages(name: &str, pages: &[String], markdown: bool) -> Vec<Clause> {
    let furniture = lines::furniture(pages);
    let mut paras: Vec<Para> = Vec::new();
    let mut cur = Para::default();
    let mut base = 0;
    for (p, (page, drop)) in pages.iter().zip(&furniture).enumerate() {
        let mut at = base;
        for (i, line) in page.split('\n').enumerate() {
            let here = at;
            at += line.len() + 1;
            if drop.get(i).copied().unwrap_or(false) {
                continue;
            }
            let (t, start) = unboxed(line);
            if t.is_empty() {
                flush(&mut paras, &mut cur);
                continue;
            }
            if rule_line(t) {
                // An underline makes the line above a heading; any other rule ends a paragraph.
                if cur.marks.len() == 1 && t.len() >= 3 && !t.starts_with('*') {
                    cur.heading = true;
                }
                flush(&mut paras, &mut cur);
                continue;
            }
            let md_heading = markdown && t.starts_with('#');
            let item = markdown && ["- ", "* ", "+ "].iter().any(|m| t.starts_with(m));
            let text = if md_heading {
                t.trim_start_matches('#').trim_start()
            } else {
                t
            };
            let op = opening(text);
            let starts = cur.text.is_empty()
                || md_heading
                || item
                || (op.is_some() && (ends_sentence(&cur.last_line) || cur.looks_like_title()))
                || (cur.marks.len() == 1
                    && capitals(&cur.text)
                    && !capitals(t)
                    && cur.first_len <= 60);
            if starts {
                flush(&mut paras, &mut cur);
                cur.page = p + 1;
                cur.first_len = t.len();
                cur.opening = op;
                cur.heading = md_heading;
            }
            let lead = start + (t.len() - text.len());
            cur.push(text, here + lead);
            if md_heading {
                flush(&mut paras, &mut cur);
            }
        }
        flush(&mut paras, &mut cur);
        base += page.len() + 1;
    }
    number(name, paras)
}

/// A line's text, trimmed and without the frame of a box drawn in stars
/// (`*  6. Disclaimer  *`), and where that text starts in the line.
fn unboxed(line: &str) -> (&str, usize) {
    let t = line.trim();
    let inner = t
        .strip_prefix('*')
        .and_then(|r| r.strip_suffix('*'))
        .filter(|r| r.starts_with(' ') || r.is_empty())
        .map_or(t, str::trim);
    let start = if inner.is_empty() {
        0
    } else {
        line.find(inner).unwrap_or(0)
    };
    (inner, start)
}

/// Whether a line is only a rule or an underline: `====`, `----`, `****`, `____`.
fn rule_line(t: &str) -> bool {
    t.len() >= 3
        && t.chars().next().is_some_and(|c| "=-*_~".contains(c))
        && t.chars().all(|c| "=-*_~ ".contains(c))
}

/// Ends the paragraph being gathered.
fn flush(paras: &mut Vec<Para>, cur: &mut Para) {
    if !cur.text.is_empty() {
        paras.push(std::mem::take(cur));
    }
    *cur = Para::default();
}

/// Paragraphs numbered, kinded, and cut into clauses.
fn number(name: &str, paras: Vec<Para>) -> Vec<Clause> {
    let mut top: Option<String> = None;
    let mut out = Vec::new();
    for para in paras {
        let num = match &para.opening {
            Some(o) if o.sub => Some(format!("{}{}", top.as_deref().unwrap_or(""), o.number)),
            Some(o) => {
                top = Some(o.number.clone());
                top.clone()
            }
            None => top.clone(),
        };
        let words = para.text.split_whitespace().count();
        let heading = (para.heading && para.text.len() <= HEADING_BYTES)
            || (para.marks.len() == 1
                && para.text.len() <= HEADING_BYTES
                && para.opening.as_ref().is_none_or(|o| !o.sub)
                && (para.looks_like_title()
                    || (para.opening.is_some()
                        && words <= 8
                        && para.text.len() <= 70
                        && titled(&para.text)
                        && !para.text.contains(['。', '，', '；']))
                    || (words <= 10
                        && !ends_sentence(&para.text)
                        && para
                            .text
                            .chars()
                            .next()
                            .is_some_and(|c| c.is_uppercase() || is_cjk(c)))));
        let kind = if heading {
            ClauseKind::Heading
        } else if defines(&para.text) {
            ClauseKind::Definition
        } else {
            ClauseKind::Clause
        };
        let pieces = if heading {
            vec![(0, para.text.len())]
        } else {
            sentences(&para.text)
        };
        for (s, e) in pieces {
            let lead = para.text[s..e].len() - para.text[s..e].trim_start().len();
            let offset = para.source(s + lead);
            out.push(Clause {
                id: format!("{name}#{}@{offset}", num.as_deref().unwrap_or("-")),
                number: num.clone(),
                kind,
                page: para.page,
                offset,
                text: para.text[s..e].trim().to_string(),
            });
        }
    }
    out.retain(|c| !c.text.is_empty());
    out
}

/// Whether a numbered line reads as a title: its words after the number capitalised
/// (`9. Acceptance Not Required for Having Copies.`), or three at most; a sentence
/// (`1. This Agreement shall renew each year.`) is not.
fn titled(text: &str) -> bool {
    let words: Vec<&str> = text.split_whitespace().skip(1).collect();
    let capital = words
        .iter()
        .filter(|w| w.chars().next().is_some_and(|c| !c.is_lowercase()))
        .count();
    words.len() <= 3 || capital * 10 >= words.len() * 6
}

/// Whether a paragraph defines a term.
fn defines(text: &str) -> bool {
    let head = &text[..floor(text, 300)];
    let quoted = head.contains(['"', '“', '\'']);
    let en = [" means", " shall mean ", " has the meaning", " refers to "]
        .iter()
        .any(|w| head.contains(w));
    let zh = head[..floor(head, 120)].contains("是指") || head.contains("”指");
    (quoted && en) || zh
}

/// The largest char boundary at or below `i`.
fn floor(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// `text` as spans of whole sentences, each at most [`MAX_CLAUSE_BYTES`] (a longer sentence
/// is its own span).
fn sentences(text: &str) -> Vec<(usize, usize)> {
    if text.len() <= MAX_CLAUSE_BYTES {
        return vec![(0, text.len())];
    }
    let mut ends = Vec::new();
    let b = text.as_bytes();
    for (i, c) in text.char_indices() {
        let after = i + c.len_utf8();
        let end = match c {
            '。' | '；' | '！' | '？' => true,
            '.' | ';' | '?' | '!' => {
                b.get(after) == Some(&b' ')
                    && text[after..]
                        .trim_start()
                        .chars()
                        .next()
                        .is_some_and(|n| n.is_uppercase() || n == '(' || n == '"' || n == '“')
                    && !abbreviation(&text[..i])
            }
            _ => false,
        };
        if end {
            ends.push(after);
        }
    }
    ends.push(text.len());
    let mut out = Vec::new();
    let mut start = 0;
    let mut last = 0;
    for e in ends {
        if e - start > MAX_CLAUSE_BYTES && last > start {
            out.push((start, last));
            start = last;
        }
        last = e;
    }
    if start < text.len() {
        out.push((start, text.len()));
    }
    out
}
