//! The exporter: kept calls wait in a bounded queue for a thread of their own, which builds
//! their spans and sends them over OTLP (HTTP/protobuf or gRPC) in batches. The request path
//! only clones a kept call's record into the queue; a full queue drops the trace and counts
//! it, and a collector that is down or slow costs a counter and a warning, never a request's
//! time.

use std::sync::Arc;
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry_otlp::{WithExportConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanExporter as _};
use parking_lot::Mutex;
use sluice_core::CallRecord;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::sample::Kept;
use crate::spans::{self, Upstreams};

/// How spans reach the collector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP over HTTP, protobuf bodies (`POST {endpoint}`, usually `.../v1/traces`).
    HttpProtobuf,
    /// OTLP over gRPC (`TraceService/Export`).
    Grpc,
}

/// Where and how spans go.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportConfig {
    /// The collector's URL: for HTTP the whole traces URL (`http://host:4318/v1/traces`), for
    /// gRPC its address (`http://host:4317`).
    pub endpoint: String,
    /// The protocol.
    pub protocol: Protocol,
    /// The most spans one export sends.
    pub batch: usize,
    /// The longest a span waits for its batch to fill.
    pub flush: Duration,
    /// Kept calls waiting for the exporter; beyond, a kept call's trace is dropped.
    pub queue: usize,
    /// The longest one export may take.
    pub timeout: Duration,
    /// The resource's `service.name`.
    pub service: String,
    /// Further resource attributes (`deployment.environment.name`, ...).
    pub resource: Vec<(String, String)>,
}

/// What happened to kept traces, for the metrics.
pub trait Tally: Send + Sync + 'static {
    /// `n` traces ended as `outcome`: `exported`, `failed` (the collector refused them, was
    /// unreachable or too slow) or `dropped` (the queue was full).
    fn traces(&self, outcome: &'static str, n: u64);
}

/// Why the exporter could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The exporter's thread or runtime.
    #[error("starting the trace exporter's thread: {0}")]
    Thread(#[from] std::io::Error),
    /// The OTLP exporter refused its configuration.
    #[error("the OTLP exporter: {0}")]
    Otlp(String),
}

/// A kept call on its way to the exporter.
struct Job {
    record: Box<CallRecord>,
    kept: Kept,
    settled: Instant,
}

/// The exporter's handle: a queue to its thread.
pub struct Exporter {
    tx: Mutex<Option<mpsc::Sender<Job>>>,
    finished: Mutex<Option<std_mpsc::Receiver<()>>>,
    tally: Arc<dyn Tally>,
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter").finish_non_exhaustive()
    }
}

impl Exporter {
    /// Starts the exporter's thread; spans of the calls sent to it are described with
    /// `upstreams`. Fails when the configuration cannot make an exporter.
    pub fn start(
        cfg: ExportConfig,
        upstreams: Arc<Upstreams>,
        tally: Arc<dyn Tally>,
    ) -> Result<Self, StartError> {
        let (tx, rx) = mpsc::channel(cfg.queue.max(1));
        let (done_tx, done_rx) = std_mpsc::channel();
        let (ready_tx, ready_rx) = std_mpsc::sync_channel(1);
        let thread_tally = tally.clone();
        std::thread::Builder::new()
            .name("sluice-traces".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(StartError::Thread(e)));
                        return;
                    }
                };
                // Built on the exporter's own runtime (gRPC's channel needs its reactor).
                let otlp = match rt.block_on(async { build(&cfg) }) {
                    Ok(otlp) => otlp,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                rt.block_on(run(otlp, cfg, rx, upstreams, thread_tally));
                let _ = done_tx.send(());
            })?;
        // A bad configuration fails here, before the gateway starts.
        ready_rx.recv().map_err(|_| {
            StartError::Otlp("the exporter's thread ended before starting".into())
        })??;
        Ok(Self {
            tx: Mutex::new(Some(tx)),
            finished: Mutex::new(Some(done_rx)),
            tally,
        })
    }

    /// Queues `record`'s trace, kept for `kept`; a full queue drops it (counted).
    pub fn send(&self, record: &CallRecord, kept: Kept, settled: Instant) {
        let guard = self.tx.lock();
        let Some(tx) = guard.as_ref() else {
            return;
        };
        let job = Job {
            record: Box::new(record.clone()),
            kept,
            settled,
        };
        if tx.try_send(job).is_err() {
            self.tally.traces("dropped", 1);
        }
    }

    /// Stops taking traces, sends what is queued, and waits up to `wait` for the last export
    /// (at shutdown). Blocks the calling thread.
    pub fn close(&self, wait: Duration) {
        drop(self.tx.lock().take());
        if let Some(done) = self.finished.lock().take() {
            let _ = done.recv_timeout(wait);
        }
    }
}

fn build(cfg: &ExportConfig) -> Result<opentelemetry_otlp::SpanExporter, StartError> {
    let built = match cfg.protocol {
        Protocol::HttpProtobuf => opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(cfg.endpoint.clone())
            .with_timeout(cfg.timeout)
            .build(),
        Protocol::Grpc => opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(cfg.endpoint.clone())
            .with_timeout(cfg.timeout)
            .with_metadata(tonic_metadata())
            .build(),
    };
    let mut exporter = built.map_err(|e| StartError::Otlp(e.to_string()))?;
    exporter.set_resource(&resource(cfg));
    Ok(exporter)
}

/// The resource every span is sent with: `service.name`, `service.version` and the
/// configuration's further attributes.
fn resource(cfg: &ExportConfig) -> Resource {
    Resource::builder_empty()
        .with_service_name(cfg.service.clone())
        .with_attributes(
            std::iter::once(KeyValue::new("service.version", env!("CARGO_PKG_VERSION"))).chain(
                cfg.resource
                    .iter()
                    .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
            ),
        )
        .build()
}

/// No extra gRPC metadata: the exporter reads `OTEL_EXPORTER_OTLP_HEADERS` itself.
fn tonic_metadata() -> opentelemetry_otlp::tonic_types::metadata::MetadataMap {
    opentelemetry_otlp::tonic_types::metadata::MetadataMap::new()
}

/// The exporter's loop: spans gather until a batch is full or its oldest has waited
/// `flush`, then go in one export; when the queue closes, what is left goes.
async fn run(
    otlp: opentelemetry_otlp::SpanExporter,
    cfg: ExportConfig,
    mut rx: mpsc::Receiver<Job>,
    upstreams: Arc<Upstreams>,
    tally: Arc<dyn Tally>,
) {
    let mut batch = Batch::default();
    let mut due: Option<Instant> = None;
    let mut failing = false;
    loop {
        let job = match due {
            Some(at) => tokio::select! {
                job = rx.recv() => job,
                () = tokio::time::sleep_until(at) => {
                    batch.send(&otlp, &cfg, &*tally, &mut failing).await;
                    due = None;
                    continue;
                }
            },
            None => rx.recv().await,
        };
        let Some(job) = job else {
            batch.send(&otlp, &cfg, &*tally, &mut failing).await;
            return;
        };
        batch
            .spans
            .extend(spans::of(&job.record, &upstreams, job.kept, job.settled));
        batch.traces += 1;
        due.get_or_insert_with(|| Instant::now() + cfg.flush);
        if batch.spans.len() >= cfg.batch {
            batch.send(&otlp, &cfg, &*tally, &mut failing).await;
            due = None;
        }
    }
}

/// Spans waiting to go, and how many traces they make.
#[derive(Default)]
struct Batch {
    spans: Vec<SpanData>,
    traces: u64,
}

impl Batch {
    async fn send(
        &mut self,
        otlp: &opentelemetry_otlp::SpanExporter,
        cfg: &ExportConfig,
        tally: &dyn Tally,
        failing: &mut bool,
    ) {
        if self.spans.is_empty() {
            return;
        }
        let spans = std::mem::take(&mut self.spans);
        let traces = std::mem::take(&mut self.traces);
        // The exporter has a timeout of its own; this one bounds whatever it does not cover.
        let result =
            tokio::time::timeout(cfg.timeout + Duration::from_secs(1), otlp.export(spans)).await;
        match result {
            Ok(Ok(())) => {
                if *failing {
                    tracing::info!(endpoint = %cfg.endpoint, "the trace collector takes spans again");
                }
                *failing = false;
                tally.traces("exported", traces);
            }
            Ok(Err(e)) => {
                if !*failing {
                    tracing::warn!(endpoint = %cfg.endpoint, error = %e, "exporting traces failed; they are dropped and counted until the collector answers");
                }
                *failing = true;
                tally.traces("failed", traces);
            }
            Err(_) => {
                if !*failing {
                    tracing::warn!(endpoint = %cfg.endpoint, "exporting traces timed out; they are dropped and counted until the collector answers");
                }
                *failing = true;
                tally.traces("failed", traces);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_carry_the_service_its_version_and_the_configured_attributes() {
        let cfg = ExportConfig {
            endpoint: "http://127.0.0.1:4318/v1/traces".into(),
            protocol: Protocol::HttpProtobuf,
            batch: 10,
            flush: Duration::from_millis(100),
            queue: 10,
            timeout: Duration::from_secs(1),
            service: "sluice-eu".into(),
            resource: vec![("deployment.environment.name".into(), "prod".into())],
        };
        let r = resource(&cfg);
        let get = |k: &'static str| r.get(&opentelemetry::Key::from_static_str(k));
        assert_eq!(
            get("service.name"),
            Some(opentelemetry::Value::from("sluice-eu"))
        );
        assert_eq!(
            get("service.version"),
            Some(opentelemetry::Value::from(env!("CARGO_PKG_VERSION")))
        );
        assert_eq!(
            get("deployment.environment.name"),
            Some(opentelemetry::Value::from("prod"))
        );
    }
}
