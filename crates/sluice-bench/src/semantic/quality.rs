//! The quality side of `sluice bench semantic`: what an embedder and the cache's rules make
//! of labelled question pairs, under two protocols.
//!
//! - Pairs: each pair's first question stored, its second asked once, each pair in its own
//!   partition (so only its own entry can answer), in a random order; one route, so that the
//!   verified mode's pooled curve and budget span the pairs.
//! - Stream: one partition; a pair is picked by popularity (Zipf, exponent 1) for each ask;
//!   its first question is asked when it has not been, and then either again (an exact
//!   repeat: the exact cache's, counted apart) or its second question (a paraphrase or not).
//!   Every miss stores its answer, so any entry may answer any later question: a hit is
//!   right only when the entry's question shares the ask's answer by the labels.
//! - The same stream with a question asked again written another way half the time (a
//!   greeting, thanks, lower case, a typo; [`sluice_sim::faq`]): what users' own wording adds.
//!
//! Verification is decided by the labels (the fresh answer agrees exactly when the entry's
//! question shares the ask's answer). The net saving counts each verification as a call the
//! cache failed to save: calls saved by hits minus calls spent verifying.

use std::collections::HashMap;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use sluice_cache::semantic::{Facts, Lookup, Mode, Question, SemanticCache, cosine};
use sluice_embed::Embedder;
use tokio::time::Instant;

use sluice_sim::faq::{Classes, Faq, Popularity};

use super::{Pair, SemanticArgs, local, policy};

/// The static mode's default threshold.
const DEFAULT_THRESHOLD: f64 = 0.9;

/// The verified mode's similarity floor (`min_similarity`'s default).
const FLOOR: f64 = 0.6;

/// A pair's questions, embedded and read.
struct Embedded {
    va: Vec<f32>,
    vb: Vec<f32>,
    fa: Facts,
    fb: Facts,
}

/// What one run of a protocol found.
#[derive(Default, Clone, Copy)]
struct Run {
    /// Questions the semantic cache decided (exact repeats apart).
    asked: usize,
    /// Exact repeats (the exact cache's).
    exact: usize,
    /// Asks whose answer an entry held (by the labels).
    answerable: usize,
    served: usize,
    served_wrong: usize,
    verified: usize,
    unverified: usize,
    /// Asks, and verifications, while the route had stopped verifying (it could not
    /// certify any similarity).
    asked_stopped: usize,
    verified_stopped: usize,
}

impl Run {
    /// Not a number when it served nothing (left out of the spread).
    fn precision(&self) -> f64 {
        if self.served == 0 {
            return f64::NAN;
        }
        ratio(self.served - self.served_wrong, self.served)
    }
    fn recall(&self) -> f64 {
        ratio(self.served - self.served_wrong, self.answerable)
    }
    fn wrong_share(&self) -> f64 {
        ratio(self.served_wrong, self.asked)
    }
    fn verified_share(&self) -> f64 {
        ratio(self.verified, self.asked)
    }
    fn verified_stopped_share(&self) -> f64 {
        if self.asked_stopped == 0 {
            return f64::NAN;
        }
        ratio(self.verified_stopped, self.asked_stopped)
    }
    fn net(&self) -> i64 {
        self.served as i64 - self.verified as i64
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// Mean, least and most of `f` over `runs`.
fn spread(runs: &[Run], f: impl Fn(&Run) -> f64) -> (f64, f64, f64) {
    let v: Vec<f64> = runs.iter().map(f).filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (mean, lo, hi)
}

fn report(label: &str, runs: &[Run]) {
    let pct = |(m, lo, hi): (f64, f64, f64)| {
        if m.is_nan() {
            "- (nothing served)".to_string()
        } else if runs.len() > 1 {
            format!("{:.1}% ({:.1}-{:.1})", 100.0 * m, 100.0 * lo, 100.0 * hi)
        } else {
            format!("{:.1}%", 100.0 * m)
        }
    };
    let total = |f: fn(&Run) -> usize| runs.iter().map(f).sum::<usize>();
    let net: i64 = runs.iter().map(Run::net).sum();
    println!(
        "  {label:36} precision {}  answerable served {}  wrong served {} of asks",
        pct(spread(runs, Run::precision)),
        pct(spread(runs, Run::recall)),
        pct(spread(runs, Run::wrong_share)),
    );
    println!(
        "  {:36} {} asks ({} exact repeats apart): {} served, {} verified ({}), {} over budget; net saving {net} calls",
        "",
        total(|r| r.asked),
        total(|r| r.exact),
        total(|r| r.served),
        total(|r| r.verified),
        pct(spread(runs, Run::verified_share)),
        total(|r| r.unverified),
    );
    let stopped = total(|r| r.asked_stopped);
    if stopped > 0 {
        println!(
            "  {:36} once it stopped verifying (it could not certify): {stopped} asks, {} verified ({} of them)",
            "",
            total(|r| r.verified_stopped),
            pct(spread(runs, Run::verified_stopped_share)),
        );
    }
}

/// Measures `e` on `pairs` under both protocols.
pub fn measure(a: &SemanticArgs, e: &Embedder, pairs: &[Pair]) -> anyhow::Result<()> {
    let mut took = hdrhistogram::Histogram::<u64>::new(3)?;
    let mut embedded = Vec::with_capacity(pairs.len());
    for p in pairs {
        let t = Instant::now();
        let va = local(e, &p.a)?;
        took.record(t.elapsed().as_nanos() as u64)?;
        let t = Instant::now();
        let vb = local(e, &p.b)?;
        took.record(t.elapsed().as_nanos() as u64)?;
        embedded.push(Embedded {
            va,
            vb,
            fa: Facts::of(&p.a),
            fb: Facts::of(&p.b),
        });
    }
    let us = |q: f64| took.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "  embedding a question: P50 {:.0} us, P99 {:.0} us (in process, one core)",
        us(0.5),
        us(0.99)
    );
    println!("\n  pairs, each alone:");
    for &t in &a.thresholds {
        let mut bare = Run::default();
        let mut guarded = Run::default();
        for (p, x) in pairs.iter().zip(&embedded) {
            let s = cosine(&x.va, &x.vb);
            for (run, allowed) in [
                (&mut bare, true),
                (&mut guarded, x.fa.allowed(&x.fb).is_ok()),
            ] {
                run.asked += 1;
                run.answerable += usize::from(p.same);
                if s >= t && allowed {
                    run.served += 1;
                    run.served_wrong += usize::from(!p.same);
                }
            }
        }
        report(&format!("static {t:.2}, cosine alone"), &[bare]);
        report(&format!("static {t:.2}, with the guards"), &[guarded]);
    }
    guards_by_category(pairs, &embedded);
    best_fixed(pairs, &embedded, 1.0 - a.max_error);
    if a.show_confused > 0 {
        let mut confused: Vec<(f64, &Pair)> = pairs
            .iter()
            .zip(&embedded)
            .filter(|(p, x)| !p.same && x.fa.allowed(&x.fb).is_ok())
            .map(|(p, x)| (cosine(&x.va, &x.vb), p))
            .collect();
        confused.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (s, p) in confused.iter().take(a.show_confused) {
            println!("    {s:.3} [{}] {} | {}", p.category, p.a, p.b);
        }
    }
    let verified = Mode::Verified {
        delta: a.max_error,
        floor: FLOOR,
        budget: a.verify_budget,
    };
    let runs: Vec<Run> = (0..a.runs)
        .map(|seed| pairs_run(pairs, &embedded, verified, seed))
        .collect();
    report(
        &format!("verified {:.3}, budget {:.2}", a.max_error, a.verify_budget),
        &runs,
    );
    println!(
        "\n  stream, {} asks a run, popular questions met by paraphrases and non-paraphrases:",
        a.stream_asks
    );
    let fixed = Mode::Static {
        threshold: DEFAULT_THRESHOLD,
        audit: 0.0,
    };
    let runs: Vec<Run> = (0..a.runs)
        .map(|seed| stream_run(pairs, &embedded, fixed, a.stream_asks, seed))
        .collect();
    report(
        &format!("static {DEFAULT_THRESHOLD:.2} (the default)"),
        &runs,
    );
    let runs: Vec<Run> = (0..a.runs)
        .map(|seed| stream_run(pairs, &embedded, verified, a.stream_asks, seed))
        .collect();
    report(
        &format!("verified {:.3}, budget {:.2}", a.max_error, a.verify_budget),
        &runs,
    );
    println!(
        "\n  the same stream, a question asked again written another way half the time (a greeting, thanks, lower case, a typo):"
    );
    let mut vectors = HashMap::new();
    let world = Faq::new(pairs.to_vec());
    for (label, mode) in [
        (
            format!("static {DEFAULT_THRESHOLD:.2} (the default)"),
            fixed,
        ),
        (
            format!("verified {:.3}, budget {:.2}", a.max_error, a.verify_budget),
            verified,
        ),
    ] {
        let runs = (0..a.runs)
            .map(|seed| written_otherwise_run(&world, e, mode, a.stream_asks, seed, &mut vectors))
            .collect::<anyhow::Result<Vec<Run>>>()?;
        report(&label, &runs);
    }
    Ok(())
}

/// The bound on what any rule that serves by similarity (with the guards) could do here: the
/// lowest threshold whose hits are right at least `precision` of the time, chosen in
/// hindsight with every label known, and the share of answerable pairs it serves.
fn best_fixed(pairs: &[Pair], embedded: &[Embedded], precision: f64) {
    let mut scored: Vec<(f64, bool)> = pairs
        .iter()
        .zip(embedded)
        .filter(|(_, x)| x.fa.allowed(&x.fb).is_ok())
        .map(|(p, x)| (cosine(&x.va, &x.vb), p.same))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    let answerable = pairs.iter().filter(|p| p.same).count();
    let (mut right, mut best) = (0usize, None);
    for (n, (s, same)) in scored.iter().enumerate() {
        right += usize::from(*same);
        if right as f64 >= precision * (n + 1) as f64 {
            best = Some((*s, right, n + 1));
        }
    }
    match best {
        Some((t, right, served)) => println!(
            "  in hindsight (every label known): from similarity {t:.3} hits are right {:.1}% of the time, serving {right} of {answerable} answerable ({:.1}%)",
            100.0 * right as f64 / served as f64,
            100.0 * right as f64 / answerable.max(1) as f64
        ),
        None => println!(
            "  in hindsight (every label known): no similarity serves hits right {:.0}% of the time",
            100.0 * precision
        ),
    }
}

/// Of the pairs that must not share an answer and that the default threshold would serve,
/// how many the guards refuse, by category.
fn guards_by_category(pairs: &[Pair], embedded: &[Embedded]) {
    let mut by: HashMap<&str, (usize, usize)> = HashMap::new();
    for (p, x) in pairs.iter().zip(embedded) {
        if p.same || cosine(&x.va, &x.vb) < DEFAULT_THRESHOLD {
            continue;
        }
        let c = by.entry(p.category.as_str()).or_default();
        c.0 += 1;
        c.1 += usize::from(x.fa.allowed(&x.fb).is_err());
    }
    let mut v: Vec<_> = by.into_iter().collect();
    v.sort();
    let list: Vec<String> = v
        .iter()
        .map(|(c, (n, caught))| format!("{c} {caught}/{n}"))
        .collect();
    println!(
        "  non-paraphrases at {DEFAULT_THRESHOLD} or above that the guards refuse: {}",
        list.join(", ")
    );
}

fn question(partition: u64, text: &str, facts: &Facts) -> Question {
    Question {
        partition,
        text: text.to_string(),
        facts: facts.clone(),
    }
}

/// What a lookup's outcome teaches the run and the cache; whether the ask's answer is now
/// to be stored (a miss, a verification that found the entry wrong, or an ask the budget
/// could not verify).
fn settle(
    cache: &SemanticCache,
    run: &mut Run,
    found: Lookup,
    q: &Question,
    right_of: impl Fn(u64) -> bool,
) -> bool {
    // What the route's evidence said when this ask was decided.
    let stopped = cache.stopped().iter().any(|(_, s)| *s);
    run.asked_stopped += usize::from(stopped);
    run.verified_stopped += usize::from(stopped && matches!(found, Lookup::Verify { .. }));
    match found {
        Lookup::Hit { id, .. } => {
            run.served += 1;
            run.served_wrong += usize::from(!right_of(id));
            false
        }
        Lookup::Verify { id, similarity, p } => {
            run.verified += 1;
            let right = right_of(id);
            let route = std::sync::Arc::from("bench");
            cache.verified(&route, (q.partition, id), similarity, right, p);
            !right
        }
        Lookup::Unverified { .. } => {
            run.unverified += 1;
            true
        }
        Lookup::Miss { .. } => true,
    }
}

/// One run of the pairs protocol: each pair its own partition, in an order drawn by `seed`.
fn pairs_run(pairs: &[Pair], embedded: &[Embedded], mode: Mode, seed: u64) -> Run {
    let cache = SemanticCache::new(policy(mode), 1.0);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut order: Vec<usize> = (0..pairs.len()).collect();
    order.shuffle(&mut rng);
    let now = Instant::now();
    let mut run = Run::default();
    for i in order {
        let (p, x) = (&pairs[i], &embedded[i]);
        let part = i as u64;
        let qa = question(part, &p.a, &x.fa);
        let Some(stored) = cache.insert(&qa, x.va.clone(), Bytes::new(), 1, now) else {
            continue;
        };
        let qb = question(part, &p.b, &x.fb);
        run.asked += 1;
        run.answerable += usize::from(p.same);
        let found = cache.lookup(&qb, "bench", mode, &x.vb, now, rng.random());
        settle(&cache, &mut run, found, &qb, |id| id == stored && p.same);
    }
    run
}

/// A stream's state: the cache, the texts asked, which entry holds which class's answer,
/// and which classes have had an answer stored.
struct Stream {
    cache: SemanticCache,
    mode: Mode,
    asked: std::collections::HashSet<String>,
    entry_class: HashMap<u64, usize>,
    answered: std::collections::HashSet<usize>,
    run: Run,
    now: Instant,
}

impl Stream {
    fn new(mode: Mode) -> Self {
        Self {
            cache: SemanticCache::new(policy(mode), 1.0),
            mode,
            asked: Default::default(),
            entry_class: HashMap::new(),
            answered: Default::default(),
            run: Run::default(),
            now: Instant::now(),
        }
    }

    /// Asks `text` (of answer class `c`, vector `v`, `facts`); `coin` samples verification.
    /// A text asked before is the exact cache's.
    fn ask(&mut self, text: &str, c: usize, v: &[f32], facts: &Facts, coin: f64) {
        if !self.asked.insert(text.to_string()) {
            self.run.exact += 1;
            return;
        }
        let q = question(0, text, facts);
        self.run.asked += 1;
        self.run.answerable += usize::from(self.answered.contains(&c));
        let found = self.cache.lookup(&q, "bench", self.mode, v, self.now, coin);
        let entry_class = &self.entry_class;
        let store = settle(&self.cache, &mut self.run, found, &q, |id| {
            entry_class.get(&id) == Some(&c)
        });
        if store && let Some(id) = self.cache.insert(&q, v.to_vec(), Bytes::new(), 1, self.now) {
            self.entry_class.insert(id, c);
        }
        self.answered.insert(c);
    }
}

/// One run of the stream protocol, `asks` long, drawn by `seed`.
fn stream_run(pairs: &[Pair], embedded: &[Embedded], mode: Mode, asks: usize, seed: u64) -> Run {
    let mut rng = StdRng::seed_from_u64(1000 + seed);
    // Popularity: a random rank for each pair, weight 1/rank.
    let popularity = Popularity::new(pairs.len(), &mut rng);
    // An answer's class: questions with the same text share one (a text may stand in
    // several pairs), and so do a pair's two questions when the label says they share an
    // answer.
    let classes = Classes::of(pairs);
    let mut asked_before = vec![false; pairs.len()];
    let mut stream = Stream::new(mode);
    for _ in 0..asks {
        let i = popularity.draw(&mut rng);
        let second = asked_before[i] && rng.random::<bool>();
        asked_before[i] = true;
        let (p, x) = (&pairs[i], &embedded[i]);
        let (text, v, facts) = if second {
            (&p.b, &x.vb, &x.fb)
        } else {
            (&p.a, &x.va, &x.fa)
        };
        let c = classes.of_question(i, second);
        stream.ask(text, c, v, facts, rng.random());
    }
    stream.run
}

/// One run of the stream protocol in which a question asked again is, half the time, written
/// another way (a greeting, thanks, lower case, a typo: the same answer by construction),
/// `asks` long, drawn by `seed`; each text embedded by `e` once.
fn written_otherwise_run(
    world: &Faq,
    e: &Embedder,
    mode: Mode,
    asks: usize,
    seed: u64,
    vectors: &mut HashMap<std::sync::Arc<str>, (Vec<f32>, Facts)>,
) -> anyhow::Result<Run> {
    let mut coins = StdRng::seed_from_u64(2000 + seed);
    let mut stream = Stream::new(mode);
    for text in world.asks(asks, 1000 + seed) {
        let Some(c) = world.class_of(&text) else {
            continue;
        };
        if !vectors.contains_key(&text) {
            let v = local(e, &text)?;
            vectors.insert(text.clone(), (v, Facts::of(&text)));
        }
        let (v, facts) = &vectors[&text];
        stream.ask(&text, c, v, facts, coins.random());
    }
    Ok(stream.run)
}
