//! Runs a scenario against the real gateway stack in virtual time: simulated upstreams
//! in-process, the gateway's router called without a socket, tokio's clock paused. A
//! twenty-minute scenario takes seconds and gives the same summary for the same seed.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde::Serialize;
use sluice_core::CallRecord;
use sluice_gateway::BuildError;
use sluice_gateway::{Gateway, GatewayBuilder};
use sluice_providers::WithTimeouts;
use sluice_telemetry::LatencyReport;
use tokio::time::Instant;

use crate::load::{Progress, Recorder, RouterTarget, Summary, drive};
use crate::provider::SimProvider;
use crate::scenario::Scenario;
use crate::upstream::{SimUpstream, Stats};

/// What a run produced.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The scenario's name.
    pub scenario: String,
    /// The seed used.
    pub seed: u64,
    /// What the clients saw.
    pub summary: Summary,
    /// What each simulated upstream saw (request ids left out).
    pub upstreams: BTreeMap<String, Stats>,
    /// Requests the upstreams received beyond the clients' own: hedges and retries.
    pub extra_requests: u64,
    /// The gateway's own percentile windows at the end of the run.
    pub gateway: LatencyReport,
    /// The simulated judge's verdicts, when the scenario's models have quality tables.
    #[serde(skip)]
    pub verdicts: Vec<crate::judge::Verdict>,
    /// The run's token bill (every call's cost, hedges and retries included), in
    /// micro-units.
    pub cost_micros: u64,
    /// What each automatic router learnt by the end (to start a later run from).
    #[serde(skip)]
    pub routers: Vec<(String, Vec<sluice_routing::auto::Stored>)>,
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The gateway could not be assembled.
    #[error("building the gateway: {0}")]
    Build(#[from] BuildError),
    /// The runtime could not be built.
    #[error("building the runtime: {0}")]
    Runtime(#[from] std::io::Error),
    /// The recorder could not be built.
    #[error("building histograms: {0}")]
    Histogram(#[from] hdrhistogram::CreationError),
}

/// The simulated upstreams of a scenario, and a gateway in front of them.
pub struct Rig {
    /// The upstreams, by name.
    pub upstreams: Vec<(String, Arc<SimUpstream>)>,
    /// The gateway.
    pub gateway: Arc<Gateway>,
}

/// Builds the scenario's upstreams (clocks starting now) and a gateway dispatching to them
/// in-process, each behind the scenario's timeouts.
pub fn rig(s: &Scenario, seed: u64, builder: GatewayBuilder) -> Result<Rig, BuildError> {
    let now = Instant::now();
    let mut b = builder.seed(seed);
    let mut upstreams = Vec::new();
    for (name, spec) in &s.upstreams {
        let up = Arc::new(SimUpstream::new(name, spec.clone(), seed, now));
        let timed = WithTimeouts::new(
            SimProvider(up.clone()),
            name,
            s.gateway.first_byte_timeout,
            s.gateway.idle_timeout,
        );
        b = b.provider(name, Arc::new(timed));
        upstreams.push((name.clone(), up));
    }
    Ok(Rig {
        upstreams,
        gateway: s.configure(b).build()?,
    })
}

/// Runs `s` through sluice with its defaults, on a fresh single-threaded runtime with the
/// clock paused.
pub fn run(s: &Scenario) -> Result<Report, HarnessError> {
    run_with(s, GatewayBuilder::new())
}

/// Runs `s` as [`run_with`] does, keeping every call record the gateway settled.
pub fn run_recorded(
    s: &Scenario,
    builder: GatewayBuilder,
) -> Result<(Report, Vec<CallRecord>), HarnessError> {
    let records = Arc::new(Mutex::new(Vec::new()));
    let sink = records.clone();
    let builder = builder.on_record(Arc::new(move |r: &CallRecord| sink.lock().push(r.clone())));
    let report = run_with(s, builder)?;
    let records = std::mem::take(&mut *records.lock());
    Ok((report, records))
}

/// Runs `s` with a gateway started from `builder` (a policy switched on or off on top of the
/// scenario's own settings), on a fresh single-threaded runtime with the clock paused.
pub fn run_with(s: &Scenario, builder: GatewayBuilder) -> Result<Report, HarnessError> {
    run_clients(s, builder, 0)
}

/// Runs `s` as [`run_with`] does, its clients retrying `retries` times as the official SDKs
/// do (a comparison's plain-proxy column: [`crate::variants::Variant::client_retries`]).
pub fn run_clients(
    s: &Scenario,
    builder: GatewayBuilder,
    retries: u32,
) -> Result<Report, HarnessError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()?;
    rt.block_on(run_here(s, builder, retries))
}

/// Runs `s` on the current runtime (which should have its clock paused).
async fn run_here(
    s: &Scenario,
    builder: GatewayBuilder,
    retries: u32,
) -> Result<Report, HarnessError> {
    let seed = s.meta.seed;
    let cost = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let billed = cost.clone();
    let builder = builder.on_record(Arc::new(move |r: &CallRecord| {
        let micros = r.cost_micros.unwrap_or(0) + r.extra_cost_micros;
        billed.fetch_add(micros, std::sync::atomic::Ordering::Relaxed);
    }));
    let rig = rig(s, seed, builder)?;
    let router = sluice_gateway::server::router(rig.gateway.clone());
    let recorder = Arc::new(Mutex::new(Recorder::new(s.meta.slo)?));
    let workload = s.workload();
    let judge = workload.judge.clone();
    let uri = http::Uri::from_static("http://sluice.sim/v1/chat/completions");
    let took = drive(
        crate::load::Retrying::new(RouterTarget(router), retries),
        uri,
        &workload,
        &s.meta.name,
        recorder.clone(),
        Arc::new(Progress::default()),
    )
    .await;
    let summary = recorder.lock().summary(took.took, took.sending);
    let upstreams: BTreeMap<String, Stats> = rig
        .upstreams
        .iter()
        .map(|(n, u)| {
            let mut stats = u.stats();
            stats.request_ids.clear();
            (n.clone(), stats)
        })
        .collect();
    let received: u64 = upstreams.values().map(|u| u.requests).sum();
    Ok(Report {
        scenario: s.meta.name.clone(),
        seed,
        extra_requests: received.saturating_sub(summary.all.count),
        summary,
        upstreams,
        gateway: rig.gateway.telemetry().latency_report(Instant::now()),
        verdicts: judge.map(|j| j.verdicts()).unwrap_or_default(),
        cost_micros: cost.load(std::sync::atomic::Ordering::Relaxed),
        routers: rig
            .gateway
            .routes()
            .routers()
            .into_iter()
            .map(|(n, r)| (n.to_string(), r.lock().export()))
            .collect(),
    })
}

#[cfg(test)]
mod tests;
