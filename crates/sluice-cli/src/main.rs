//! `sluice`: the LLM gateway's command line: serve, check a config, simulate upstreams,
//! generate load, rehearse scenarios, and the demo.

mod analyze_cmd;
mod batch_cmd;
mod bench;
mod config_cmd;
mod demo;
mod diagnose_cmd;
mod ledger_cmd;
mod scenario_cmd;
mod serve;
mod sim_cmd;
mod slo_cmd;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "sluice",
    version,
    about = "An LLM gateway that governs the tail and the token bill"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway.
    Serve {
        /// The configuration file (see sluice.example.toml).
        #[arg(long, short, default_value = "sluice.toml")]
        config: PathBuf,
        /// Listen here instead of `[server] listen` (several instances of one configuration
        /// on one host).
        #[arg(long, env = "SLUICE_LISTEN")]
        listen: Option<std::net::SocketAddr>,
    },
    /// Rehearse the document-analysis platform on this machine: simulated upstreams, the
    /// gateway and the load, all on loopback, no keys needed.
    Demo(Box<demo::DemoArgs>),
    /// Serve simulated LLM upstreams over HTTP.
    Sim {
        /// The simulator configuration (see sim.example.toml).
        #[arg(long, short, default_value = "sim.toml")]
        config: PathBuf,
    },
    /// Generate open-loop load against a URL, or run one of sluice's benchmarks (the
    /// `sluice-bench` binary beside this one, given the same arguments: `sluice bench --help`).
    #[command(disable_help_flag = true)]
    Bench {
        /// The benchmark and its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Run scenarios in virtual time against the real gateway stack.
    Scenario {
        #[command(subcommand)]
        command: ScenarioCommand,
    },
    /// The model catalog: each model's context window, longest answer, capabilities and
    /// prices, as shipped or as a configuration overrides them.
    Models {
        /// A configuration whose `[catalog]` and `[prices]` entries apply.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Work with configuration files.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Usage from the ledger: tokens, cost, what caching saved and what hedges and retries
    /// cost, by tenant and model (or other columns), as a table, JSON or CSV.
    Usage(Box<ledger_cmd::UsageArgs>),
    /// Work with API keys.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// What changed between the last window of calls and the baseline before it, from a
    /// running gateway's `/admin/diagnose`, in plain words.
    Diagnose(Box<diagnose_cmd::DiagnoseArgs>),
    /// Batch jobs on a running gateway: submit a file, follow it, read its results, cancel.
    Batch {
        #[command(flatten)]
        gateway: sluice_cli::batch_client::Gateway,
        #[command(subcommand)]
        command: batch_cmd::BatchCommand,
    },
    /// Analyse documents (text, Markdown, DOCX, PDF): clauses ruled, what the rules flag
    /// reviewed by a model, a report per document and a summary.
    Analyze(Box<analyze_cmd::AnalyzeArgs>),
    /// Service-level objectives.
    Slo {
        #[command(subcommand)]
        command: SloCommand,
    },
}

#[derive(Subcommand)]
enum SloCommand {
    /// Write the Prometheus recording and alerting rules for the configuration's `[slo.*]`:
    /// multi-window, multi-burn-rate alerts per SLO and culprit.
    Rules {
        /// The configuration file.
        #[arg(long, short, default_value = "sluice.toml")]
        config: PathBuf,
        /// Where to write them (standard output when absent).
        #[arg(long, short)]
        out: Option<PathBuf>,
        /// Every window this many times shorter (1 h reads 6 min at 10), for rehearsing an
        /// incident against a real Prometheus; the recorded series keep their names.
        #[arg(long, default_value_t = 1)]
        speed: u32,
    },
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Make a key: prints it (the only time it is shown) and the `[keys]` entry holding its
    /// hash, to paste into the configuration.
    New {
        /// The key's name.
        #[arg(long)]
        name: String,
        /// The tenant it belongs to.
        #[arg(long)]
        tenant: String,
        /// The lane of its requests that name none.
        #[arg(long)]
        lane: Option<String>,
        /// The model groups it may use, comma-separated (default: all).
        #[arg(long, value_delimiter = ',')]
        models: Vec<String>,
    },
}

#[derive(Subcommand)]
enum ScenarioCommand {
    /// List the built-in scenarios.
    List,
    /// Run a scenario (a built-in name or a file) and print what the clients saw.
    Run {
        /// Built-in name or path.
        scenario: String,
        /// Override the scenario's seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Write the full report as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Check a file and print every error and warning with its key path and line.
    Check {
        /// The file to check.
        file: PathBuf,
        /// Treat unset secret variables (provider keys, the admin token, the ledger's URL) as
        /// errors, as `serve` does; by default they are warnings.
        #[arg(long)]
        strict: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let result = match cli.command {
        Command::Serve { config, listen } => serve::run(&config, listen),
        Command::Demo(a) => demo::run(&a),
        Command::Usage(a) => ledger_cmd::usage(&a),
        Command::Models { config } => config_cmd::models(config.as_deref()),
        Command::Sim { config } => sim_cmd::run(&config),
        Command::Bench { args } => bench::run(&args),
        Command::Scenario {
            command: ScenarioCommand::List,
        } => scenario_cmd::list(),
        Command::Scenario {
            command:
                ScenarioCommand::Run {
                    scenario,
                    seed,
                    json,
                },
        } => scenario_cmd::run(&scenario, seed, json.as_deref()),
        Command::Config {
            command: ConfigCommand::Check { file, strict },
        } => config_cmd::check(&file, strict),
        Command::Diagnose(a) => diagnose_cmd::run(&a),
        Command::Batch { gateway, command } => batch_cmd::run(&gateway, &command),
        Command::Analyze(a) => analyze_cmd::run(&a),
        Command::Slo {
            command: SloCommand::Rules { config, out, speed },
        } => slo_cmd::rules(&config, out.as_deref(), speed),
        Command::Keys {
            command:
                KeysCommand::New {
                    name,
                    tenant,
                    lane,
                    models,
                },
        } => {
            config_cmd::new_key(&name, &tenant, lane.as_deref(), &models);
            Ok(ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", chain(&e));
            ExitCode::FAILURE
        }
    }
}

/// An error and its causes, each said once: a cause whose words its error already says
/// (an error that shows its source in its own message) is not said again.
fn chain(e: &anyhow::Error) -> String {
    let mut out = e.to_string();
    for cause in e.chain().skip(1) {
        let words = cause.to_string();
        if !out.contains(&words) {
            out.push_str(": ");
            out.push_str(&words);
        }
    }
    out
}

/// Logs go to standard error, filtered by `SLUICE_LOG` (`EnvFilter` syntax, e.g. `debug` or
/// `warn,sluice=info`, the default), in colour only when standard error is a terminal and
/// `NO_COLOR` is not set.
fn init_logging() {
    use std::io::IsTerminal;
    let (filter, bad) = match std::env::var("SLUICE_LOG") {
        Err(_) => (tracing_subscriber::EnvFilter::new(DEFAULT_LOG), None),
        Ok(v) => match tracing_subscriber::EnvFilter::try_new(&v) {
            Ok(f) => (f, None),
            Err(e) => (
                tracing_subscriber::EnvFilter::new(DEFAULT_LOG),
                Some((v, e)),
            ),
        },
    };
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr)
        .init();
    if let Some((value, e)) = bad {
        tracing::warn!("SLUICE_LOG={value:?} is not a log filter ({e}); using {DEFAULT_LOG:?}");
    }
}

/// The log filter without `SLUICE_LOG`.
const DEFAULT_LOG: &str = "warn,sluice=info";
