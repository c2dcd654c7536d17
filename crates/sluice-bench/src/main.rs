//! `sluice-bench`: sluice's benchmarks and its open-loop load generator, in a binary of their
//! own so that the shipped `sluice` holds the product only. `sluice bench ...` runs this
//! binary (found beside `sluice`) with the same arguments.

mod analysis;
mod batch;
mod child;
mod forward;
mod ledger;
mod load;
mod loadgen;
mod overhead;
mod semantic;
mod soak;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Generate open-loop load against a URL, or run one of sluice's benchmarks.
#[derive(Parser)]
#[command(name = "sluice bench", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    which: Option<Which>,
    #[command(flatten)]
    load: Box<load::LoadArgs>,
}

#[derive(Subcommand)]
enum Which {
    /// The gateway's added latency in front of a ~1 ms upstream, and its peak memory.
    Overhead(overhead::OverheadArgs),
    /// The load generator's own capacity against the simulator.
    Loadgen(loadgen::LoadgenArgs),
    /// A batch job beside interactive traffic on a rate-limited provider (and a kill -9).
    Batch(batch::BatchArgs),
    /// How many calls a second the embedded usage ledger settles.
    Ledger(ledger::LedgerArgs),
    /// The semantic cache: precision and hit rate on labelled question pairs, lookup cost.
    Semantic(semantic::SemanticArgs),
    /// Document analysis: the rule engine at 200 and 2,000 rules, hedging local work, the
    /// per-document tail end to end in virtual time, a batch beside interactive documents.
    Analysis(analysis::AnalysisArgs),
    /// A long run at a steady rate with every feature on: memory, descriptors and tasks
    /// over time, flat within stated bounds, and given back when the load stops.
    Soak(soak::SoakArgs),
    /// A bare HTTP forwarder, the floor `bench overhead --floor` measures sluice against.
    #[command(hide = true)]
    Forward(forward::ForwardArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let result = match cli.which {
        Some(Which::Overhead(a)) => overhead::run(&a),
        Some(Which::Loadgen(a)) => loadgen::run(&a),
        Some(Which::Batch(a)) => batch::run(&a),
        Some(Which::Ledger(a)) => ledger::run(&a),
        Some(Which::Semantic(a)) => semantic::run(&a),
        Some(Which::Analysis(a)) => analysis::run(&a),
        Some(Which::Soak(a)) => soak::run(&a),
        Some(Which::Forward(a)) => forward::run(&a),
        None => load::load(&cli.load),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs go to standard error, filtered by `SLUICE_LOG` (default `warn,sluice_bench=info`).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,sluice_bench=info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
