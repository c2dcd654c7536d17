//! `sluice config check FILE`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use sluice_config::gateway::{self, ProcessEnv};

/// Checks `file`; prints every error, or a one-line summary.
pub fn check(file: &Path) -> anyhow::Result<ExitCode> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    match gateway::load(&text, &ProcessEnv, &[]) {
        Ok(cfg) => {
            println!(
                "{}: ok ({} providers, {} model groups, listening on {})",
                file.display(),
                cfg.providers.len(),
                cfg.models.len(),
                cfg.listen
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(diags) => {
            println!("{}: {diags}", file.display());
            Ok(ExitCode::FAILURE)
        }
    }
}
