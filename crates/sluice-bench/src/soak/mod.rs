//! `sluice bench soak`: sluice at a steady rate for a long time with streams, hedges,
//! retries, both caches and the ledger on, its resident memory, open descriptors and tasks
//! sampled as it goes, the added latency of probes at the start and the end; then the load
//! stops and the gateway must give back every connection and task it took for it.
//!
//! The load runs in windows of `--sample` seconds, each its own schedule started on time
//! whatever the last one's stragglers do, so the rate stays steady; between windows the
//! process is sampled. Verdicts: resident memory grows no more than `--max-rss-growth-mib`
//! from the end of the settling share to the end of the load; after the load no client
//! connection is open, the tasks are back to the idle count plus one per pooled upstream
//! connection, no other descriptor is left open, and the ledger has written every row; no
//! more than 0.1% of requests failed; and every feature was exercised.

mod report;
mod setup;
mod verdict;
mod watch;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use parking_lot::Mutex;
use serde::Serialize;
use sluice_sim::load::{HttpTarget, Progress, Recorder, drive};
use sluice_sim::server::{SimServer, serve_on};
use tokio::time::Instant;

use crate::child::Child;
use setup::Soak;
use watch::{Fds, Watched};

/// Options of the soak.
#[derive(Args, Debug, Clone)]
pub struct SoakArgs {
    /// Requests a second through sluice (a tenth of them probes, sent at the same rate
    /// directly too).
    #[arg(long, default_value_t = 1000.0)]
    pub rate: f64,
    /// How long the load runs.
    #[arg(long, default_value = "30m", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// How often the gateway is sampled, and the length of each window of load.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub sample: Duration,
    /// The share of the run that warms the gateway (caches fill, pools and the allocator
    /// grow) before memory's baseline is taken.
    #[arg(long, default_value_t = 0.1)]
    pub settle: f64,
    /// What each cache (exact and semantic) may hold, MiB: small enough that both fill and
    /// evict within the settling share.
    #[arg(long, default_value_t = 4)]
    pub cache_mib: u64,
    /// How much resident memory may grow from the baseline to the end of the load, MiB.
    #[arg(long, default_value_t = 16.0)]
    pub max_rss_growth_mib: f64,
    /// Pin the gateway to these CPUs (e.g. `1`), with `taskset`.
    #[arg(long)]
    pub gateway_cpus: Option<String>,
    /// Seed of the schedules.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the results as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// The gateway as sampled at one moment.
#[derive(Clone, Debug, Serialize)]
struct Sample {
    /// Seconds since the load began.
    at_s: f64,
    rss_mib: f64,
    fds: Fds,
    /// `sluice_runtime_tasks`.
    tasks: f64,
    /// `sluice_inflight_requests`.
    inflight: f64,
}

/// Runs the soak.
pub fn run(a: &SoakArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(a.rate > 0.0, "--rate must be above 0");
    anyhow::ensure!(
        a.sample >= Duration::from_secs(1) && a.duration >= a.sample * 4,
        "--sample must be at least 1s, and --duration at least four samples long"
    );
    anyhow::ensure!(
        (0.0..0.9).contains(&a.settle),
        "--settle is a share of the run below 0.9"
    );
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(soak(a))
}

async fn soak(a: &SoakArgs) -> anyhow::Result<ExitCode> {
    let sim = SimServer::new(
        &[
            ("faq".into(), setup::faq_upstream()),
            ("probe".into(), setup::probe_upstream()),
        ],
        a.seed,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let sim_addr = listener.local_addr()?;
    tokio::spawn(serve_on(sim, listener, std::future::pending()));

    let port = crate::child::free_port()?;
    let scratch = tempfile::tempdir()?;
    let ledger = scratch.path().join("ledger.db");
    let config = setup::gateway_config(
        port,
        sim_addr,
        &ledger,
        &setup::embedder_dir()?,
        a.cache_mib * 1024 * 1024,
    );
    let ready = format!("http://127.0.0.1:{port}/readyz");
    let gateway = Child::spawn("serve", &config, &ready, a.gateway_cpus.as_deref()).await?;
    let watched = Watched::new(gateway.pid(), port, sim_addr.port())?;
    let target = Soak {
        inner: HttpTarget::new(1024),
        direct: format!("http://{sim_addr}/probe/v1/chat/completions").parse()?,
        through: format!("http://127.0.0.1:{port}/v1/chat/completions").parse()?,
    };

    println!(
        "sluice soak: {:.0} requests a second through sluice for {:?} (FAQ questions and \
         unique documents to a group with hedges and retries, a third of each streamed, both \
         caches of {} MiB and the ledger on; a tenth probes of a 1 ms upstream, sent directly \
         too), sampled every {:?}\n",
        a.rate, a.duration, a.cache_mib, a.sample
    );
    let idle = sample(&watched, 0.0).await?;
    let (samples, windows) = load(a, &watched, target).await?;
    let drained = verdict::drain(&watched, &idle).await?;
    let verdict = verdict::judge(a, &idle, &samples, &windows, &drained)?;
    report::print(&idle, &samples, &windows, &drained, &verdict);
    sluice_cli::write_json(
        a.json.as_deref(),
        &report::Results::new(a, &idle, &samples, &windows, &drained, &verdict),
    )?;
    drop(gateway);
    Ok(if verdict.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The gateway sampled now, `at_s` seconds into the load.
async fn sample(w: &Watched, at_s: f64) -> anyhow::Result<Sample> {
    // Scraped first: the scrape's own connection is closed by the time the descriptors are
    // read.
    let page = w.metrics().await?;
    Ok(Sample {
        at_s,
        rss_mib: w.rss_mib()?,
        fds: w.fds()?,
        tasks: page.sum("sluice_runtime_tasks", ""),
        inflight: page.sum("sluice_inflight_requests", ""),
    })
}

/// One window's results.
type Window = Arc<Mutex<Recorder>>;

/// The load, window after window, the gateway sampled at each window's start and at the
/// end; returns the samples and each window's results once all are answered.
async fn load(
    a: &SoakArgs,
    watched: &Watched,
    target: Soak,
) -> anyhow::Result<(Vec<Sample>, Vec<Window>)> {
    let windows = (a.duration.as_secs_f64() / a.sample.as_secs_f64()).ceil() as u64;
    let start = Instant::now();
    let mut samples = Vec::new();
    let mut running = Vec::new();
    let mut results = Vec::new();
    for k in 0..windows {
        tokio::time::sleep_until(start + a.sample * u32::try_from(k)?).await;
        let workload = setup::window(a.rate, a.sample, a.seed.wrapping_mul(7919) ^ k);
        let recorder = Arc::new(Mutex::new(Recorder::new(None)?));
        results.push(recorder.clone());
        let target = target.clone();
        running.push(tokio::spawn(async move {
            let progress = Arc::new(Progress::default());
            let to = http::Uri::from_static("http://soak.invalid/");
            drive(target, to, &workload, "soak", recorder, progress).await
        }));
        if k > 0 {
            let s = sample(watched, start.elapsed().as_secs_f64()).await?;
            report::progress(&s);
            samples.push(s);
        }
    }
    tokio::time::sleep_until(start + a.sample * u32::try_from(windows)?).await;
    let s = sample(watched, start.elapsed().as_secs_f64()).await?;
    report::progress(&s);
    samples.push(s);
    for r in running {
        r.await?;
    }
    // The load generator's connections close with its last clone.
    drop(target);
    Ok((samples, results))
}
