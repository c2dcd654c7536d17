//! What one line is: whether it opens a numbered part (and its number), whether it ends a
//! sentence, whether it is page furniture (a page number, or a header or footer that repeats
//! at page edges).

use std::collections::HashMap;

/// Chinese numerals used in clause numbers.
const CN_DIGITS: &str = "零〇一二三四五六七八九十百千";

/// A line that opens a numbered part: its number as written (`4.1`, `(a)`, `Article 5`,
/// `第三条`) and whether it is a sub-item (`(a)`, `(iv)`, `（一）`) rather than a section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Opening {
    pub(crate) number: String,
    pub(crate) sub: bool,
}

/// The number a line opens with, if it opens a numbered part.
pub(crate) fn opening(line: &str) -> Option<Opening> {
    // A PDF's text layer may put a clause's quote marks, set in another font, first.
    let t = line.trim_start_matches(|c: char| c.is_whitespace() || "“”\"'".contains(c));
    dotted(t)
        .or_else(|| lettered(t))
        .or_else(|| named(t))
        .or_else(|| chinese(t))
}

/// `4`, `4.1`, `4.1.2` followed by `.`, `)` or `．` and a space, or by a space alone when
/// dotted (`2.1 Scope`); each part at most three digits (a year is not a clause number).
fn dotted(t: &str) -> Option<Opening> {
    let end = t
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == '.'))
        .map_or(t.len(), |(i, _)| i);
    let num = t[..end].trim_end_matches('.');
    if num.is_empty() || num.split('.').any(|p| p.is_empty() || p.len() > 3) {
        return None;
    }
    let rest = &t[end..];
    let closed = t[..end].ends_with('.') || rest.starts_with(')') || rest.starts_with('．');
    let rest = rest.trim_start_matches([')', '．']);
    let spaced = rest.is_empty() || rest.starts_with(char::is_whitespace);
    let full_width = t[end..].starts_with('．');
    ((closed || num.contains('.')) && (spaced || full_width)).then(|| Opening {
        number: num.to_string(),
        sub: false,
    })
}

/// `(a)`, `(iv)`, `(12)`, `a)`, and Chinese `（一）`, followed by a space or text.
fn lettered(t: &str) -> Option<Opening> {
    let (inner, rest) = if let Some(r) = t.strip_prefix('(') {
        let close = r.find(')')?;
        (&r[..close], &r[close + 1..])
    } else if let Some(r) = t.strip_prefix('（') {
        let close = r.find('）')?;
        return (!r[..close].is_empty()
            && r[..close]
                .chars()
                .all(|c| CN_DIGITS.contains(c) || c.is_ascii_digit()))
        .then(|| Opening {
            number: format!("({})", &r[..close]),
            sub: true,
        });
    } else {
        let close = t.find(')')?;
        let inner = &t[..close];
        if inner.len() != 1 {
            return None;
        }
        (inner, &t[close + 1..])
    };
    let ok = !inner.is_empty()
        && inner.len() <= 4
        && (inner.chars().all(|c| c.is_ascii_lowercase())
            && (inner.len() <= 2 || inner.chars().all(|c| "ivxl".contains(c)))
            || inner.chars().all(|c| c.is_ascii_digit()));
    (ok && rest.starts_with(char::is_whitespace)).then(|| Opening {
        number: format!("({inner})"),
        sub: true,
    })
}

/// `Article 5`, `SECTION 3.2`, `Clause 7`, `§ 4`.
fn named(t: &str) -> Option<Opening> {
    let lower = t.get(..8.min(t.len()))?.to_ascii_lowercase();
    let word = ["article", "section", "clause", "§"]
        .into_iter()
        .find(|w| lower.starts_with(w))?;
    let rest = t[word.len()..].trim_start();
    let end = rest
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '.'))
        .map_or(rest.len(), |(i, _)| i);
    let num = rest[..end].trim_end_matches('.');
    let roman = !num.is_empty() && num.chars().all(|c| "IVXLivxl".contains(c));
    let digits = num.chars().next().is_some_and(|c| c.is_ascii_digit())
        && num.chars().all(|c| c.is_ascii_digit() || c == '.');
    (roman || digits).then(|| Opening {
        number: num.to_string(),
        sub: false,
    })
}

/// `第三条`, `第12条`, `第一章`, and `一、`.
fn chinese(t: &str) -> Option<Opening> {
    if let Some(r) = t.strip_prefix('第') {
        let end = r
            .char_indices()
            .find(|(_, c)| !(CN_DIGITS.contains(*c) || c.is_ascii_digit()))
            .map(|(i, _)| i)?;
        let unit = r[end..].chars().next()?;
        return (end > 0 && "条章节款部".contains(unit)).then(|| Opening {
            number: format!("第{}{unit}", &r[..end]),
            sub: unit == '款',
        });
    }
    let end = t
        .char_indices()
        .find(|(_, c)| !CN_DIGITS.contains(*c))
        .map(|(i, _)| i)?;
    (end > 0 && t[end..].starts_with('、')).then(|| Opening {
        number: t[..end].to_string(),
        sub: false,
    })
}

/// Whether a line ends a sentence (so that a numbered line after it opens a new part, where
/// after `... under Section` it would be the wrapped rest of the sentence).
pub(crate) fn ends_sentence(line: &str) -> bool {
    let t = line.trim_end();
    match t.chars().next_back() {
        Some('.') => !abbreviation(&t[..t.len() - 1]),
        Some(c) => ";:?!。；：？！”\"".contains(c),
        None => false,
    }
}

/// Whether the word before a full stop is an abbreviation ("e.g.", "Inc.", "No.", "U.S.").
pub(crate) fn abbreviation(before: &str) -> bool {
    let word = before
        .rsplit(char::is_whitespace)
        .next()
        .unwrap_or("")
        .trim_start_matches(['(', '"', '“']);
    word.len() <= 1
        || word.contains('.')
        || [
            "inc", "ltd", "co", "no", "sec", "art", "mr", "ms", "dr", "vs", "etc", "corp",
        ]
        .contains(&word.to_ascii_lowercase().as_str())
}

/// Whether a line is only a page number: `12`, `- 12 -`, `Page 3 of 10`, `3/10`, `第 3 页`.
pub(crate) fn page_number(line: &str) -> bool {
    let lower = line.trim().to_lowercase();
    if !lower.chars().any(|c| c.is_ascii_digit()) || lower.len() > 40 {
        return false;
    }
    let rest = lower
        .replace("page", "")
        .replace("of", "")
        .replace(['第', '页', '共'], "");
    rest.chars()
        .all(|c| c.is_ascii_digit() || c.is_whitespace() || "-–—/|.()".contains(c))
}

/// A line lower-cased, its digits masked and its spaces folded: a running header and its
/// copies on other pages ("Page 3", "Page 4") look the same.
fn masked(line: &str) -> String {
    line.split_whitespace()
        .map(|w| {
            w.chars()
                .map(|c| if c.is_ascii_digit() { '#' } else { c })
                .flat_map(char::to_lowercase)
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// How many lines at each edge of a page are looked at for headers and footers.
const EDGE_LINES: usize = 3;

/// The page furniture of `pages`: for each page, which of its lines (by index in
/// `page.lines()`) are page numbers at an edge, or headers and footers: lines at a page
/// edge whose masked text is at an edge of at least a third of the pages (and two). Text
/// that repeats elsewhere is content; so is a line that opens a numbered part.
pub(crate) fn furniture(pages: &[String]) -> Vec<Vec<bool>> {
    let edges: Vec<Vec<usize>> = pages
        .iter()
        .map(|p| {
            let nonblank: Vec<usize> = p
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
                .map(|(i, _)| i)
                .collect();
            let mut e: Vec<usize> = nonblank.iter().take(EDGE_LINES).copied().collect();
            e.extend(nonblank.iter().rev().take(EDGE_LINES));
            e.sort_unstable();
            e.dedup();
            e
        })
        .collect();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (p, e) in pages.iter().zip(&edges) {
        let lines: Vec<&str> = p.lines().collect();
        let mut once: Vec<String> = e.iter().map(|&i| masked(lines[i])).collect();
        once.sort_unstable();
        once.dedup();
        for m in once {
            *seen.entry(m).or_default() += 1;
        }
    }
    let needed = pages.len().div_ceil(3).max(2);
    pages
        .iter()
        .zip(&edges)
        .map(|(p, e)| {
            let lines: Vec<&str> = p.lines().collect();
            let mut drop = vec![false; lines.len()];
            for &i in e {
                let l = lines[i];
                let repeated = pages.len() > 1
                    && seen.get(&masked(l)).is_some_and(|&n| n >= needed)
                    && opening(l).is_none();
                drop[i] = (page_number(l) && opening(l).is_none()) || repeated;
            }
            drop
        })
        .collect()
}
