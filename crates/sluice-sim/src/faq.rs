//! The FAQ world, for rehearsing the semantic cache: labelled question pairs (the shipped
//! `bench/fow-cache-pairs.tsv`) become a stream of asks in which popular questions come back
//! as written, written another way (a greeting, thanks, lower case, a typo), in other words,
//! and as look-alikes that need another answer; a simulated model answers by
//! meaning (one answer per class of questions that share one); a simulated embedding model
//! places questions by the labels: a pair's two questions near each other (a shared topic),
//! those sharing an answer nearer still, with seeded noise. Its separation is this module's
//! choice, not a measurement: what a real embedder makes of the same pairs is measured by
//! `sluice bench semantic`.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, StandardNormal};

/// The labelled pairs shipped with the repository (source and licence in the file's header).
pub const SHIPPED: &str = include_str!("../../../bench/fow-cache-pairs.tsv");

/// Dimensions of the simulated embeddings.
pub const DIMENSIONS: usize = 64;

/// Shares of a question's embedding (squared weights, summing to 1): its pair's topic, its
/// answer's class, its own wording. Two questions of a pair that share an answer score about
/// 0.93; a pair's look-alikes about 0.85; questions of different pairs about 0.
const TOPIC: f64 = 0.85;
const CLASS: f64 = 0.08;
const OWN: f64 = 0.07;

/// One labelled pair.
#[derive(Clone, Debug, PartialEq)]
pub struct Pair {
    /// Whether one answer serves both.
    pub same: bool,
    /// The first question.
    pub a: String,
    /// The second question.
    pub b: String,
    /// Its category, when the file names one.
    pub category: String,
}

/// Why a pairs file could not be read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PairsError {
    /// A line is not `label<TAB>first<TAB>second[<TAB>category]`.
    #[error("line {line}: expected label<TAB>first<TAB>second")]
    Shape {
        /// The line, from 1.
        line: usize,
    },
    /// A label is neither 0 nor 1.
    #[error("line {line}: label `{label}` is neither 0 nor 1")]
    Label {
        /// The line, from 1.
        line: usize,
        /// What it held.
        label: String,
    },
    /// No pairs at all.
    #[error("no pairs")]
    Empty,
}

/// Reads `label<TAB>first<TAB>second[<TAB>category]` lines (`#` lines are comments).
pub fn parse(text: &str) -> Result<Vec<Pair>, PairsError> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let mut f = line.split('\t');
        let (Some(label), Some(a), Some(b)) = (f.next(), f.next(), f.next()) else {
            return Err(PairsError::Shape { line: n + 1 });
        };
        let same = match label.trim() {
            "1" => true,
            "0" => false,
            other => {
                return Err(PairsError::Label {
                    line: n + 1,
                    label: other.to_string(),
                });
            }
        };
        out.push(Pair {
            same,
            a: a.to_string(),
            b: b.to_string(),
            category: f.next().unwrap_or("").trim().to_string(),
        });
    }
    if out.is_empty() {
        return Err(PairsError::Empty);
    }
    Ok(out)
}

/// Which questions share an answer: the same text, or a pair labelled so (joined
/// transitively). Question `i` of `n` pairs is pair `i`'s first, `n + i` its second.
#[derive(Clone, Debug)]
pub struct Classes {
    parent: Vec<usize>,
}

impl Classes {
    /// The classes of `pairs`.
    pub fn of(pairs: &[Pair]) -> Self {
        let n = pairs.len();
        let mut c = Self {
            parent: (0..2 * n).collect(),
        };
        let mut by_text: HashMap<&str, usize> = HashMap::new();
        for (i, p) in pairs.iter().enumerate() {
            for (k, text) in [(i, &p.a), (n + i, &p.b)] {
                match by_text.get(text.as_str()) {
                    Some(&j) => c.join(k, j),
                    None => {
                        by_text.insert(text, k);
                    }
                }
            }
            if p.same {
                c.join(i, n + i);
            }
        }
        c
    }

    fn root(&self, mut k: usize) -> usize {
        while self.parent[k] != k {
            k = self.parent[k];
        }
        k
    }

    fn join(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.root(a), self.root(b));
        self.parent[ra] = rb;
    }

    /// The class of pair `i`'s first question, or its second.
    pub fn of_question(&self, i: usize, second: bool) -> usize {
        self.root(if second { self.parent.len() / 2 + i } else { i })
    }
}

/// The ways users write `q` besides as written: with a greeting, with thanks, in lower case
/// without its final mark, and with two letters of its longest word swapped.
fn variants(q: &str) -> [String; 4] {
    let lower = q.trim_end_matches(['?', '.', '!']).to_lowercase();
    let mut typo = q.to_string();
    if let Some((at, word)) = q
        .split(' ')
        .scan(0, |at, w| {
            let start = *at;
            *at += w.len() + 1;
            Some((start, w))
        })
        .filter(|(_, w)| w.len() >= 5 && w.is_ascii())
        .max_by_key(|(_, w)| w.len())
    {
        let mut b = word.as_bytes().to_vec();
        b.swap(2, 3);
        typo.replace_range(at..at + word.len(), &String::from_utf8_lossy(&b));
    }
    let mut chars = q.chars();
    let greeted = match chars.next() {
        Some(c) => format!("Hi, {}{}", c.to_lowercase(), chars.as_str()),
        None => String::new(),
    };
    [greeted, format!("{q} Thanks!"), lower, typo]
}

/// Popularity by Zipf's law (exponent 1) over `n` items ranked at random: item `i` is drawn
/// with a weight of one over its rank.
#[derive(Clone, Debug)]
pub struct Popularity {
    cumulative: Vec<f64>,
}

impl Popularity {
    /// `n` items (at least one), ranked by `rng`.
    pub fn new(n: usize, rng: &mut StdRng) -> Self {
        let mut rank: Vec<usize> = (1..=n.max(1)).collect();
        rank.shuffle(rng);
        let mut sum = 0.0;
        let cumulative = rank
            .iter()
            .map(|r| {
                sum += 1.0 / *r as f64;
                sum
            })
            .collect();
        Self { cumulative }
    }

    /// An item drawn by `rng`.
    pub fn draw(&self, rng: &mut StdRng) -> usize {
        let total = self.cumulative.last().copied().unwrap_or(0.0);
        let at = rng.random::<f64>() * total;
        self.cumulative
            .partition_point(|c| *c < at)
            .min(self.cumulative.len() - 1)
    }
}

/// A question's place in the world: its answer's class and its topic (the questions joined
/// to it by any pair, labelled alike or not).
#[derive(Clone, Copy, Debug)]
struct Place {
    class: usize,
    topic: usize,
}

/// The FAQ world over a set of labelled pairs.
#[derive(Debug)]
pub struct Faq {
    pairs: Vec<Pair>,
    /// Each pair's two questions, each as written and then [`variants`].
    written: Vec<[Vec<Arc<str>>; 2]>,
    places: HashMap<String, Place>,
}

/// The shipped pairs' world, read once; `None` (logged) if the shipped file does not read.
pub fn shipped() -> Option<&'static Faq> {
    static FAQ: OnceLock<Option<Faq>> = OnceLock::new();
    FAQ.get_or_init(|| match parse(SHIPPED) {
        Ok(pairs) => Some(Faq::new(pairs)),
        Err(e) => {
            tracing::error!(error = %e, "the shipped question pairs do not read");
            None
        }
    })
    .as_ref()
}

/// A vector drawn from a standard normal per axis, seeded by `key` (FNV-1a of its bytes).
fn gaussian(key: &[u8]) -> Vec<f64> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let mut rng = StdRng::seed_from_u64(h);
    (0..DIMENSIONS)
        .map(|_| StandardNormal.sample(&mut rng))
        .collect()
}

fn unit(v: Vec<f64>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt().max(1e-12);
    v.into_iter().map(|x| (x / norm) as f32).collect()
}

impl Faq {
    /// The world of `pairs`.
    pub fn new(pairs: Vec<Pair>) -> Self {
        let classes = Classes::of(&pairs);
        let alike: Vec<Pair> = pairs
            .iter()
            .map(|p| Pair {
                same: true,
                ..p.clone()
            })
            .collect();
        let topics = Classes::of(&alike);
        let written: Vec<[Vec<Arc<str>>; 2]> = pairs
            .iter()
            .map(|p| {
                [&p.a, &p.b].map(|q| {
                    std::iter::once(q.clone())
                        .chain(variants(q))
                        .map(Arc::from)
                        .collect()
                })
            })
            .collect();
        // Questions as written first; written another way, a question keeps its place
        // (unless that text is a question of its own).
        let mut places = HashMap::new();
        for as_written in [true, false] {
            for (i, texts) in written.iter().enumerate() {
                for (second, texts) in [(false, &texts[0]), (true, &texts[1])] {
                    let place = Place {
                        class: classes.of_question(i, second),
                        topic: topics.of_question(i, second),
                    };
                    let (from, to) = if as_written { (0, 1) } else { (1, texts.len()) };
                    for t in &texts[from..to] {
                        places.entry(t.to_string()).or_insert(place);
                    }
                }
            }
        }
        Self {
            pairs,
            written,
            places,
        }
    }

    /// Its pairs.
    pub fn pairs(&self) -> &[Pair] {
        &self.pairs
    }

    /// The class of the answer to `question`, when it is one of the world's.
    pub fn class_of(&self, question: &str) -> Option<usize> {
        self.places.get(question).map(|p| p.class)
    }

    /// What the simulated model answers to a prompt (as [`crate::incoming::prompt_text`]
    /// writes one) whose last user message is one of the world's questions: the answer of
    /// its class, the same for every question that shares it.
    pub fn answer(&self, prompt: &[u8]) -> Option<String> {
        let text = std::str::from_utf8(prompt).ok()?;
        let last = &text[text.rfind("user:")? + "user:".len()..];
        let class = self.class_of(last.trim_end_matches('\n'))?;
        Some(format!(
            "Answer {class}: what we tell everyone who asks this, in the same words every time."
        ))
    }

    /// The simulated embedding of `text`: by its topic, class and wording when it is one of
    /// the world's questions; by its wording alone otherwise (so equal texts, an answer's
    /// say, are identical and different ones nearly orthogonal).
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let own = gaussian(text.as_bytes());
        let Some(p) = self.places.get(text) else {
            return unit(own);
        };
        let topic = gaussian(format!("topic {}", p.topic).as_bytes());
        let class = gaussian(format!("class {}", p.class).as_bytes());
        unit(
            (0..DIMENSIONS)
                .map(|k| TOPIC.sqrt() * topic[k] + CLASS.sqrt() * class[k] + OWN.sqrt() * own[k])
                .collect(),
        )
    }

    /// `n` asks drawn by `seed`: a pair by popularity (Zipf, exponent 1, over a random
    /// ranking), its first question as written when it has not been asked, and then either
    /// of its questions (the second: a paraphrase or a look-alike), half the time as
    /// written and half another way ([`variants`]).
    pub fn asks(&self, n: usize, seed: u64) -> Vec<Arc<str>> {
        let mut rng = StdRng::seed_from_u64(seed);
        let popularity = Popularity::new(self.pairs.len(), &mut rng);
        let mut asked = vec![false; self.pairs.len()];
        (0..n)
            .map(|_| {
                let i = popularity.draw(&mut rng);
                let second = asked[i] && rng.random::<bool>();
                let written = if asked[i] && rng.random::<bool>() {
                    1 + rng.random_range(0..4)
                } else {
                    0
                };
                asked[i] = true;
                self.written[i][usize::from(second)][written].clone()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cos(a: &[f32], b: &[f32]) -> f64 {
        a.iter()
            .zip(b)
            .map(|(x, y)| f64::from(*x) * f64::from(*y))
            .sum()
    }

    #[test]
    fn the_shipped_pairs_read_and_answers_follow_the_labels() {
        let faq = shipped().expect("the shipped pairs read");
        assert_eq!(faq.pairs().len(), 600);
        let (mut same, mut other) = (0, 0);
        for p in faq.pairs() {
            let a = faq.answer(format!("user:{}\n", p.a).as_bytes()).unwrap();
            let b = faq.answer(format!("system:rules\nuser:{}\n", p.b).as_bytes());
            if p.same {
                assert_eq!(Some(&a), b.as_ref(), "{} | {}", p.a, p.b);
                same += 1;
            } else if Some(&a) != b.as_ref() {
                other += 1;
            }
        }
        assert_eq!(same, 300);
        // Look-alikes get another answer (unless another pair says they share one).
        assert!(other >= 295, "{other}");
        assert_eq!(faq.answer(b"user:what is not asked\n"), None);
        // Written another way, a question gets its answer.
        let q = "Is the clinic open on Sundays?";
        let [greeted, thanked, lower, typo] = variants(q);
        assert_eq!(greeted, "Hi, is the clinic open on Sundays?");
        assert_eq!(thanked, "Is the clinic open on Sundays? Thanks!");
        assert_eq!(lower, "is the clinic open on sundays");
        assert_eq!(typo, "Is the clinic open on Sudnays?");
        let answer = |t: &str| faq.answer(format!("user:{t}\n").as_bytes());
        for v in [greeted, thanked, lower, typo] {
            assert_eq!(answer(&v), answer(q), "{v}");
        }
    }

    #[test]
    fn paraphrases_score_above_look_alikes_which_score_above_strangers() {
        let faq = shipped().unwrap();
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let (mut para, mut alike) = (Vec::new(), Vec::new());
        for p in faq.pairs() {
            let s = cos(&faq.embed(&p.a), &faq.embed(&p.b));
            if p.same { &mut para } else { &mut alike }.push(s);
        }
        let strangers: Vec<f64> = faq
            .pairs()
            .windows(2)
            .map(|w| cos(&faq.embed(&w[0].a), &faq.embed(&w[1].a)))
            .collect();
        let (p, a, s) = (mean(&para), mean(&alike), mean(&strangers));
        assert!((0.90..0.96).contains(&p), "{p}");
        assert!((0.80..0.89).contains(&a), "{a}");
        assert!(s.abs() < 0.1, "{s}");
        // Noisy: the two overlap a little, as a real embedder's do.
        let lowest_para = para.iter().copied().fold(f64::INFINITY, f64::min);
        let highest_alike = alike.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        assert!(lowest_para < highest_alike, "{lowest_para} {highest_alike}");
        // The same text twice is the same vector; unknown texts are far apart.
        assert_eq!(faq.embed("x y"), faq.embed("x y"));
        assert!(cos(&faq.embed("one answer"), &faq.embed("another")).abs() < 0.5);
    }

    #[test]
    fn asks_bring_popular_questions_back_first_as_asked_then_in_other_words() {
        let faq = shipped().unwrap();
        let asks = faq.asks(2000, 7);
        assert_eq!(asks, faq.asks(2000, 7), "seeded");
        let distinct: std::collections::HashSet<&str> = asks.iter().map(|a| &**a).collect();
        assert!(
            distinct.len() < 1000,
            "popular questions repeat: {}",
            distinct.len()
        );
        // Every ask is one of the world's questions, and some are written another way.
        assert!(asks.iter().all(|a| faq.class_of(a).is_some()));
        let written_otherwise = asks
            .iter()
            .filter(|a| !faq.pairs().iter().any(|p| *p.a == ***a || *p.b == ***a))
            .count();
        assert!(written_otherwise > 200, "{written_otherwise}");
        // A second question never comes before its pair's first.
        let mut seen = std::collections::HashSet::new();
        for a in &asks {
            seen.insert(&**a);
            let is_a_first = faq.pairs().iter().any(|p| *p.a == **a);
            if let Some(p) = faq.pairs().iter().find(|p| *p.b == **a && !is_a_first) {
                let first_asked = faq
                    .pairs()
                    .iter()
                    .filter(|q| q.b == p.b)
                    .any(|q| seen.contains(q.a.as_str()));
                assert!(first_asked, "{a}");
            }
        }
    }

    #[test]
    fn a_file_that_does_not_read_is_named_by_line() {
        assert_eq!(parse("# c\n1\ta\n"), Err(PairsError::Shape { line: 2 }));
        assert_eq!(
            parse("x\ta\tb\n"),
            Err(PairsError::Label {
                line: 1,
                label: "x".into()
            })
        );
        assert_eq!(parse("# only\n"), Err(PairsError::Empty));
    }
}
