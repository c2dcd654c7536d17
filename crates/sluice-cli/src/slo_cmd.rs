//! `sluice slo rules`: the Prometheus recording and alerting rules for a configuration's SLOs.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use sluice_config::gateway::{self, ProcessEnv, Secrets};

/// Writes the rules for the SLOs of `config` to `out` (standard output when `None`).
pub fn rules(config: &Path, out: Option<&Path>) -> anyhow::Result<ExitCode> {
    let text =
        std::fs::read_to_string(config).with_context(|| format!("reading {}", config.display()))?;
    let checked = gateway::check(&text, &ProcessEnv, &[], Secrets::Warn);
    let cfg = checked
        .config
        .ok_or_else(|| anyhow::anyhow!("{}: {}", config.display(), checked.errors))?;
    let slos = sluice_gateway::assemble::policies::slos(&cfg);
    if slos.is_empty() {
        anyhow::bail!("{} has no [slo.*] section", config.display());
    }
    let rules = sluice_telemetry::slo::rules::rules(&slos);
    match out {
        Some(p) => std::fs::write(p, rules).with_context(|| format!("writing {}", p.display()))?,
        None => print!("{rules}"),
    }
    Ok(ExitCode::SUCCESS)
}
