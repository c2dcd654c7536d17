//! Tracing's assembly: the sampler and the OTLP exporter `[traces]` asks for, and what the
//! spans say of each deployment (its provider, model and server).

use std::collections::HashMap;
use std::sync::Arc;

use sluice_config::gateway::{DeploymentConfig, TraceProtocol, TracesConfig};
use sluice_telemetry::Telemetry;
use sluice_trace::{ExportConfig, Protocol, Sampler, Tracer, Upstream, Upstreams};

use super::{BuildError, GatewayBuilder};

/// How calls are traced: who is kept, and where their spans go.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceSetup {
    /// Which calls are kept.
    pub sampler: Sampler,
    /// Where their spans go.
    pub export: ExportConfig,
}

impl TraceSetup {
    /// The setup `[traces]` describes; `None` when tracing is off.
    pub fn from_config(c: &TracesConfig) -> Option<Self> {
        c.enabled.then(|| Self {
            sampler: Sampler {
                ratio: c.sample,
                honour_parent: c.honour_parent,
                keep_errors: c.keep_errors,
                keep_over_slo: c.keep_over_slo,
            },
            export: ExportConfig {
                endpoint: c.endpoint(),
                protocol: match c.protocol {
                    TraceProtocol::HttpProtobuf => Protocol::HttpProtobuf,
                    TraceProtocol::Grpc => Protocol::Grpc,
                },
                batch: c.batch,
                flush: c.flush,
                queue: c.queue,
                timeout: c.timeout,
                service: c.service_name.clone(),
                resource: c
                    .resource
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            },
        })
    }
}

impl GatewayBuilder {
    /// Traces calls as `setup` says.
    pub fn traces(mut self, setup: TraceSetup) -> Self {
        self.traces = Some(setup);
        self
    }

    /// Notes where provider `name` is reached (`server.address` and `server.port` of its
    /// calls' spans), from its base URL, and its well-known name (`gen_ai.provider.name`)
    /// from the protocol it speaks (`openai`, `anthropic`) and that URL's host.
    pub fn provider_server(mut self, name: &str, protocol: &str, base_url: &str) -> Self {
        let uri = base_url.parse::<http::Uri>().ok();
        let server = uri.as_ref().and_then(|uri| {
            let host = uri.host()?;
            let port = uri.port_u16().unwrap_or(match uri.scheme_str() {
                Some("https") => 443,
                _ => 80,
            });
            Some((Arc::from(host), port))
        });
        let system =
            sluice_trace::genai::provider_name(protocol, uri.as_ref().and_then(http::Uri::host));
        self.servers
            .insert(name.to_string(), Site { server, system });
        self
    }
}

/// Where a provider is reached, and its well-known name.
#[derive(Clone, Debug)]
pub struct Site {
    /// Host and port, when its base URL has them.
    pub server: Option<(Arc<str>, u16)>,
    /// `gen_ai.provider.name`.
    pub system: &'static str,
}

/// What the spans of deployment `d` say of it.
pub(super) fn upstream(d: &DeploymentConfig, servers: &HashMap<String, Site>) -> Upstream {
    let site = servers.get(&d.provider);
    Upstream {
        provider: Arc::from(d.provider.as_str()),
        system: site.map_or("openai", |s| s.system),
        model: Arc::from(d.model.as_str()),
        server: site.and_then(|s| s.server.clone()),
    }
}

/// Counts what became of kept traces in the gateway's metrics.
struct Counted(Arc<Telemetry>);

impl sluice_trace::Tally for Counted {
    fn traces(&self, outcome: &'static str, n: u64) {
        self.0.traces(outcome, n);
    }
}

/// The tracer `setup` asks for, its exporter started; `None` without one.
pub(super) fn start(
    setup: Option<TraceSetup>,
    upstreams: Upstreams,
    telemetry: &Arc<Telemetry>,
) -> Result<Option<Tracer>, BuildError> {
    let Some(setup) = setup else {
        return Ok(None);
    };
    let exporter = sluice_trace::Exporter::start(
        setup.export,
        Arc::new(upstreams),
        Arc::new(Counted(telemetry.clone())),
    )?;
    // The ids' random bits, drawn once.
    let seed = uuid::Uuid::new_v4().as_u128();
    Ok(Some(Tracer::new(setup.sampler, exporter, seed)))
}
