//! `sluice sim --config sim.toml`: simulated upstreams over HTTP.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use sluice_sim::server::{SimConfig, SimServer, serve_on};

/// Serves the simulated upstreams of `config` until SIGTERM/SIGINT.
pub fn run(config: &Path) -> anyhow::Result<ExitCode> {
    let text =
        std::fs::read_to_string(config).with_context(|| format!("reading {}", config.display()))?;
    let cfg = SimConfig::parse(&text).map_err(|d| anyhow::anyhow!("{}: {d}", config.display()))?;
    let rt = tokio::runtime::Runtime::new().context("starting the runtime")?;
    rt.block_on(async {
        let server = SimServer::new(&cfg.upstreams, cfg.sim.seed);
        let listener = tokio::net::TcpListener::bind(cfg.listen)
            .await
            .with_context(|| format!("binding {}", cfg.listen))?;
        let addr = listener.local_addr()?;
        for (name, spec) in &cfg.upstreams {
            let path = match spec.api {
                sluice_sim::limits::Api::Openai => "chat/completions",
                sluice_sim::limits::Api::Anthropic => "messages",
                sluice_sim::limits::Api::Gemini => "models/{model}:generateContent",
                sluice_sim::limits::Api::Bedrock => "model/{model}/converse",
            };
            let base = crate::demo::sim_base(addr, name, spec.api);
            tracing::info!("upstream {name}: {base}/{path}");
        }
        tracing::info!("statistics: http://{addr}/stats");
        serve_on(server, listener, sluice_gateway::server::signal()).await?;
        Ok(ExitCode::SUCCESS)
    })
}
