//! `sluice bench semantic`: the semantic cache measured with its embedders. Quality on a
//! labelled set of question pairs under two protocols (each pair alone; and a stream where
//! popular questions are asked again and met by paraphrases and non-paraphrases), for the
//! static mode at several thresholds (with and without the guards) and for the verified mode
//! at an error bound with its verification budget, with what it saved net of what it spent on
//! verification; each embedder's time to embed a question and what it weighs; and what a
//! miss costs through the gateway with the cache on, beside off.

mod cost;
mod quality;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use sluice_cache::semantic::{Mode, Policy};
use sluice_embed::Embedder;
use tokio::time::Instant;

/// Options of `sluice bench semantic`.
#[derive(Args, Debug, Clone)]
pub struct SemanticArgs {
    /// The embedding models' folders, compared in turn (`scripts/install-embedder` fills
    /// them); the cost through the gateway is measured with the first.
    #[arg(long, value_delimiter = ',', default_value = "models/static-64")]
    pub model: Vec<PathBuf>,
    /// The labelled pairs: `label<TAB>first<TAB>second[<TAB>category]` lines, `#` comments.
    #[arg(long, default_value = "bench/fow-cache-pairs.tsv")]
    pub pairs: PathBuf,
    /// Static thresholds to measure.
    #[arg(long, value_delimiter = ',', default_value = "0.8,0.85,0.9,0.95")]
    pub thresholds: Vec<f64>,
    /// The verified mode's error bound.
    #[arg(long, default_value_t = 0.02)]
    pub max_error: f64,
    /// The verified mode's verification budget (a share of would-be hits).
    #[arg(long, default_value_t = sluice_config::gateway::DEFAULT_VERIFY_BUDGET)]
    pub verify_budget: f64,
    /// Questions asked in each run of the stream protocol.
    #[arg(long, default_value_t = 20_000)]
    pub stream_asks: usize,
    /// Runs (seeds) of each protocol with a random order.
    #[arg(long, default_value_t = 5)]
    pub runs: u64,
    /// Entry counts to time lookups at (0: skip the cost through the gateway).
    #[arg(long, value_delimiter = ',', default_value = "1000,100000")]
    pub entries: Vec<usize>,
    /// Print this many of the most similar pairs that must not share an answer and that the
    /// guards let through (what an embedder confuses).
    #[arg(long, default_value_t = 0)]
    pub show_confused: usize,
    /// Bytes of each stored answer in the cost run.
    #[arg(long, default_value_t = 1024)]
    pub answer_bytes: usize,
    /// Misses timed at each entry count, on and off.
    #[arg(long, default_value_t = 2000)]
    pub rounds: usize,
}

pub use sluice_sim::faq::Pair;

fn read_pairs(path: &Path) -> anyhow::Result<Vec<Pair>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    sluice_sim::faq::parse(&text).with_context(|| format!("reading {}", path.display()))
}

const POLICY_TTL: Duration = Duration::from_secs(3600);

fn policy(mode: Mode) -> Policy {
    Policy {
        mode,
        ttl: POLICY_TTL,
        max_bytes: usize::MAX / 2,
    }
}

/// The resident memory of this process, in bytes (Linux; 0 elsewhere).
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// Runs the benchmark.
pub fn run(a: &SemanticArgs) -> anyhow::Result<ExitCode> {
    let pairs = read_pairs(&a.pairs)?;
    println!(
        "{} labelled pairs from {} ({} share an answer)",
        pairs.len(),
        a.pairs.display(),
        pairs.iter().filter(|p| p.same).count()
    );
    let mut first = None;
    for dir in &a.model {
        let before = resident_bytes();
        let loaded = Instant::now();
        let e = Arc::new(Embedder::load(dir)?);
        let took = loaded.elapsed();
        let weighs = resident_bytes().saturating_sub(before);
        println!(
            "\n=== embedder {} ({} dimensions): loaded in {:.2} s, {:.0} MiB resident",
            e.name(),
            e.dim().unwrap_or(0),
            took.as_secs_f64(),
            weighs as f64 / f64::from(1 << 20)
        );
        quality::measure(a, &e, &pairs)?;
        first.get_or_insert(e);
    }
    let Some(e) = first else {
        anyhow::bail!("no --model given");
    };
    if a.entries.iter().all(|&n| n == 0) {
        return Ok(ExitCode::SUCCESS);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    cost::cost(&rt, a, &e, e.clone())?;
    // The other embedder: the same model behind an OpenAI-compatible `/v1/embeddings` on a
    // loopback port, served by this process (the round trip and the JSON both ways).
    let remote = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let at = listener.local_addr()?;
        tokio::spawn(axum::serve(listener, sluice_embed::serve::router(e.clone())).into_future());
        let settings = sluice_providers::OpenAiSettings {
            base_url: format!("http://{at}/v1"),
            ..sluice_providers::OpenAiSettings::default()
        };
        let up =
            sluice_providers::embeddings::Embeddings::new("loopback", settings, e.name(), None)?;
        anyhow::Ok(Arc::new(Embedder::remote(up, Duration::from_secs(5))))
    })?;
    cost::cost(&rt, a, &e, remote)?;
    Ok(ExitCode::SUCCESS)
}

/// `text` embedded in process.
fn local(e: &Embedder, text: &str) -> anyhow::Result<Vec<f32>> {
    match e.embed_local(text) {
        Some(v) => Ok(v?),
        None => anyhow::bail!("the benchmark embeds in process; {} does not", e.name()),
    }
}
