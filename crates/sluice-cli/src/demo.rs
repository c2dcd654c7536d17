//! `sluice demo`: the seed's document-analysis platform rehearsed on one machine, no accounts
//! or keys. Simulated upstreams and the gateway run in this process on loopback; the load
//! generator replays the scenario against each variant at once, and the report puts the
//! variants side by side, one column each.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use parking_lot::Mutex;
use serde::Serialize;
use sluice_economy::{Micros, Price};
use sluice_gateway::{Gateway, Server, ShutdownHandle};
use sluice_ledger::{AnyStore, Durability, Ledger, SqliteStore, Store, UsageQuery, UsageRow};
use sluice_providers::bedrock::{Bedrock, BedrockAuth, BedrockSettings, Credentials};
use sluice_providers::{
    Anthropic, AnthropicSettings, Gemini, GeminiSettings, HttpSettings, OpenAiCompat,
    OpenAiSettings, Provider,
};
use sluice_sim::Stats;
use sluice_sim::limits::Api;
use sluice_sim::load::record::table;
use sluice_sim::load::{HttpTarget, LaneSummary, Progress, Recorder, Retrying, Summary, drive};
use sluice_sim::scenario::Scenario;
use sluice_sim::server::{SimServer, serve_on};
use sluice_sim::variants::{self, Variant};
use sluice_telemetry::LatencyReport;
use tokio::time::Instant;

use sluice_cli::write_json;

mod against;
mod report;

use report::report;

/// Options of the demo.
#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// How long to replay the traffic (the scenario's own length by default: 60 s).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,
    /// Seed of every random draw; the same seed replays the same traffic and latencies.
    #[arg(long)]
    pub seed: Option<u64>,
    /// A built-in scenario name or a scenario file.
    #[arg(long, default_value = "doc-analysis")]
    pub scenario: String,
    /// Write the full results as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Serialize)]
struct VariantResult {
    name: &'static str,
    summary: Summary,
    upstreams: BTreeMap<String, Stats>,
    gateway: LatencyReport,
    /// The most requests waiting in sluice's queues at once, per lane (all deployments
    /// together), sampled every 200 ms; empty for a gateway without queues.
    deepest_queue: BTreeMap<String, usize>,
    /// The column's token bill, totalled from its usage ledger.
    bill: UsageRow,
}

/// Requests waiting in `gw`'s queues now, per lane, all deployments together.
fn queued(gw: &Gateway) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for g in gw.routes().groups() {
        for d in &g.deployments {
            if let Some(l) = &d.limiter {
                for (lane, _, waiting) in l.stats().lanes {
                    *out.entry(lane.to_string()).or_insert(0) += waiting;
                }
            }
        }
    }
    out
}

struct Running {
    variant: Variant,
    url: http::Uri,
    sim: SimServer,
    gateway: Arc<Gateway>,
    shutdown: ShutdownHandle,
    recorder: Arc<Mutex<Recorder>>,
    progress: Arc<Progress>,
    /// The column's usage ledger, in a file of its own, removed at the end.
    store: Arc<AnyStore>,
    _ledger_dir: tempfile::TempDir,
}

/// Runs the demo.
pub fn run(a: &DemoArgs) -> anyhow::Result<ExitCode> {
    let mut s = crate::scenario_cmd::load(&a.scenario)?;
    if let Some(d) = a.duration {
        s.meta.duration = d;
    }
    if let Some(seed) = a.seed {
        s.meta.seed = seed;
    }
    let rt = tokio::runtime::Runtime::new().context("starting the runtime")?;
    let results = rt.block_on(replay(&s))?;
    report(&s, &results);
    if !s.routers.is_empty() {
        crate::scenario_cmd::choosing_table(&s)?;
    }
    write_json(a.json.as_deref(), &results)?;
    Ok(ExitCode::SUCCESS)
}

fn provider(name: &str, api: Api, base: String, s: &Scenario) -> anyhow::Result<Arc<dyn Provider>> {
    let http = HttpSettings {
        connect_timeout: Duration::from_secs(2),
        first_byte_timeout: s.gateway.first_byte_timeout,
        idle_timeout: s.gateway.idle_timeout,
        pool_max_idle: 1024,
        pool_idle_timeout: Duration::from_secs(90),
    };
    Ok(match api {
        Api::Openai => Arc::new(OpenAiCompat::new(
            name,
            OpenAiSettings {
                base_url: base,
                http,
                ..OpenAiSettings::default()
            },
        )?),
        Api::Anthropic => Arc::new(Anthropic::new(
            name,
            AnthropicSettings {
                base_url: base,
                http,
                ..AnthropicSettings::default()
            },
        )?),
        // The simulator asks for a signature on Bedrock's URLs: made-up credentials sign.
        Api::Bedrock => Arc::new(Bedrock::new(
            name,
            BedrockSettings {
                base_url: base,
                region: "us-east-1".into(),
                auth: BedrockAuth::SigV4(Credentials {
                    access_key: "AKIDSIMULATOR".into(),
                    secret_key: "simulated-secret".into(),
                    session_token: None,
                    source: "the simulator".into(),
                }),
                headers: Vec::new(),
                http,
            },
        )?),
        // The simulator asks for a credential on Gemini's URLs, as Google does.
        Api::Gemini => Arc::new(Gemini::new(
            name,
            GeminiSettings {
                base_url: base,
                params: sluice_providers::gemini::GeminiParams::default(),
                api_key: Some("sim".into()),
                headers: Vec::new(),
                http,
            },
        )?),
    })
}

/// Where the simulator serves upstream `name` in `api`'s URL shape.
pub(crate) fn sim_base(sim: std::net::SocketAddr, name: &str, api: Api) -> String {
    match api {
        Api::Gemini => format!("http://{sim}/{name}/v1beta"),
        Api::Bedrock => format!("http://{sim}/{name}"),
        Api::Openai | Api::Anthropic => format!("http://{sim}/{name}/v1"),
    }
}

async fn start(v: Variant, s: &Scenario) -> anyhow::Result<Running> {
    let sim = SimServer::new(&s.upstreams, s.meta.seed);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let sim_addr = listener.local_addr()?;
    tokio::spawn(serve_on(sim.clone(), listener, std::future::pending()));
    let mut b = v.builder().seed(s.meta.seed);
    for (name, spec) in &s.upstreams {
        b = b.provider(
            name,
            provider(name, spec.api, sim_base(sim_addr, name, spec.api), s)?,
        );
    }
    // Each column keeps its own ledger, as a gateway would. GLM is priced with the example
    // figures of sluice.example.toml; DeepSeek with the shipped defaults.
    let ledger_dir = tempfile::tempdir().context("making the ledger's folder")?;
    let store = Arc::new(AnyStore::Sqlite(
        SqliteStore::open(&ledger_dir.path().join("ledger.db"), Durability::Process).await?,
    ));
    let (ledger, _writer) = Ledger::start(store.clone());
    let b = b.ledger(ledger, store.clone()).price(
        "glm-4.5-air",
        Price {
            input: Micros(110_000),
            cached_input: Micros(20_000),
            cache_write: Micros(110_000),
            output: Micros(280_000),
            published: None,
        },
    );
    // The caches the scenario asks for, in every column but the plain proxy.
    let mut b = s.configure(b);
    if v.name != "proxy" {
        b = s.with_caches(b, sim_addr)?;
    }
    let gateway = b.build()?;
    let server = Server::bind(
        gateway.clone(),
        "127.0.0.1:0".parse()?,
        Duration::from_secs(5),
    )
    .await?;
    let url = format!("http://{}/v1/chat/completions", server.local_addr()?).parse()?;
    let shutdown = ShutdownHandle::new();
    let trigger = shutdown.clone();
    tokio::spawn(server.run(async move { trigger.triggered().await }));
    Ok(Running {
        variant: v,
        url,
        sim,
        gateway,
        shutdown,
        recorder: Arc::new(Mutex::new(Recorder::new(s.meta.slo)?)),
        progress: Arc::new(Progress::default()),
        store,
        _ledger_dir: ledger_dir,
    })
}

async fn replay(s: &Scenario) -> anyhow::Result<Vec<VariantResult>> {
    let workload = s.workload();
    let mut running = Vec::new();
    for v in variants::all() {
        running.push(start(v, s).await?);
    }
    println!(
        "sluice demo: {} (seed {}, {:.0} s)",
        s.meta.name,
        s.meta.seed,
        s.meta.duration.as_secs_f64()
    );
    println!("{}", s.meta.description);
    for r in &running {
        println!("  column {:9} {}", r.variant.name, r.variant.about);
    }
    println!();
    let total = workload.requests.len() as u64 * running.len() as u64;
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:40.cyan/blue} {pos}/{len} requests answered  [{elapsed_precise}] {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let counters: Vec<Arc<Progress>> = running.iter().map(|r| r.progress.clone()).collect();
    let gateways: Vec<Arc<Gateway>> = running.iter().map(|r| r.gateway.clone()).collect();
    let deepest: Arc<Mutex<Vec<BTreeMap<String, usize>>>> =
        Arc::new(Mutex::new(vec![BTreeMap::new(); running.len()]));
    let ticker = {
        let bar = bar.clone();
        let duration = s.meta.duration;
        let deepest = deepest.clone();
        tokio::spawn(async move {
            let start = Instant::now();
            loop {
                for (gw, most) in gateways.iter().zip(deepest.lock().iter_mut()) {
                    for (lane, n) in queued(gw) {
                        let m = most.entry(lane).or_insert(0);
                        *m = (*m).max(n);
                    }
                }
                let done: u64 = counters
                    .iter()
                    .map(|c| c.done.load(Ordering::Relaxed))
                    .sum();
                let sent: u64 = counters
                    .iter()
                    .map(|c| c.sent.load(Ordering::Relaxed))
                    .sum();
                bar.set_position(done);
                let t = start.elapsed().min(duration);
                bar.set_message(format!(
                    "{} in flight, traffic {:.0}/{:.0} s",
                    sent - done,
                    t.as_secs_f64(),
                    duration.as_secs_f64()
                ));
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    // Every column sends the same request ids: each request is routed, and simulated, the
    // same way in every column, so the columns differ only by their policies.
    let runs = running.iter().map(|r| {
        drive(
            Retrying::new(HttpTarget::new(1024), r.variant.client_retries),
            r.url.clone(),
            &workload,
            &s.meta.name,
            r.recorder.clone(),
            r.progress.clone(),
        )
    });
    let took = futures::future::join_all(runs).await;
    ticker.abort();
    bar.finish_and_clear();
    let deepest = deepest.lock().clone();
    let mut out = Vec::new();
    for ((r, took), deepest_queue) in running.into_iter().zip(took).zip(deepest) {
        let upstreams = s
            .upstreams
            .iter()
            .filter_map(|(n, _)| {
                r.sim.upstream(n).map(|u| {
                    let mut st = u.stats();
                    st.request_ids.clear();
                    (n.clone(), st)
                })
            })
            .collect();
        r.shutdown.trigger();
        let bill = match r.gateway.ledger() {
            Some(ledger) => {
                ledger.flush().await?;
                let rows = r.store.usage(&UsageQuery::default()).await?;
                rows.into_iter().next().unwrap_or_default()
            }
            None => UsageRow::default(),
        };
        out.push(VariantResult {
            name: r.variant.name,
            summary: r.recorder.lock().summary(took.took, took.sending),
            upstreams,
            gateway: r.gateway.telemetry().latency_report(Instant::now()),
            deepest_queue,
            bill,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
