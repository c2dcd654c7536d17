//! `sluice bench overhead`: the gateway's added latency in front of an upstream that answers
//! in about 1 ms, open-loop, measured side by side in one run, plus sluice's peak RSS.
//!
//! The gateway runs as its own process (so its memory can be read); the upstream and the
//! load generator share this one. Direct and through-sluice requests are interleaved in one
//! schedule so that drift on a noisy machine hits both alike. With `--floor`, every round is
//! followed by one of direct requests and requests through a bare hyper forwarder (`sluice
//! bench forward`): what one more proxy hop costs here before any gateway work, so sluice's
//! own share can be told from the hop's. With `--stream`, every request is a stream of
//! `--tokens` chunks `--token-gap` apart, and the added time to first and to last byte and
//! the CPU a stream and a chunk are reported (the forwarder then passes streams through).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use parking_lot::Mutex;
use serde::Serialize;
use sluice_sim::UpstreamSpec;
use sluice_sim::load::{HttpTarget, Progress, Recorder, drive};
use sluice_sim::server::{SimServer, serve_on};

use crate::child::Child;
use sluice_cli::write_json;

mod paths;
mod report;
mod rounds;

use rounds::{Measured, median, point, point_ttfb};

use paths::{FLOOR, SLUICE, Split, placeholder, workload};

/// Options of the overhead benchmark.
#[derive(Args, Debug, Clone)]
pub struct OverheadArgs {
    /// Request rates to measure at, per second.
    #[arg(long, value_delimiter = ',', default_values_t = [500.0, 2000.0])]
    pub rates: Vec<f64>,
    /// Length of each phase.
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    pub phase: Duration,
    /// Rounds of (direct, through sluice) per rate.
    #[arg(long, default_value_t = 6)]
    pub rounds: u32,
    /// Pin the gateway to these CPUs (e.g. `1`), with `taskset`; run the benchmark itself
    /// elsewhere (`taskset -c 0 sluice bench overhead --gateway-cpus 1`), so that the
    /// gateway does not fight the load generator and the upstream for a core.
    #[arg(long)]
    pub gateway_cpus: Option<String>,
    /// The gateway's `[server] worker_threads` (and the bare forwarder's); by default one
    /// per core.
    #[arg(long)]
    pub gateway_threads: Option<usize>,
    /// The gateway's usage ledger: `disk` (the default configuration: every commit flushed
    /// to the disk), `process` (flushed at checkpoints) or `off`.
    #[arg(long, default_value = "disk", value_parser = ["disk", "process", "off"])]
    pub ledger: String,
    /// Also send the same rate through a bare hyper forwarder, to measure the floor any
    /// proxy hop pays on this machine.
    #[arg(long)]
    pub floor: bool,
    /// Stream every answer (SSE), `--tokens` chunks of one token each.
    #[arg(long)]
    pub stream: bool,
    /// Tokens of each answer (with `--stream`, chunks of each stream).
    #[arg(long, default_value_t = 16)]
    pub tokens: u32,
    /// The upstream's time between tokens.
    #[arg(long, default_value = "0ms", value_parser = humantime::parse_duration)]
    pub token_gap: Duration,
    /// Write the results as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Every request a tenant's with credits and a quota, and the deployment paced by a
    /// configured limit (both far above the load): what reserving, settling and pacing cost.
    #[arg(long)]
    pub budgets: bool,
    /// With `--budgets`, the credits, quota and pacing kept in the Redis at
    /// `$SLUICE_REDIS_URL` (`[cluster]`): what sharing them with other instances costs.
    #[arg(long, requires = "budgets")]
    pub cluster: bool,
}

#[derive(Serialize, Clone, Debug, PartialEq)]
struct Point {
    p50_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
}

#[derive(Serialize)]
struct RateResult {
    rate: f64,
    requests_each: u64,
    direct: Point,
    sluice: Point,
    /// Pooled over the rounds: sluice's percentiles minus the direct path's.
    added: Point,
    /// The same for the time to first byte.
    added_ttfb: Point,
    /// What sluice added in each round on its own.
    added_by_round: Vec<Point>,
    /// Each percentile's median over the rounds: what a typical round saw, not moved by one
    /// round a noise burst hit.
    added_round_median: Option<Point>,
    /// Through the bare forwarder (with `--floor`).
    #[serde(skip_serializing_if = "Option::is_none")]
    forwarder: Option<Point>,
    /// What the bare forwarder added (with `--floor`).
    #[serde(skip_serializing_if = "Option::is_none")]
    floor_added: Option<Point>,
    /// What the bare forwarder added in each round (with `--floor`).
    #[serde(skip_serializing_if = "Option::is_none")]
    floor_added_by_round: Option<Vec<Point>>,
    /// What the bare forwarder added to the time to first byte (with `--floor`).
    #[serde(skip_serializing_if = "Option::is_none")]
    floor_added_ttfb: Option<Point>,
    /// Median over the rounds of what the bare forwarder added (with `--floor`).
    #[serde(skip_serializing_if = "Option::is_none")]
    floor_added_round_median: Option<Point>,
    /// Failed requests through the bare forwarder (with `--floor`).
    #[serde(skip_serializing_if = "Option::is_none")]
    forwarder_errors: Option<u64>,
    sluice_errors: u64,
    /// Failed requests through sluice by status (0: no answer).
    sluice_errors_by_status: std::collections::BTreeMap<u16, u64>,
    /// CPU the gateway spent per request through it, microseconds.
    sluice_cpu_us_per_request: Option<f64>,
    /// CPU the bare forwarder spent per request through it (with `--floor`).
    #[serde(skip_serializing_if = "Option::is_none")]
    forwarder_cpu_us_per_request: Option<f64>,
    /// Chunks of each answer (`--tokens` for streams, 1 for complete answers): CPU a chunk
    /// is CPU a request over these.
    chunks: u32,
}

#[derive(Serialize)]
struct Results {
    upstream: &'static str,
    gateway_cpus: Option<String>,
    gateway_threads: Option<usize>,
    rates: Vec<RateResult>,
    sluice_peak_rss_mib: Option<f64>,
}

/// An upstream whose first token comes after 1 ms, then `tokens - 1` more `gap` apart, one a
/// chunk when streamed.
fn one_ms_upstream(tokens: u32, gap: Duration) -> UpstreamSpec {
    let mut s = UpstreamSpec {
        ttft_median: Duration::from_millis(1),
        ttft_sigma: 0.0,
        per_token: gap,
        tokens_per_chunk: 1,
        output_tokens_median: tokens.max(1),
        output_tokens_sigma: 0.0,
        ..UpstreamSpec::default()
    };
    s.prompt_cache.enabled = false;
    s
}

/// Runs the benchmark.
pub fn run(a: &OverheadArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(measure(a))
}

async fn measure(a: &OverheadArgs) -> anyhow::Result<ExitCode> {
    let tokens = if a.stream { a.tokens.max(1) } else { 1 };
    let upstream = one_ms_upstream(tokens, a.token_gap);
    let sim = SimServer::new(&[("fixed".into(), upstream)], 1);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let sim_addr = listener.local_addr()?;
    tokio::spawn(serve_on(sim, listener, std::future::pending()));

    let gw_port = crate::child::free_port()?;
    let pid = std::process::id();
    let config = gateway_config(a, gw_port, sim_addr, pid);
    let gateway = Child::spawn(
        "serve",
        &config,
        &format!("http://127.0.0.1:{gw_port}/readyz"),
        a.gateway_cpus.as_deref(),
    )
    .await?;
    let forwarder = start_forwarder(a, sim_addr).await?;
    let direct: http::Uri = format!("http://{sim_addr}/fixed/v1/chat/completions").parse()?;
    let through: http::Uri = format!("http://127.0.0.1:{gw_port}/v1/chat/completions").parse()?;
    let floor: http::Uri = match &forwarder {
        Some((_, port)) => format!("http://127.0.0.1:{port}/fixed/v1/chat/completions").parse()?,
        None => direct.clone(),
    };
    let forwarder = forwarder.map(|(child, _)| child);

    let shape = if a.stream {
        format!("streams of {tokens} chunks {:?} apart", a.token_gap)
    } else {
        "one token, complete".to_string()
    };
    println!(
        "sluice overhead: upstream's first byte after ~1 ms ({shape}); {} rounds of {:?} per \
         rate, direct and through-sluice requests interleaved at the same rate each\n",
        a.rounds, a.phase
    );
    if a.floor {
        println!(
            "floor: each round is followed by one of direct and through-a-bare-forwarder \
             requests, interleaved the same way\n"
        );
    }
    let target = Split {
        inner: HttpTarget::new(1024),
        direct,
        through,
        floor,
        tenant: a
            .budgets
            .then(|| http::HeaderValue::from_static(BENCH_TENANT)),
    };
    let mut results = Vec::new();
    for &rate in &a.rates {
        let forwarder = forwarder.as_ref();
        results.push(at_rate(a, &target, rate, tokens, &gateway, forwarder).await?);
    }
    let rss = gateway.peak_rss_mib();
    drop(gateway);
    drop(forwarder);
    for end in ["", "-wal", "-shm"] {
        let file = std::env::temp_dir().join(format!("sluice-bench-{pid}-ledger.db{end}"));
        // Absent when the gateway never wrote: nothing to remove.
        let _ = std::fs::remove_file(file);
    }

    report::print(a, &results, rss);
    write_json(
        a.json.as_deref(),
        &Results {
            upstream: if a.stream {
                "simulated, 1 ms to the first chunk, streaming"
            } else {
                "simulated, 1 ms, one token, non-streaming"
            },
            gateway_cpus: a.gateway_cpus.clone(),
            gateway_threads: a.gateway_threads,
            rates: results,
            sluice_peak_rss_mib: rss,
        },
    )?;
    Ok(ExitCode::SUCCESS)
}

/// The gateway's configuration: listening on `gw_port`, its one group on the simulator at
/// `sim_addr`, its ledger named by `pid` (unless off).
fn gateway_config(
    a: &OverheadArgs,
    gw_port: u16,
    sim_addr: std::net::SocketAddr,
    pid: u32,
) -> String {
    // Every call settles into the ledger, as in production, unless asked otherwise.
    let ledger = match a.ledger.as_str() {
        "off" => "[ledger]\nstore = \"off\"\n\n".to_string(),
        durability => format!(
            "[ledger]\npath = \"sluice-bench-{pid}-ledger.db\"\ndurability = \"{durability}\"\n\n"
        ),
    };
    let threads = a
        .gateway_threads
        .map(|n| format!("worker_threads = {n}\n"))
        .unwrap_or_default();
    format!(
        "[server]\nlisten = \"127.0.0.1:{gw_port}\"\n{threads}\n{ledger}\n[providers.up]\nkind = \"openai\"\nbase_url = \"http://{sim_addr}/fixed/v1\"\npool_max_idle = 1024\n\n[models.bench]\ndeployments = [{{ provider = \"up\", model = \"fixed\"{} }}]\n{}",
        if a.budgets { ", rpm = 60000000" } else { "" },
        budgets_config(a)
    )
}

/// The bare forwarder in front of the simulator at `sim_addr`, with `--floor`, and its port.
async fn start_forwarder(
    a: &OverheadArgs,
    sim_addr: std::net::SocketAddr,
) -> anyhow::Result<Option<(Child, u16)>> {
    if !a.floor {
        return Ok(None);
    }
    let port = crate::child::free_port()?;
    let args = ["forward", "--listen", &format!("127.0.0.1:{port}")];
    let mut args: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
    args.extend(["--upstream".into(), sim_addr.to_string().into()]);
    if let Some(n) = a.gateway_threads {
        args.extend(["--threads".into(), n.to_string().into()]);
    }
    let ready = format!("http://127.0.0.1:{port}/readyz");
    let child = Child::spawn_bench(&args, &ready, a.gateway_cpus.as_deref()).await?;
    Ok(Some((child, port)))
}

/// Rounds of direct and through-sluice requests (and through the forwarder) at `rate` each.
async fn at_rate(
    a: &OverheadArgs,
    target: &Split,
    rate: f64,
    tokens: u32,
    gateway: &Child,
    forwarder: Option<&Child>,
) -> anyhow::Result<RateResult> {
    // Warm every path (connection pools) before measuring.
    let paths: &[&str] = if forwarder.is_some() {
        &[SLUICE, FLOOR]
    } else {
        &[SLUICE]
    };
    for path in paths {
        let warm = workload(rate.min(500.0), Duration::from_secs(1), 99, path, a.stream);
        let scratch = Arc::new(Mutex::new(Recorder::new(None)?));
        let p = Arc::new(Progress::default());
        drive(target.clone(), placeholder(), &warm, "warm", scratch, p).await;
    }
    let mut through = Measured::new()?;
    let mut floor = Measured::new()?;
    for round in 0..a.rounds {
        through
            .round(target, rate, a.phase, round, (SLUICE, a.stream), gateway)
            .await?;
        if let Some(fw) = &forwarder {
            floor
                .round(target, rate, a.phase, round, (FLOOR, a.stream), fw)
                .await?;
        }
    }
    let t = through.result(SLUICE)?;
    let floor = match forwarder {
        Some(_) => Some(floor.result(FLOOR)?),
        None => None,
    };
    let per_request = |c: f64, n: u64| c * 1e6 / n.max(1) as f64;
    let ps = point(&t.path);
    Ok(RateResult {
        rate,
        requests_each: t.path.count,
        added: ps.minus(&t.direct),
        added_ttfb: point_ttfb(&t.path).minus(&t.direct_ttfb),
        floor_added_ttfb: floor
            .as_ref()
            .map(|f| point_ttfb(&f.path).minus(&f.direct_ttfb)),
        chunks: tokens,
        added_round_median: median(&t.rounds),
        forwarder: floor.as_ref().map(|f| point(&f.path)),
        floor_added: floor.as_ref().map(|f| point(&f.path).minus(&f.direct)),
        floor_added_round_median: floor.as_ref().and_then(|f| median(&f.rounds)),
        floor_added_by_round: floor.as_ref().map(|f| f.rounds.clone()),
        forwarder_errors: floor.as_ref().map(|f| f.path.count - f.path.ok),
        forwarder_cpu_us_per_request: floor
            .as_ref()
            .and_then(|f| f.cpu.map(|c| per_request(c, f.path.count))),
        direct: t.direct,
        sluice: ps,
        added_by_round: t.rounds,
        sluice_errors: t.path.count - t.path.ok,
        sluice_errors_by_status: t.path.errors_by_status.clone(),
        sluice_cpu_us_per_request: t.cpu.map(|c| per_request(c, t.path.count)),
    })
}

/// The tenant every request through sluice is, with `--budgets`.
const BENCH_TENANT: &str = "bench";

/// With `--budgets`: a price, a tenant with credits and a quota far above the load, and with
/// `--cluster` the Redis they are kept in.
fn budgets_config(a: &OverheadArgs) -> String {
    if !a.budgets {
        return String::new();
    }
    let cluster = if a.cluster {
        "[cluster]\nredis_url_env = \"SLUICE_REDIS_URL\"\n"
    } else {
        ""
    };
    format!(
        "[prices.fixed]\ninput = 0.01\noutput = 0.01\n[tenants.{BENCH_TENANT}]\ncredits = 1000000.0\nrpm = 60000000\n{cluster}"
    )
}
