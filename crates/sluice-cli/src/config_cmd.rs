//! `sluice config check FILE` and `sluice keys new`: configuration files and the entries they hold.

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

/// Prints a fresh API key and the configuration entry that holds its hash.
pub fn new_key(name: &str, tenant: &str, lane: Option<&str>) {
    let secret = sluice_economy::keys::generate();
    println!("key (shown once; sluice keeps only its hash): {secret}");
    println!();
    println!("[keys.{name}]");
    println!("tenant = \"{tenant}\"");
    println!("sha256 = \"{}\"", sluice_economy::keys::hash_hex(&secret));
    if let Some(lane) = lane {
        println!("lane = \"{lane}\"");
    }
}
