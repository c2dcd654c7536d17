//! `sluice bench overhead`: the gateway's added latency in front of an upstream that answers
//! in about 1 ms, open-loop, measured side by side in one run, plus sluice's peak RSS.
//!
//! The gateway runs as its own process (so its memory can be read); the upstream and the
//! load generator share this one. Direct and through-sluice phases alternate in rounds so
//! that drift on a noisy machine hits both alike.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use clap::Args;
use futures::future::BoxFuture;
use http_body_util::Full;
use parking_lot::Mutex;
use serde::Serialize;
use sluice_sim::UpstreamSpec;
use sluice_sim::load::{
    HttpTarget, LaneSummary, Progress, Recorder, Target, Traffic, Workload, drive,
};
use sluice_sim::server::{SimServer, serve_on};

use crate::bench_cmd::write_json;
use crate::child::Child;

/// Options of the overhead benchmark.
#[derive(Args, Debug, Clone)]
pub struct OverheadArgs {
    /// Request rates to measure at, per second.
    #[arg(long, value_delimiter = ',', default_values_t = [500.0, 2000.0])]
    pub rates: Vec<f64>,
    /// Length of each phase.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub phase: Duration,
    /// Rounds of (direct, through sluice) per rate.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Pin the gateway to these CPUs (e.g. `1`), with `taskset`; run the benchmark itself
    /// elsewhere (`taskset -c 0 sluice bench overhead --gateway-cpus 1`), so that the
    /// gateway does not fight the load generator and the upstream for a core.
    #[arg(long)]
    pub gateway_cpus: Option<String>,
    /// The gateway's usage ledger: `disk` (the default configuration: every commit flushed
    /// to the disk), `process` (flushed at checkpoints) or `off`.
    #[arg(long, default_value = "disk", value_parser = ["disk", "process", "off"])]
    pub ledger: String,
    /// Write the results as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Serialize)]
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
    added: Point,
    sluice_errors: u64,
    /// Failed requests through sluice by status (0: no answer).
    sluice_errors_by_status: std::collections::BTreeMap<u16, u64>,
    /// CPU the gateway spent per request through it, microseconds.
    sluice_cpu_us_per_request: Option<f64>,
}

#[derive(Serialize)]
struct Results {
    upstream: &'static str,
    gateway_cpus: Option<String>,
    rates: Vec<RateResult>,
    sluice_peak_rss_mib: Option<f64>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn point(s: &LaneSummary) -> Point {
    Point {
        p50_ms: ms(s.total.p50),
        p99_ms: ms(s.total.p99),
        p999_ms: ms(s.total.p999),
    }
}

/// An upstream that answers one token after 1 ms.
fn one_ms_upstream() -> UpstreamSpec {
    let mut s = UpstreamSpec {
        ttft_median: Duration::from_millis(1),
        ttft_sigma: 0.0,
        per_token: Duration::ZERO,
        output_tokens_median: 1,
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
    let sim = SimServer::new(&[("fixed".into(), one_ms_upstream())], 1);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let sim_addr = listener.local_addr()?;
    tokio::spawn(serve_on(sim, listener, std::future::pending()));

    let gw_port = crate::child::free_port()?;
    let pid = std::process::id();
    // Every call settles into the ledger, as in production, unless asked otherwise.
    let ledger = match a.ledger.as_str() {
        "off" => "[ledger]\nstore = \"off\"\n\n".to_string(),
        durability => format!(
            "[ledger]\npath = \"sluice-bench-{pid}-ledger.db\"\ndurability = \"{durability}\"\n\n"
        ),
    };
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:{gw_port}\"\n\n{ledger}\n[providers.up]\nkind = \"openai\"\nbase_url = \"http://{sim_addr}/fixed/v1\"\npool_max_idle = 1024\n\n[models.bench]\ndeployments = [{{ provider = \"up\", model = \"fixed\" }}]\n"
    );
    let gateway = Child::spawn(
        "serve",
        &config,
        &format!("http://127.0.0.1:{gw_port}/readyz"),
        a.gateway_cpus.as_deref(),
    )
    .await?;
    let direct: http::Uri = format!("http://{sim_addr}/fixed/v1/chat/completions").parse()?;
    let through: http::Uri = format!("http://127.0.0.1:{gw_port}/v1/chat/completions").parse()?;

    println!(
        "sluice overhead: upstream answers in ~1 ms; {} rounds of {:?} per rate, direct and \
         through-sluice requests interleaved at the same rate each\n",
        a.rounds, a.phase
    );
    let target = Split {
        inner: HttpTarget::new(1024),
        direct,
        through,
    };
    let mut results = Vec::new();
    for &rate in &a.rates {
        let rec = Arc::new(Mutex::new(Recorder::new(None)?));
        let mut took = Duration::ZERO;
        let mut cpu = Some(0.0);
        // Warm both paths (connection pools) before measuring.
        let warm = workload(rate.min(500.0), Duration::from_secs(1), 99);
        let scratch = Arc::new(Mutex::new(Recorder::new(None)?));
        drive(
            target.clone(),
            placeholder(),
            &warm,
            "warm",
            scratch,
            Arc::new(Progress::default()),
        )
        .await;
        for round in 0..a.rounds {
            let w = workload(rate, a.phase, u64::from(round));
            let before = gateway.cpu_seconds();
            took += drive(
                target.clone(),
                placeholder(),
                &w,
                "overhead",
                rec.clone(),
                Arc::new(Progress::default()),
            )
            .await;
            cpu = match (cpu, before, gateway.cpu_seconds()) {
                (Some(c), Some(b), Some(a)) => Some(c + a - b),
                _ => None,
            };
        }
        let summary = rec.lock().summary(took);
        let (Some(d), Some(s)) = (summary.lanes.get(DIRECT), summary.lanes.get(SLUICE)) else {
            anyhow::bail!("no requests were recorded at {rate}/s");
        };
        let (pd, ps) = (point(d), point(s));
        let added = Point {
            p50_ms: ps.p50_ms - pd.p50_ms,
            p99_ms: ps.p99_ms - pd.p99_ms,
            p999_ms: ps.p999_ms - pd.p999_ms,
        };
        results.push(RateResult {
            rate,
            requests_each: s.count,
            direct: pd,
            sluice: ps,
            added,
            sluice_errors: s.count - s.ok,
            sluice_errors_by_status: s.errors_by_status.clone(),
            sluice_cpu_us_per_request: cpu.map(|c| c * 1e6 / s.count.max(1) as f64),
        });
    }
    let rss = gateway.peak_rss_mib();
    drop(gateway);
    for end in ["", "-wal", "-shm"] {
        let file = std::env::temp_dir().join(format!("sluice-bench-{pid}-ledger.db{end}"));
        // Absent when the gateway never wrote: nothing to remove.
        let _ = std::fs::remove_file(file);
    }

    println!(
        "{:>8}  {:>8}  {:>22}  {:>22}  {:>22}",
        "rate/s", "requests", "direct P50/P99/P999", "sluice P50/P99/P999", "added P50/P99/P999"
    );
    for r in &results {
        let f = |p: &Point| format!("{:.3}/{:.3}/{:.3}", p.p50_ms, p.p99_ms, p.p999_ms);
        println!(
            "{:>8.0}  {:>8}  {:>22}  {:>22}  {:>22}",
            r.rate,
            r.requests_each,
            f(&r.direct),
            f(&r.sluice),
            f(&r.added)
        );
        if let Some(us) = r.sluice_cpu_us_per_request {
            println!("          sluice used {us:.0} µs of CPU per request");
        }
        if r.sluice_errors > 0 {
            println!(
                "          ({} requests through sluice failed; by status, 0 = no answer: {:?})",
                r.sluice_errors, r.sluice_errors_by_status
            );
        }
    }
    println!("(milliseconds)\n");
    match rss {
        Some(m) => println!("sluice peak RSS: {m:.1} MiB"),
        None => println!("sluice peak RSS: unavailable (no /proc)"),
    }
    write_json(
        a.json.as_deref(),
        &Results {
            upstream: "simulated, 1 ms, one token, non-streaming",
            gateway_cpus: a.gateway_cpus.clone(),
            rates: results,
            sluice_peak_rss_mib: rss,
        },
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Lane names of the two paths.
const DIRECT: &str = "direct";
const SLUICE: &str = "sluice";

/// Both paths at `rate` each, their arrivals interleaved in one schedule: the two see the
/// same machine at the same moments, so the difference of their percentiles is not drowned
/// by a noisy neighbour that happened to hit only one phase.
fn workload(rate: f64, duration: Duration, seed: u64) -> Workload {
    let path = |lane: &str| Traffic {
        lane: lane.into(),
        model: "bench".into(),
        rate,
        prompt_tokens: 200,
        stream: false,
        ..Traffic::default()
    };
    Workload::build(&[path(DIRECT), path(SLUICE)], &[], duration, seed)
}

fn placeholder() -> http::Uri {
    http::Uri::from_static("http://bench.invalid/")
}

/// Sends each request to the upstream directly or through sluice, by its lane.
#[derive(Clone, Debug)]
struct Split {
    inner: HttpTarget,
    direct: http::Uri,
    through: http::Uri,
}

impl Target for Split {
    fn send(
        &self,
        mut req: http::Request<Full<Bytes>>,
    ) -> BoxFuture<'static, Result<http::Response<axum::body::Body>, String>> {
        // The lane names this benchmark's own two paths; it is not a gateway lane.
        let through = req
            .headers_mut()
            .remove("x-sluice-lane")
            .is_some_and(|v| v == SLUICE);
        *req.uri_mut() = if through {
            self.through.clone()
        } else {
            self.direct.clone()
        };
        self.inner.send(req)
    }
}
