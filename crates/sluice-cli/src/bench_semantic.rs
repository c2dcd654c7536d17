//! `sluice bench semantic`: the semantic cache measured with its embedder. Quality on a
//! labelled set of question pairs (the share of hits that were right, the share of true
//! paraphrases served), for the static mode at several thresholds (with and without the
//! guards) and for the verified mode at an error bound; and cost: the lookup's time,
//! embedding included, at a number of entries in one partition (the worst case), and what the
//! entries weigh.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use clap::Args;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use sluice_cache::semantic::{Facts, Index, Lookup, Mode, Policy, cosine};
use sluice_embed::Embedder;
use tokio::time::Instant;

/// Options of `sluice bench semantic`.
#[derive(Args, Debug, Clone)]
pub struct SemanticArgs {
    /// The embedding model's folder (`scripts/install-embedder` fills it).
    #[arg(long, default_value = "models/static-64")]
    pub model: PathBuf,
    /// The labelled pairs: `label<TAB>first<TAB>second` lines, `#` comments.
    #[arg(long, default_value = "bench/semantic-pairs.tsv")]
    pub pairs: PathBuf,
    /// Static thresholds to measure.
    #[arg(long, value_delimiter = ',', default_value = "0.8,0.85,0.9,0.95")]
    pub thresholds: Vec<f64>,
    /// The verified mode's error bound.
    #[arg(long, default_value_t = 0.02)]
    pub max_error: f64,
    /// How often each pair's second question is asked again in the verified run (an entry
    /// learns only from the questions asked of it).
    #[arg(long, default_value_t = 50)]
    pub repeats: usize,
    /// Entry counts to time lookups at.
    #[arg(long, value_delimiter = ',', default_value = "1000,100000")]
    pub entries: Vec<usize>,
    /// Bytes of each stored answer in the cost run.
    #[arg(long, default_value_t = 1024)]
    pub answer_bytes: usize,
}

struct Pair {
    same: bool,
    a: String,
    b: String,
}

fn read_pairs(path: &std::path::Path) -> anyhow::Result<Vec<Pair>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let mut f = line.split('\t');
        let (Some(label), Some(a), Some(b)) = (f.next(), f.next(), f.next()) else {
            anyhow::bail!(
                "{}:{}: expected label<TAB>first<TAB>second",
                path.display(),
                n + 1
            );
        };
        let same = match label.trim() {
            "1" => true,
            "0" => false,
            other => anyhow::bail!(
                "{}:{}: label `{other}` is neither 0 nor 1",
                path.display(),
                n + 1
            ),
        };
        out.push(Pair {
            same,
            a: a.to_string(),
            b: b.to_string(),
        });
    }
    Ok(out)
}

/// Hits that were right, all hits, paraphrases served, paraphrases.
#[derive(Default)]
struct Tally {
    right_hits: usize,
    hits: usize,
    served_same: usize,
    same: usize,
}

impl Tally {
    fn add(&mut self, same: bool, hit: bool) {
        self.same += usize::from(same);
        if hit {
            self.hits += 1;
            self.right_hits += usize::from(same);
            self.served_same += usize::from(same);
        }
    }
    fn line(&self, label: &str) {
        let pct = |a: usize, b: usize| {
            if b == 0 {
                "-".to_string()
            } else {
                format!("{:.1}%", 100.0 * a as f64 / b as f64)
            }
        };
        println!(
            "  {label:34} {:>6} hits  precision {:>7}  paraphrases served {:>7}",
            self.hits,
            pct(self.right_hits, self.hits),
            pct(self.served_same, self.same)
        );
    }
}

const POLICY_TTL: Duration = Duration::from_secs(3600);

fn policy(mode: Mode) -> Policy {
    Policy {
        mode,
        ttl: POLICY_TTL,
        max_bytes: usize::MAX / 2,
    }
}

/// Runs the benchmark.
pub fn run(a: &SemanticArgs) -> anyhow::Result<ExitCode> {
    let loaded = Instant::now();
    let e = Embedder::load(&a.model)?;
    println!(
        "embedder {} ({} dimensions), loaded in {:.2} s",
        e.name(),
        e.dim(),
        loaded.elapsed().as_secs_f64()
    );
    let pairs = read_pairs(&a.pairs)?;
    let vectors: Vec<(Vec<f32>, Vec<f32>)> = pairs
        .iter()
        .map(|p| Ok((e.embed(&p.a)?, e.embed(&p.b)?)))
        .collect::<Result<_, sluice_embed::EmbedError>>()?;
    let now = Instant::now();
    println!(
        "\n{} pairs from {} ({} paraphrases), one entry per pair, its second question asked:",
        pairs.len(),
        a.pairs.display(),
        pairs.iter().filter(|p| p.same).count()
    );
    for &t in &a.thresholds {
        let (mut guarded, mut bare) = (Tally::default(), Tally::default());
        for (p, (va, vb)) in pairs.iter().zip(&vectors) {
            bare.add(p.same, cosine(va, vb) >= t);
            let mut ix = Index::new(policy(Mode::Static { threshold: t }));
            ix.insert(1, va.clone(), Facts::of(&p.a), Bytes::new(), 0, now);
            let hit = matches!(
                ix.lookup(1, vb, &Facts::of(&p.b), now, 0.0),
                Lookup::Hit { .. }
            );
            guarded.add(p.same, hit);
        }
        bare.line(&format!("static {t:.2}, cosine alone"));
        guarded.line(&format!("static {t:.2}, with the guards"));
    }
    // The verified mode: each pair's second question asked `repeats` times; verification
    // compares answers, here the label (the same answer exactly when it is a paraphrase).
    let mut rng = StdRng::seed_from_u64(7);
    let (mut served, mut wrong, mut asked, mut verified) = (0usize, 0usize, 0usize, 0usize);
    let mut tally = Tally::default();
    for (p, (va, vb)) in pairs.iter().zip(&vectors) {
        let mut ix = Index::new(policy(Mode::Verified {
            delta: a.max_error,
            floor: 0.5,
        }));
        let id = ix
            .insert(1, va.clone(), Facts::of(&p.a), Bytes::new(), 0, now)
            .unwrap_or(0);
        let facts = Facts::of(&p.b);
        for _ in 0..a.repeats {
            asked += 1;
            match ix.lookup(1, vb, &facts, now, rng.random()) {
                Lookup::Hit { .. } => {
                    served += 1;
                    wrong += usize::from(!p.same);
                    tally.add(p.same, true);
                }
                Lookup::Verify { similarity, .. } => {
                    verified += 1;
                    ix.observe(1, id, similarity, p.same);
                    tally.add(p.same, false);
                }
                Lookup::Miss { .. } => tally.add(p.same, false),
            }
        }
    }
    tally.line(&format!("verified, max error {:.3}", a.max_error));
    println!(
        "  verified: {asked} questions, {served} served, {verified} verified upstream, wrong answers served {:.2}% of questions (bound {:.1}%)",
        100.0 * wrong as f64 / asked.max(1) as f64,
        100.0 * a.max_error
    );
    cost(a, &e)?;
    Ok(ExitCode::SUCCESS)
}

/// Lookup time (embedding included) and memory at each entry count, every entry in the one
/// partition the questions are asked in.
fn cost(a: &SemanticArgs, e: &Embedder) -> anyhow::Result<()> {
    println!("\nCost (one partition holding every entry; the question embedded each time):");
    let mut rng = StdRng::seed_from_u64(11);
    let now = Instant::now();
    let answer = Bytes::from(vec![b'x'; a.answer_bytes]);
    let questions = [
        "How do I reset my password?",
        "What payment methods do you accept?",
        "Where is my order 48213?",
        "Is there a student discount?",
    ];
    for &n in &a.entries {
        let mut ix = Index::new(policy(Mode::Static { threshold: 0.9 }));
        for _ in 0..n {
            let mut v: Vec<f32> = (0..e.dim()).map(|_| rng.random::<f32>() - 0.5).collect();
            sluice_embed::unit(&mut v)?;
            ix.insert(1, v, Facts::default(), answer.clone(), 0, now);
        }
        let mut h = hdrhistogram::Histogram::<u64>::new(3)?;
        let rounds = 2_000;
        let cpu = Instant::now();
        for i in 0..rounds {
            let q = questions[i % questions.len()];
            let t = Instant::now();
            let v = e.embed(q)?;
            let facts = Facts::of(q);
            std::hint::black_box(ix.lookup(1, &v, &facts, now, 0.0));
            h.record(t.elapsed().as_nanos() as u64)?;
        }
        let each = cpu.elapsed() / rounds as u32;
        let us = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        println!(
            "  {n:>7} entries: lookup P50 {:.0} us, P99 {:.0} us, P999 {:.0} us (mean {:.0} us); entries weigh {:.1} MiB ({} bytes each, {}-byte answers)",
            us(0.5),
            us(0.99),
            us(0.999),
            each.as_secs_f64() * 1e6,
            ix.bytes() as f64 / (1 << 20) as f64,
            ix.bytes() / n.max(1),
            a.answer_bytes
        );
    }
    Ok(())
}
