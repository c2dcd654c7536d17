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
use std::sync::Arc;

use sluice_cache::semantic::{Facts, Index, Lookup, Mode, Policy, Question, SemanticCache, cosine};
use sluice_config::gateway::DeploymentConfig;
use sluice_core::ChatRequest;
use sluice_embed::Embedder;
use sluice_gateway::GatewayBuilder;
use sluice_sim::{SimProvider, SimUpstream, UpstreamSpec};
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
    /// Misses timed at each entry count, on and off.
    #[arg(long, default_value_t = 2000)]
    pub rounds: usize,
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
    let e = Arc::new(Embedder::load(&a.model)?);
    println!(
        "embedder {} ({} dimensions), loaded in {:.2} s",
        e.name(),
        e.dim().unwrap_or(0),
        loaded.elapsed().as_secs_f64()
    );
    let pairs = read_pairs(&a.pairs)?;
    let vectors: Vec<(Vec<f32>, Vec<f32>)> = pairs
        .iter()
        .map(|p| Ok((local(&e, &p.a)?, local(&e, &p.b)?)))
        .collect::<anyhow::Result<_>>()?;
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
            let mut ix = Index::new(policy(Mode::Static {
                threshold: t,
                audit: 0.0,
            }));
            ix.insert(1, va.clone(), Facts::of(&p.a), Bytes::new(), 0, now);
            let hit = matches!(
                ix.lookup(1, vb, &Facts::of(&p.b), now, 0.0, ix.policy().mode),
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
            match ix.lookup(1, vb, &facts, now, rng.random(), ix.policy().mode) {
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
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    cost(&rt, a, &e, e.clone())?;
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
            sluice_providers::embeddings::Embeddings::new("loopback", settings, "static-64", None)?;
        anyhow::Ok(Arc::new(Embedder::remote(up, Duration::from_secs(5))))
    })?;
    cost(&rt, a, &e, remote)?;
    Ok(ExitCode::SUCCESS)
}

/// The question body the cost run asks (one partition: everything but its text the same).
fn question_body(text: &str) -> Bytes {
    let v = serde_json::json!({
        "model": "bench",
        "messages": [
            {"role": "system", "content": "You answer customers' questions about their orders."},
            {"role": "user", "content": text},
        ],
    });
    Bytes::from(v.to_string())
}

/// A gateway in front of an in-process upstream that answers at once; with the semantic
/// cache (`cache`) or without.
fn gateway(cache: Option<(SemanticCache, Arc<Embedder>)>) -> anyhow::Result<axum::Router> {
    let spec = UpstreamSpec {
        ttft_median: Duration::ZERO,
        ttft_sigma: 0.0,
        per_token: Duration::ZERO,
        output_tokens_median: 16,
        output_tokens_sigma: 0.0,
        ..UpstreamSpec::default()
    };
    let up = SimProvider(Arc::new(SimUpstream::new("up", spec, 1, Instant::now())));
    let dep = DeploymentConfig {
        provider: "up".into(),
        model: "fixed".into(),
        weight: 1,
        name: Some("up".into()),
        rpm: None,
        tpm: None,
    };
    let mut b = GatewayBuilder::new()
        .provider("up", Arc::new(up))
        .model("bench", vec![dep]);
    if let Some((cache, embedder)) = cache {
        b = b.semantic_cache_from(cache, embedder);
    }
    Ok(sluice_gateway::server::router(b.build()?))
}

async fn ask(router: &axum::Router, body: Bytes) -> anyhow::Result<Duration> {
    use tower::ServiceExt;
    let req = http::Request::post("/v1/chat/completions")
        .header("content-type", "application/json")
        .body(axum::body::Body::from(body))?;
    let t = Instant::now();
    let resp = router.clone().oneshot(req).await?;
    let status = resp.status();
    axum::body::to_bytes(resp.into_body(), usize::MAX).await?;
    let took = t.elapsed();
    anyhow::ensure!(status.is_success(), "the gateway answered {status}");
    Ok(took)
}

/// What a miss costs with the semantic cache on, side by side with it off: two gateways in
/// front of the same instant upstream, asked the same new questions in turn (so neither is
/// warmer), one holding `n` entries in the questions' partition (the worst case: every
/// entry scanned). Each miss stores its answer and the oldest entry leaves, so the count
/// holds.
fn cost(
    rt: &tokio::runtime::Runtime,
    a: &SemanticArgs,
    e: &Embedder,
    lookups: Arc<Embedder>,
) -> anyhow::Result<()> {
    println!(
        "\nCost of a miss through the gateway, the semantic cache on ({}) beside off, in one run:",
        lookups.name()
    );
    let answer = Bytes::from(vec![b'x'; a.answer_bytes]);
    let topics = [
        "shipping",
        "refunds",
        "invoices",
        "warranty",
        "returns",
        "passwords",
        "discounts",
        "delivery",
        "payments",
        "accounts",
    ];
    for &n in &a.entries {
        let mut cache = SemanticCache::new(
            policy(Mode::Static {
                threshold: 0.9,
                audit: 0.0,
            }),
            1.0,
        );
        let now = Instant::now();
        for i in 0..n {
            let text = format!(
                "What is the rule about {} for customer group {i}?",
                topics[i % topics.len()]
            );
            let req = ChatRequest::from_bytes(question_body(&text))?;
            let q = Question::of(None, "bench", &req, cache.limits())
                .map_err(|w| anyhow::anyhow!("not a question: {}", w.label()))?;
            let v = local(e, &q.text)?;
            cache.insert(&q, v, answer.clone(), 0, now);
        }
        let (entries, bytes) = cache.size();
        cache = cache.bounded(usize::try_from(bytes)?);
        let on = gateway(Some((cache, lookups.clone())))?;
        let off = gateway(None)?;
        let rounds = a.rounds;
        let (mut h_on, mut h_off) = (
            hdrhistogram::Histogram::<u64>::new(3)?,
            hdrhistogram::Histogram::<u64>::new(3)?,
        );
        rt.block_on(async {
            for i in 0..rounds {
                let body = question_body(&format!(
                    "Please tell me how {} work when I order {i} items?",
                    topics[(i * 7) % topics.len()]
                ));
                // Alternate which goes first, so neither always finds the caches warm.
                let (first, second) = if i % 2 == 0 { (&on, &off) } else { (&off, &on) };
                let t1 = ask(first, body.clone()).await?;
                let t2 = ask(second, body).await?;
                let (t_on, t_off) = if i % 2 == 0 { (t1, t2) } else { (t2, t1) };
                h_on.record(t_on.as_nanos() as u64)?;
                h_off.record(t_off.as_nanos() as u64)?;
            }
            anyhow::Ok(())
        })?;
        let us = |h: &hdrhistogram::Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        println!(
            "  {entries:>7} entries ({:.1} MiB, {} bytes each with {}-byte answers), {rounds} misses:",
            bytes as f64 / (1 << 20) as f64,
            bytes / entries.max(1),
            a.answer_bytes
        );
        for (label, q) in [("P50", 0.5), ("P99", 0.99), ("P999", 0.999)] {
            println!(
                "    {label:>4}  off {:>8.0} us   on {:>8.0} us   added {:>8.0} us",
                us(&h_off, q),
                us(&h_on, q),
                us(&h_on, q) - us(&h_off, q)
            );
        }
    }
    Ok(())
}

/// `text` embedded in process.
fn local(e: &Embedder, text: &str) -> anyhow::Result<Vec<f32>> {
    match e.embed_local(text) {
        Some(v) => Ok(v?),
        None => anyhow::bail!("the benchmark embeds in process; {} does not", e.name()),
    }
}
