//! What the soak runs: the simulated upstreams, the gateway's configuration (streams,
//! hedges, retries, both caches and the ledger on), the traffic of one window and the target
//! that sends probes directly or through sluice by their lane.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::Full;
use sluice_sim::UpstreamSpec;
use sluice_sim::load::{HttpTarget, Questions, Target, Traffic, Workload};
use sluice_sim::spec::Faults;

/// Lanes of the soak's traffic: what the recorder groups results by.
pub(super) const CHAT: &str = "chat";
pub(super) const CHAT_STREAM: &str = "chat-stream";
pub(super) const UNIQUE: &str = "unique";
pub(super) const UNIQUE_STREAM: &str = "unique-stream";
/// Every lane whose requests go through sluice.
pub(super) const THROUGH: [&str; 5] = [CHAT, CHAT_STREAM, UNIQUE, UNIQUE_STREAM, PROBE];
pub(super) const PROBE: &str = "probe";
pub(super) const DIRECT: &str = "direct";

/// The share of the rate through sluice sent as probes (and the same rate again directly):
/// one-token answers from a 1 ms upstream, whose percentiles through sluice less those sent
/// directly are what sluice adds.
const PROBE_SHARE: f64 = 0.1;
/// The share of the rest asked as FAQ questions (popular ones asked again: cache hits); the
/// others are documents unique to each request (always upstream).
const FAQ_SHARE: f64 = 0.5;
/// The share of each kind asked for streams.
const STREAM_SHARE: f64 = 1.0 / 3.0;

/// The upstream the FAQ traffic goes to: ~20 ms to the first token with a log-normal tail,
/// one request in a hundred stalled 400 ms (what hedges are for), 1% answered 500 and 0.2%
/// reset (what retries are for), answering the FAQ world's questions by meaning (so that
/// semantic hits and verifications have answers to agree with).
pub(super) fn faq_upstream() -> UpstreamSpec {
    let mut s = UpstreamSpec {
        ttft_median: Duration::from_millis(20),
        ttft_sigma: 0.4,
        stall_probability: 0.01,
        stall: Duration::from_millis(400),
        per_token: Duration::from_millis(1),
        tokens_per_chunk: 4,
        output_tokens_median: 24,
        output_tokens_sigma: 0.3,
        faq: true,
        faults: Faults {
            error_500: 0.01,
            reset: 0.002,
            ..Faults::default()
        },
        ..UpstreamSpec::default()
    };
    s.prompt_cache.enabled = false;
    s
}

/// The probes' upstream: one token after 1 ms, every time.
pub(super) fn probe_upstream() -> UpstreamSpec {
    let mut s = UpstreamSpec {
        ttft_median: Duration::from_millis(1),
        ttft_sigma: 0.0,
        output_tokens_median: 1,
        output_tokens_sigma: 0.0,
        ..UpstreamSpec::default()
    };
    s.prompt_cache.enabled = false;
    s
}

/// The semantic cache's model: `SLUICE_EMBEDDER_DIR` when set, else `models/static-64`
/// under the working folder (where `scripts/install-embedder` puts it).
pub(super) fn embedder_dir() -> anyhow::Result<PathBuf> {
    let dir = match std::env::var_os("SLUICE_EMBEDDER_DIR") {
        Some(d) => PathBuf::from(d),
        None => std::env::current_dir()?.join("models/static-64"),
    };
    anyhow::ensure!(
        dir.is_dir(),
        "the semantic cache's model is not at {}: install it with `scripts/install-embedder`, \
         or name its folder in SLUICE_EMBEDDER_DIR",
        dir.display()
    );
    Ok(dir)
}

/// The gateway's configuration: both groups on the simulator at `sim`, two deployments
/// for the FAQ traffic (retries go elsewhere first), hedging in every lane, both caches on
/// with `cache_bytes` each (so that they fill and evict within the run), and the ledger in
/// `ledger` flushed to the disk at every commit (the default).
pub(super) fn gateway_config(
    port: u16,
    sim: std::net::SocketAddr,
    ledger: &Path,
    embedder: &Path,
    cache_bytes: u64,
) -> String {
    format!(
        r#"[server]
listen = "127.0.0.1:{port}"

[ledger]
path = "{ledger}"

[cache]
enabled = true
max_bytes = {cache_bytes}

[cache.semantic]
enabled = true
model = "{embedder}"
max_bytes = {cache_bytes}

[providers.a]
kind = "openai"
base_url = "http://{sim}/faq/v1"

[providers.b]
kind = "openai"
base_url = "http://{sim}/faq/v1"

[providers.p]
kind = "openai"
base_url = "http://{sim}/probe/v1"

[models.chat]
deployments = [{{ provider = "a", model = "faq" }}, {{ provider = "b", model = "faq" }}]
hedge = true
timeout = "10s"

[models.probe]
deployments = [{{ provider = "p", model = "probe" }}]
"#,
        ledger = ledger.display(),
        embedder = embedder.display(),
    )
}

/// One window's traffic at `rate` a second through sluice (plus the probes' direct share):
/// FAQ questions (popular ones asked again, reworded, and look-alikes) and documents unique
/// to each request, complete and streamed, and probes through sluice and direct, seeded by
/// the window.
pub(super) fn window(rate: f64, length: Duration, seed: u64) -> Workload {
    let probes = rate * PROBE_SHARE;
    let faq = (rate - probes) * FAQ_SHARE;
    let unique = rate - probes - faq;
    let traffic = |lane: &str, model: &str, rate: f64, stream: bool, faq: bool| Traffic {
        lane: lane.into(),
        model: model.into(),
        rate,
        prompt_tokens: 200,
        stream,
        max_tokens: Some(64),
        questions: faq.then_some(Questions::Faq),
        ..Traffic::default()
    };
    Workload::build(
        &[
            traffic(CHAT, "chat", faq * (1.0 - STREAM_SHARE), false, true),
            traffic(CHAT_STREAM, "chat", faq * STREAM_SHARE, true, true),
            traffic(UNIQUE, "chat", unique * (1.0 - STREAM_SHARE), false, false),
            traffic(UNIQUE_STREAM, "chat", unique * STREAM_SHARE, true, false),
            traffic(PROBE, "probe", probes, false, false),
            traffic(DIRECT, "probe", probes, false, false),
        ],
        &[],
        length,
        seed,
    )
}

/// Sends the direct probes to the simulator and everything else through sluice.
#[derive(Clone, Debug)]
pub(super) struct Soak {
    pub(super) inner: HttpTarget,
    pub(super) direct: http::Uri,
    pub(super) through: http::Uri,
}

impl Target for Soak {
    fn send(
        &self,
        mut req: http::Request<Full<Bytes>>,
    ) -> BoxFuture<'static, Result<http::Response<axum::body::Body>, String>> {
        // The lane names the soak's own traffic; the gateway sees every request as interactive.
        let lane = req.headers_mut().remove("x-sluice-lane");
        *req.uri_mut() = match lane.as_ref().map(http::HeaderValue::as_bytes) {
            Some(l) if l == DIRECT.as_bytes() => self.direct.clone(),
            _ => self.through.clone(),
        };
        self.inner.send(req)
    }
}
