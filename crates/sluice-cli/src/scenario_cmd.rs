//! `sluice scenario list` and `sluice scenario run NAME|FILE`: rehearse a scenario in virtual
//! time against the real gateway stack.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use sluice_sim::harness;
use sluice_sim::load::record::table;
use sluice_sim::scenario::{BUILTIN, Scenario};

/// Prints the built-in scenarios.
pub fn list() -> anyhow::Result<ExitCode> {
    for (name, _) in BUILTIN {
        match Scenario::builtin(name) {
            Some(Ok(s)) => println!("{name:14} {}", s.meta.description),
            _ => println!("{name:14} (does not parse)"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Loads a built-in scenario by name, or a scenario file by path.
pub fn load(name_or_path: &str) -> anyhow::Result<Scenario> {
    if let Some(s) = Scenario::builtin(name_or_path) {
        return s.map_err(|d| anyhow::anyhow!("built-in scenario {name_or_path}: {d}"));
    }
    let text = std::fs::read_to_string(name_or_path).with_context(|| {
        format!("`{name_or_path}` is neither a built-in scenario nor a readable file")
    })?;
    Scenario::parse(&text).map_err(|d| anyhow::anyhow!("{name_or_path}: {d}"))
}

/// Runs a scenario in virtual time and prints what the clients saw.
pub fn run(name_or_path: &str, seed: Option<u64>, json: Option<&Path>) -> anyhow::Result<ExitCode> {
    let mut s = load(name_or_path)?;
    if let Some(seed) = seed {
        s.meta.seed = seed;
    }
    let started = tokio::time::Instant::now();
    let report = harness::run(&s)?;
    let real = started.elapsed();
    println!(
        "{}: {} (seed {}, {:.0} s of traffic replayed in {:.1} s)\n",
        s.meta.name,
        s.meta.description,
        s.meta.seed,
        s.meta.duration.as_secs_f64(),
        real.as_secs_f64()
    );
    let mut columns: Vec<(&str, &sluice_sim::load::LaneSummary)> =
        vec![("all", &report.summary.all)];
    for (lane, summary) in &report.summary.lanes {
        columns.push((lane.as_str(), summary));
    }
    print!("{}", table(&columns));
    println!();
    for (name, u) in &report.upstreams {
        println!(
            "upstream {name}: {} requests, {} answered 429, {} 500s, {} 503s, {} resets, {} stalls",
            u.requests, u.rate_limited, u.error_500, u.error_503, u.resets, u.stalls
        );
    }
    if let Some(path) = json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
