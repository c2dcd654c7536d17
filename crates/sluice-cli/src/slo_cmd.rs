//! `sluice slo rules`: the Prometheus recording and alerting rules for a configuration's SLOs.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use sluice_config::gateway::{self, ProcessEnv, Secrets};

/// Writes the rules for the SLOs of `config` to `out` (standard output when `None`), their
/// windows `speed` times shorter.
pub fn rules(config: &Path, out: Option<&Path>, speed: u32) -> anyhow::Result<ExitCode> {
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
    if speed == 0 {
        anyhow::bail!("--speed must be at least 1");
    }
    let rules = sluice_telemetry::slo::rules::rules_at(&slos, speed);
    match out {
        Some(p) => std::fs::write(p, rules).with_context(|| format!("writing {}", p.display()))?,
        None => print!("{rules}"),
    }
    Ok(ExitCode::SUCCESS)
}
