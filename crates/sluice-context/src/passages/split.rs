//! Cutting a text into passages. The rules, in order:
//!
//! 1. Lines repeated at least [`BOILERPLATE_REPEATS`] times once lower-cased, their digits
//!    masked and their spaces folded (a page header, "Page 12 of 140", a confidentiality
//!    footer), no longer than [`BOILERPLATE_MAX_BYTES`], and never within
//!    [`BOILERPLATE_MIN_GAP`] lines of each other (rows of a table differ only in their
//!    numbers too, but sit together), and not opening with a part's name or number
//!    ("Section 4", "7.2"), are boilerplate: their first occurrence is kept as a
//!    passage of its own, the others are marked.
//! 2. Blank lines end a paragraph; so does a heading line (kept as its own passage), and a
//!    line that opens a numbered clause ("7.3 ", "(b) ") starts a new one.
//! 3. A paragraph longer than [`MAX_PASSAGE_BYTES`] is cut at sentence ends (a `.`, `?`, `!`
//!    or `;` followed by a space), and a sentence longer than that at a space.
//! 4. A body passage whose text appeared before (case and spacing aside, digits not: "year 1"
//!    and "year 2" are different clauses) is a duplicate.
//! 5. Inside a fenced code block (between lines opening with ```` ``` ```` or `~~~`) no line is
//!    a heading, boilerplate or a clause's start: a `# comment` there is code.
//! 6. A heading that heads nothing (another heading follows it at once, or the text ends) is
//!    a body passage of its own: every line is sendable, none only as a title.

use hashbrown::{HashMap, HashSet};

use super::{Kind, Passage};

/// The longest passage, in bytes (about 400 tokens): long enough for a clause, short enough
/// that choosing one does not drag a page of unrelated text with it.
pub const MAX_PASSAGE_BYTES: usize = 1_600;
/// A line seen this often (digits aside) is a header or footer.
const BOILERPLATE_REPEATS: usize = 3;
/// A longer line is text, however often it repeats.
const BOILERPLATE_MAX_BYTES: usize = 200;
/// Occurrences of a header or footer lie at least this many lines apart.
const BOILERPLATE_MIN_GAP: usize = 4;

/// A line lower-cased, runs of whitespace folded, trimmed, and its digits masked when `digits`
/// says so.
fn masked(line: &str, digits: bool) -> String {
    let mut out = String::with_capacity(line.len());
    let mut space = false;
    for c in line.trim().chars() {
        if c.is_whitespace() {
            space = true;
            continue;
        }
        if space && !out.is_empty() {
            out.push(' ');
        }
        space = false;
        if digits && c.is_ascii_digit() {
            out.push('#');
        } else {
            out.extend(c.to_lowercase());
        }
    }
    out
}

/// Whether a line opens a numbered clause: `7.3 `, `12. `, `(b) `, `iv) `.
fn opens_clause(line: &str) -> bool {
    let t = line.trim_start();
    let b = t.as_bytes();
    let digits = b
        .iter()
        .take_while(|c| c.is_ascii_digit() || **c == b'.')
        .count();
    if digits > 0 && b.first().is_some_and(u8::is_ascii_digit) {
        return b.get(digits) == Some(&b' ');
    }
    if let Some(rest) = t.strip_prefix('(') {
        let inner = rest.bytes().take_while(u8::is_ascii_alphanumeric).count();
        return (1..=4).contains(&inner) && rest[inner..].starts_with(") ");
    }
    false
}

/// Words that open a heading of a part of the document.
const NAMED: [&str; 8] = [
    "ARTICLE", "Article", "SECTION", "Section", "SCHEDULE", "Schedule", "PART", "#",
];

/// Whether a line opens with a part's name or number ("Section 4", "7.2 "): such lines
/// repeat with only their numbers changed, yet are headings, never boilerplate.
fn names_a_part(line: &str) -> bool {
    let t = line.trim_start();
    NAMED.iter().any(|n| t.starts_with(n))
        || opens_clause(t)
        || t.starts_with(|c: char| c.is_ascii_digit())
}

/// Whether a line is in capitals (three capital letters or more, none lower-case; scripts
/// without case, Chinese say, are never in capitals).
fn in_capitals(line: &str) -> bool {
    let upper = line.chars().filter(|c| c.is_uppercase()).count();
    upper >= 3 && !line.chars().any(char::is_lowercase)
}

/// Marks that end a sentence or a clause, in Latin and CJK punctuation.
const ENDS: [char; 11] = ['.', '?', '!', ';', ':', '。', '？', '！', '；', '：', ')'];

/// Whether a line is a heading: short, not ending a sentence, and either named as one
/// (`ARTICLE`, `Section`, `Schedule`, a Markdown `#`), numbered and capitalised (`7. Term`),
/// or in capitals. (A line in capitals inside a paragraph in capitals, a disclaimer say, is
/// text: [`split`] asks this only of a line that stands alone.)
pub fn looks_like_heading(line: &str) -> bool {
    let t = line.trim();
    if t.is_empty() || t.len() > 100 || t.ends_with(['.', ',', ';', ':', '。', '，', '；', '：'])
    {
        return false;
    }
    if NAMED.iter().any(|n| t.starts_with(n)) {
        return true;
    }
    if in_capitals(t) {
        return true;
    }
    let numbered = t
        .bytes()
        .take_while(|c| c.is_ascii_digit() || *c == b'.')
        .count();
    numbered > 0
        && t.len() <= 60
        && t[numbered..].starts_with(' ')
        && t[numbered..]
            .trim_start()
            .chars()
            .next()
            .is_some_and(char::is_uppercase)
}

/// Cuts `[start, end)` of `text` at sentence ends into pieces of at most
/// [`MAX_PASSAGE_BYTES`], pushing each.
fn cut(text: &str, start: usize, end: usize, heading: Option<usize>, out: &mut Vec<Passage>) {
    let mut from = start;
    while end - from > MAX_PASSAGE_BYTES {
        let window = &text[from..floor_char(text, from + MAX_PASSAGE_BYTES)];
        let at = window
            .char_indices()
            .rev()
            .find(|(i, c)| matches!(c, '.' | '?' | '!' | ';') && window[i + 1..].starts_with(' '))
            .map(|(i, _)| i + 1)
            .or_else(|| window.rfind(' '))
            .filter(|i| *i > 0)
            .unwrap_or(window.len());
        push(text, from, from + at, Kind::Body, heading, out);
        from += at;
        while text[from..end].starts_with(' ') {
            from += 1;
        }
    }
    push(text, from, end, Kind::Body, heading, out);
}

/// The largest char boundary of `text` at or before `i`.
fn floor_char(text: &str, mut i: usize) -> usize {
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn push(
    text: &str,
    start: usize,
    end: usize,
    kind: Kind,
    heading: Option<usize>,
    out: &mut Vec<Passage>,
) {
    let t = &text[start..end];
    let trimmed = t.trim();
    if trimmed.is_empty() {
        return;
    }
    let lead = t.len() - t.trim_start().len();
    let start = start + lead;
    out.push(Passage {
        start,
        end: start + trimmed.len(),
        kind,
        heading,
        // Counted by `Passages::of`.
        tokens: 0,
    });
}

/// Whether a line opens or closes a fenced code block.
fn is_fence(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("```") || t.starts_with("~~~")
}

/// Headings no passage sits under become body passages (under the heading before them that
/// does head something, if any).
fn orphans_to_bodies(out: &mut [Passage]) {
    let mut heads = vec![false; out.len()];
    for p in out.iter() {
        if let Some(h) = p.heading
            && let Some(x) = heads.get_mut(h)
        {
            *x = true;
        }
    }
    let mut last_head = None;
    for (i, p) in out.iter_mut().enumerate() {
        if p.kind != Kind::Heading {
            continue;
        }
        if heads[i] {
            last_head = Some(i);
        } else {
            p.kind = Kind::Body;
            p.heading = last_head;
        }
    }
}

/// The lines of `text` with their offsets.
fn lines_of(text: &str) -> Vec<(usize, &str)> {
    let mut lines = Vec::new();
    let mut at = 0;
    for line in text.split('\n') {
        lines.push((at, line));
        at += line.len() + 1;
    }
    lines
}

/// Per masked line (`keys`, by line): how often it occurs, where last, and whether two
/// occurrences were close.
fn counts_of(keys: &[Option<String>]) -> HashMap<&str, (usize, usize, bool)> {
    let mut counts: HashMap<&str, (usize, usize, bool)> = HashMap::new();
    for (i, k) in keys.iter().enumerate() {
        if let Some(k) = k {
            let e = counts.entry(k.as_str()).or_insert((0, i, false));
            if e.0 > 0 && i - e.1 < BOILERPLATE_MIN_GAP {
                e.2 = true;
            }
            e.0 += 1;
            e.1 = i;
        }
    }
    counts
}

/// The passages of `text`.
pub(super) fn split(text: &str) -> Vec<Passage> {
    let lines = lines_of(text);
    let keys: Vec<Option<String>> = lines
        .iter()
        .map(|(_, l)| {
            (l.len() <= BOILERPLATE_MAX_BYTES && !l.trim().is_empty()).then(|| masked(l, true))
        })
        .collect();
    let counts = counts_of(&keys);
    let blank = |i: usize| {
        lines
            .get(i)
            .is_none_or(|(_, l)| l.trim().is_empty() || l.contains('\x0c'))
    };
    // Page furniture stands alone (a blank line or a page break on each side), and a line
    // that repeats word for word is furniture only when it does not end a sentence: a real
    // sentence said in three places is text.
    let alone = |i: usize| (i == 0 || blank(i - 1)) && blank(i + 1);
    let mut exact: HashMap<String, usize> = HashMap::new();
    for (i, (_, l)) in lines.iter().enumerate() {
        if keys[i].is_some() {
            *exact.entry(masked(l, false)).or_default() += 1;
        }
    }
    let furniture = |i: usize, line: &str| {
        let sentence = line.trim_end().ends_with(ENDS);
        let same_every_time = exact
            .get(&masked(line, false))
            .is_some_and(|n| *n >= BOILERPLATE_REPEATS);
        alone(i) && !(sentence && same_every_time)
    };
    let mut seen_boiler: HashSet<&str> = HashSet::new();
    let mut out: Vec<Passage> = Vec::new();
    let mut heading: Option<usize> = None;
    let mut para: Option<(usize, usize)> = None;
    let mut fenced = false;
    let flush = |para: &mut Option<(usize, usize)>, heading, out: &mut Vec<Passage>| {
        if let Some((s, e)) = para.take() {
            cut(text, s, e, heading, out);
        }
    };
    for (i, (start, line)) in lines.iter().enumerate() {
        let end = start + line.len();
        if line.trim().is_empty() {
            flush(&mut para, heading, &mut out);
            continue;
        }
        let fence = is_fence(line);
        if fenced || fence {
            // Code: text of the paragraph it is in, whatever it looks like.
            fenced ^= fence;
            para = Some(match para {
                Some((s, _)) => (s, end),
                None => (*start, end),
            });
            continue;
        }
        if let Some(k) = keys[i].as_deref()
            && counts
                .get(k)
                .is_some_and(|(n, _, close)| *n >= BOILERPLATE_REPEATS && !close)
            && !names_a_part(line)
            && furniture(i, line)
        {
            flush(&mut para, heading, &mut out);
            // The first occurrence is kept as text of its own (heading nothing).
            let kind = if seen_boiler.insert(k) {
                Kind::Body
            } else {
                Kind::Boilerplate
            };
            push(text, *start, end, kind, None, &mut out);
            continue;
        }
        // A line in capitals is a heading only where it stands alone or opens a paragraph
        // not in capitals; inside a paragraph in capitals it is text.
        let named = NAMED.iter().any(|n| line.trim_start().starts_with(n));
        let prev_caps = i > 0 && para.is_some() && in_capitals(lines[i - 1].1);
        let next_caps = lines.get(i + 1).is_some_and(|(_, n)| in_capitals(n));
        let caps_paragraph = !named && in_capitals(line) && (prev_caps || next_caps);
        if !caps_paragraph && looks_like_heading(line) {
            flush(&mut para, heading, &mut out);
            push(text, *start, end, Kind::Heading, None, &mut out);
            heading = Some(out.len() - 1);
            continue;
        }
        // A numbered line opens a clause only after a line that ended a sentence or a
        // clause's heading: "... under Section\n2.1 of this License" is one sentence.
        let after_end = i == 0 || lines[i - 1].1.trim_end().ends_with(ENDS) || para.is_none();
        if opens_clause(line) && after_end {
            flush(&mut para, heading, &mut out);
        }
        para = Some(match para {
            Some((s, _)) => (s, end),
            None => (*start, end),
        });
    }
    flush(&mut para, heading, &mut out);
    orphans_to_bodies(&mut out);
    // Duplicated body passages.
    let mut seen: HashSet<String> = HashSet::new();
    for p in out.iter_mut().filter(|p| p.kind == Kind::Body) {
        if !seen.insert(masked(&text[p.start..p.end], false)) {
            p.kind = Kind::Duplicate;
        }
    }
    out
}
