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

/// The words of `text` BM25 counts: runs of letters and digits, lower-cased, of two
/// characters or more, stop words left out.
pub fn terms(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().nth(1).is_some())
        .map(str::to_lowercase)
        .filter(|w| !STOP.contains(&w.as_str()))
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
