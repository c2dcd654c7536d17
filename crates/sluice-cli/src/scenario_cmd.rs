//! `sluice scenario list` and `sluice scenario run NAME|FILE`: rehearse a scenario in virtual
//! time against the real gateway stack.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use sluice_gateway::GatewayBuilder;
use sluice_sim::harness;
use sluice_sim::load::LaneSummary;
use sluice_sim::load::record::table;
use sluice_sim::scenario::{BUILTIN, Scenario};
use sluice_sim::variants;

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

/// Runs a scenario in virtual time through every variant and prints what the clients saw,
/// one column per variant and lane.
pub fn run(name_or_path: &str, seed: Option<u64>, json: Option<&Path>) -> anyhow::Result<ExitCode> {
    let mut s = load(name_or_path)?;
    if let Some(seed) = seed {
        s.meta.seed = seed;
    }
    anyhow::ensure!(
        s.gateway.semantic.is_none(),
        "`{}` runs the semantic cache, whose questions the simulator embeds over HTTP: run it with `sluice demo --scenario {name_or_path}`",
        s.meta.name
    );
    let started = tokio::time::Instant::now();
    let mut reports = Vec::new();
    for v in variants::all() {
        reports.push((v, harness::run_clients(&s, v.builder(), v.client_retries)?));
    }
    let real = started.elapsed();
    println!(
        "{}: {} (seed {}, {:.0} s of traffic replayed {} times in {:.1} s)\n",
        s.meta.name,
        s.meta.description,
        s.meta.seed,
        s.meta.duration.as_secs_f64(),
        reports.len(),
        real.as_secs_f64()
    );
    for (v, _) in &reports {
        println!("  {:9} {}", v.name, v.about);
    }
    println!();
    let lanes: Vec<String> = reports
        .first()
        .map(|(_, r)| r.summary.lanes.keys().cloned().collect())
        .unwrap_or_default();
    for lane in &lanes {
        let columns: Vec<(&str, &LaneSummary)> = reports
            .iter()
            .filter_map(|(v, r)| r.summary.lanes.get(lane).map(|l| (v.name, l)))
            .collect();
        println!("{lane}");
        print!("{}", table(&columns));
        println!();
    }
    for (v, r) in &reports {
        println!(
            "{}: {} extra upstream requests (hedges and retries)",
            v.name, r.extra_requests
        );
        for (name, u) in &r.upstreams {
            println!(
                "  upstream {name}: {} requests, {} answered 429, {} 500s, {} 503s, {} resets, {} stalls",
                u.requests, u.rate_limited, u.error_500, u.error_503, u.resets, u.stalls
            );
        }
    }
    if !s.routers.is_empty() {
        choosing_table(&s)?;
    }
    if let Some(path) = json {
        let all: Vec<(&str, &harness::Report)> = reports.iter().map(|(v, r)| (v.name, r)).collect();
        std::fs::write(path, serde_json::to_string_pretty(&all)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// For a scenario with an automatic router: its traffic replayed (in virtual time) through the
/// router and sent to each candidate alone, with the bill and the share of answers the
/// simulated judge found good, side by side.
pub fn choosing_table(s: &Scenario) -> anyhow::Result<()> {
    let Some((router, r)) = s.routers.first() else {
        return Ok(());
    };
    println!(
        "The bill with and without the router `{router}` (the same traffic, in virtual time):"
    );
    println!(
        "  {:24} {:>9} {:>12} {:>14} {:>13}",
        "sent to", "requests", "bill (USD)", "USD/request", "good answers"
    );
    let mut policies = vec![(format!("{router} (the router)"), router.clone())];
    policies.extend(
        r.candidates
            .iter()
            .map(|c| (format!("{c} always"), c.clone())),
    );
    for (label, model) in policies {
        let mut run = s.clone();
        for t in &mut run.traffic {
            t.model = model.clone();
        }
        let report = harness::run_with(&run, GatewayBuilder::new())?;
        let n = report.summary.all.count.max(1);
        let good = report.verdicts.iter().filter(|v| v.good).count();
        let judged = report.verdicts.len().max(1);
        let usd = report.cost_micros as f64 / 1e6;
        println!(
            "  {label:24} {:>9} {usd:>12.4} {:>14.7} {:>12.1}%",
            report.summary.all.count,
            usd / n as f64,
            100.0 * good as f64 / judged as f64
        );
    }
    println!();
    Ok(())
}
