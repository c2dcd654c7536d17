//! `sluice config check FILE` and `sluice keys new`: configuration files and the entries they hold.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use sluice_config::gateway::{self, ProcessEnv, Secrets};

/// Checks `file`; prints every error and warning, then a one-line summary. Unset secret
/// variables are warnings unless `strict`.
pub fn check(file: &Path, strict: bool) -> anyhow::Result<ExitCode> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let secrets = if strict {
        Secrets::Required
    } else {
        Secrets::Warn
    };
    let checked = gateway::check(&text, &ProcessEnv, &[], secrets);
    if !checked.warnings.is_empty() {
        println!("{}: {}", file.display(), warnings(&checked.warnings));
    }
    match checked.config {
        Some(cfg) => {
            println!(
                "{}: ok ({} providers, {} model groups, listening on {})",
                file.display(),
                cfg.providers.len(),
                cfg.models.len(),
                cfg.listen
            );
            Ok(ExitCode::SUCCESS)
        }
        None => {
            println!("{}: {}", file.display(), checked.errors);
            Ok(ExitCode::FAILURE)
        }
    }
}

/// Warnings, written like errors but named as what they are.
pub fn warnings(w: &sluice_config::Diagnostics) -> String {
    let mut out = if w.len() == 1 {
        "1 warning:".to_string()
    } else {
        format!("{} warnings:", w.len())
    };
    for d in w.iter() {
        out.push_str("\n  ");
        out.push_str(&d.to_string());
    }
    out
}

/// Prints a fresh API key and the configuration entry that holds its hash.
pub fn new_key(name: &str, tenant: &str, lane: Option<&str>, models: &[String]) {
    let secret = sluice_economy::keys::generate();
    println!("key (shown once; sluice keeps only its hash): {secret}");
    println!();
    println!("[keys.{name}]");
    println!("tenant = {}", toml_string(tenant));
    println!("sha256 = \"{}\"", sluice_economy::keys::hash_hex(&secret));
    if let Some(lane) = lane {
        println!("lane = {}", toml_string(lane));
    }
    let models: Vec<String> = models
        .iter()
        .map(|m| m.trim())
        .filter(|m| !m.is_empty())
        .map(toml_string)
        .collect();
    if !models.is_empty() {
        println!("models = [{}]", models.join(", "));
    }
}

/// `s` as a TOML string, quotes and backslashes escaped.
fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}
