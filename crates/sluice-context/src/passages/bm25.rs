//! BM25 relevance of passages to a question (Robertson and Zaragoza's Okapi BM25, k1 = 1.2,
//! b = 0.75). A passage's text counts with the heading it sits under, so a clause titled
//! "Termination" scores for a question about termination. Only the question's terms are
//! counted, so ranking a document costs one pass over its words.

use hashbrown::HashMap;

use super::Passages;

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// Words too common to say what a passage is about.
const STOP: [&str; 40] = [
    "a", "an", "and", "any", "are", "as", "at", "be", "by", "do", "does", "for", "from", "has",
    "have", "how", "if", "in", "into", "is", "it", "its", "not", "of", "on", "or", "shall", "such",
    "that", "the", "their", "this", "to", "under", "was", "what", "when", "which", "with", "will",
];

/// Whether `c` is written without spaces between words (Chinese, Japanese, Korean).
fn unspaced(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3400..=0x4DBF    // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F) // CJK Extensions B-F and supplements
}

/// The words of `text` BM25 counts: runs of letters and digits, lower-cased, of two
/// characters or more, stop words left out. A run of Chinese, Japanese or Korean is cut into
/// its overlapping pairs of characters (those scripts put no space between words, and a pair
/// is the unit that finds a word of two characters without a dictionary); a single character
/// alone counts as itself.
pub fn terms(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).flat_map(|run| {
        let mut out: Vec<String> = Vec::new();
        let mut spaced = String::new();
        let mut cjk: Vec<char> = Vec::new();
        let flush_cjk = |cjk: &mut Vec<char>, out: &mut Vec<String>| {
            match cjk.len() {
                0 => {}
                1 => out.push(cjk.iter().collect()),
                _ => out.extend(cjk.windows(2).map(|w| w.iter().collect::<String>())),
            }
            cjk.clear();
        };
        let flush_spaced = |w: &mut String, out: &mut Vec<String>| {
            if w.chars().nth(1).is_some() {
                let l = w.to_lowercase();
                if !STOP.contains(&l.as_str()) {
                    out.push(l);
                }
            }
            w.clear();
        };
        for c in run.chars() {
            if unspaced(c) {
                flush_spaced(&mut spaced, &mut out);
                cjk.push(c);
            } else {
                flush_cjk(&mut cjk, &mut out);
                spaced.push(c);
            }
        }
        flush_cjk(&mut cjk, &mut out);
        flush_spaced(&mut spaced, &mut out);
        out
    })
}

/// The body passages of `p`, most relevant to `question` first; ties (and passages sharing
/// no term with it) in document order.
pub fn rank(p: &Passages<'_>, question: &str) -> Vec<usize> {
    let mut query: Vec<String> = terms(question).collect();
    query.sort();
    query.dedup();
    let slot: HashMap<&str, usize> = query
        .iter()
        .enumerate()
        .map(|(i, t)| (t.as_str(), i))
        .collect();
    let bodies: Vec<usize> = p.bodies().collect();
    // Per body passage: its length in terms and the count of each query term.
    let mut lengths = Vec::with_capacity(bodies.len());
    let mut counts = vec![0u32; bodies.len() * query.len().max(1)];
    let mut heading_cache: HashMap<usize, (usize, Vec<u32>)> = HashMap::new();
    for (n, &i) in bodies.iter().enumerate() {
        let mut len = 0usize;
        let row = &mut counts[n * query.len()..(n + 1) * query.len()];
        for t in terms(p.text(i)) {
            len += 1;
            if let Some(&s) = slot.get(t.as_str()) {
                row[s] += 1;
            }
        }
        if let Some(h) = p.list()[i].heading {
            let (hl, hc) = heading_cache.entry(h).or_insert_with(|| {
                let mut c = vec![0u32; query.len()];
                let mut l = 0;
                for t in terms(p.text(h)) {
                    l += 1;
                    if let Some(&s) = slot.get(t.as_str()) {
                        c[s] += 1;
                    }
                }
                (l, c)
            });
            len += *hl;
            for (r, c) in row.iter_mut().zip(hc.iter()) {
                *r += c;
            }
        }
        lengths.push(len);
    }
    let docs = bodies.len() as f64;
    let avg = if bodies.is_empty() {
        1.0
    } else {
        (lengths.iter().sum::<usize>() as f64 / docs).max(1.0)
    };
    let idf: Vec<f64> = (0..query.len())
        .map(|s| {
            let df = (0..bodies.len())
                .filter(|n| counts[n * query.len() + s] > 0)
                .count() as f64;
            (1.0 + (docs - df + 0.5) / (df + 0.5)).ln()
        })
        .collect();
    let mut scored: Vec<(f64, usize)> = bodies
        .iter()
        .enumerate()
        .map(|(n, &i)| {
            let norm = K1 * (1.0 - B + B * lengths[n] as f64 / avg);
            let score = (0..query.len())
                .map(|s| {
                    let tf = f64::from(counts[n * query.len() + s]);
                    idf[s] * tf * (K1 + 1.0) / (tf + norm)
                })
                .sum::<f64>();
            (score, i)
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().map(|(_, i)| i).collect()
}
