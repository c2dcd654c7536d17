//! `sluice analyze PATH...`: documents analysed on this machine. Files and folders (searched
//! for `.txt`, `.md`, `.docx` and `.pdf`) are read, cut into clauses and ruled; what the rules
//! flag is reviewed by a model through a gateway built in this process: the one `--config`
//! describes (its providers and keys), else a simulated reviewer on loopback, so that the
//! command runs offline. A file that cannot be read is named with its reason and the others
//! go on; the exit code says whether any was refused.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use sluice_analysis::{Progress, Report, Reviewer, Summary};
use sluice_config::gateway::{self, ProcessEnv};
use sluice_gateway::analyses::WalkReviewer;
use sluice_gateway::app::Reviews;
use sluice_gateway::walk::auth::Identity;
use sluice_gateway::{App, GatewayBuilder};
use sluice_sim::server::{SimServer, serve_on};
use sluice_sim::spec::UpstreamSpec;

/// `sluice analyze`'s arguments.
#[derive(clap::Args, Debug)]
pub struct AnalyzeArgs {
    /// Files or folders (searched for .txt, .md, .docx and .pdf).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// A gateway configuration: reviews go to its models (its `[analysis]` section applies).
    /// Without one, a simulated reviewer answers.
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// A rule file (TOML `[[rule]]` tables) instead of the configuration's or the shipped
    /// contract-risk rules.
    #[arg(long)]
    rules: Option<PathBuf>,
    /// The rules' findings only: no model review.
    #[arg(long)]
    no_review: bool,
    /// Where to write each report (NAME.json and NAME.md) and the summary; without it, the
    /// reports and the summary are printed as Markdown.
    #[arg(long, short)]
    out: Option<PathBuf>,
    /// Each document's deadline (default: the configuration's, else 10s).
    #[arg(long, value_parser = humantime::parse_duration)]
    deadline: Option<Duration>,
    /// Threads the rules run on, per document.
    #[arg(long)]
    threads: Option<u32>,
    /// Documents analysed at once.
    #[arg(long)]
    concurrency: Option<u32>,
}

/// A simulated reviewer's configuration: one model on the simulator at `addr`.
fn simulated(addr: std::net::SocketAddr) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[ledger]\nstore = \"off\"\n\
         [providers.simulated]\nkind = \"openai\"\nbase_url = \"http://{addr}/reviewer/v1\"\n\
         [models.reviewer]\ndeployments = [{{ provider = \"simulated\", model = \"gpt-4o-mini\" }}]\n"
    )
}

/// The files under `paths`, in order: files as given, folders searched.
fn files(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found = Vec::new();
            walk(p, &mut found).with_context(|| format!("reading {}", p.display()))?;
            if found.is_empty() {
                anyhow::bail!(
                    "no .txt, .md, .markdown, .docx or .pdf file under {}",
                    p.display()
                );
            }
            found.sort();
            out.extend(found);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            walk(&path, out)?;
        } else if path.extension().and_then(|e| e.to_str()).is_some_and(|e| {
            ["txt", "md", "markdown", "docx", "pdf"].contains(&e.to_ascii_lowercase().as_str())
        }) {
            out.push(path);
        }
    }
    Ok(())
}

/// Runs `sluice analyze`.
pub fn run(a: &AnalyzeArgs) -> anyhow::Result<ExitCode> {
    let runtime = sluice_cli::runtime(None)?;
    runtime.block_on(analyze(a))
}

async fn analyze(a: &AnalyzeArgs) -> anyhow::Result<ExitCode> {
    let paths = files(&a.paths)?;
    let (text, base, reviews) = match &a.config {
        Some(path) => (
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
            crate::ledger_cmd::config_dir(path),
            Reviews::ByModel,
        ),
        None => {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let addr = listener.local_addr()?;
            let reviewer = UpstreamSpec {
                ttft_median: Duration::from_millis(300),
                ..UpstreamSpec::default()
            };
            let sim = SimServer::new(&[("reviewer".to_string(), reviewer)], 1);
            tokio::spawn(serve_on(sim, listener, std::future::pending()));
            if !a.no_review {
                eprintln!("reviews: a simulated reviewer (give --config for real models)");
            }
            (
                simulated(addr),
                std::env::current_dir()?,
                Reviews::Simulated,
            )
        }
    };
    let checked = gateway::check(&text, &ProcessEnv, &[], gateway::Secrets::Required);
    let mut cfg = checked
        .config
        .ok_or_else(|| anyhow::anyhow!("the configuration: {}", checked.errors))?;
    let an = &mut cfg.analysis;
    an.enabled = true;
    if let Some(r) = &a.rules {
        an.rules = Some(std::path::absolute(r)?);
    }
    an.review &= !a.no_review;
    if let Some(d) = a.deadline {
        an.deadline = d;
    }
    if let Some(t) = a.threads {
        an.threads = t.max(1);
    }
    if let Some(c) = a.concurrency {
        an.concurrency = c.max(1);
    }
    let app = App::new(GatewayBuilder::from_config(&cfg, &ProcessEnv)?.build()?)
        .analysis_from_config(&cfg, &base, reviews)?;
    let analyses = app
        .analyses
        .clone()
        .ok_or_else(|| anyhow::anyhow!("analysis is off"))?;
    let mut docs = Vec::new();
    let mut unreadable = Vec::new();
    for path in paths {
        let name = path.display().to_string();
        match std::fs::read(&path) {
            Ok(bytes) => docs.push((name, bytes)),
            Err(e) => unreadable.push(sluice_analysis::Refused {
                error: format!("{name}: {e}"),
                document: name,
            }),
        }
    }
    let lane = if docs.len() > 1 {
        analyses.settings().batch_lane
    } else {
        0
    };
    let reviewer: Arc<dyn Reviewer> =
        Arc::new(WalkReviewer::new(app.walker(), Identity::default(), lane));
    let progress = Arc::new(Progress::default());
    let ticker = {
        let progress = progress.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(2)).await;
                eprintln!("{}", progress.line());
            }
        })
    };
    let concurrency = analyses.settings().concurrency;
    let (reports, mut summary) = analyses
        .analyzer()
        .analyze_batch(docs, &reviewer, concurrency, &progress)
        .await;
    ticker.abort();
    summary.refused.extend(unreadable);
    write(a.out.as_deref(), &reports, &summary)?;
    Ok(if summary.refused.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The reports and the summary, into `out` or on standard output.
fn write(out: Option<&Path>, reports: &[Report], summary: &Summary) -> anyhow::Result<()> {
    let Some(dir) = out else {
        for r in reports {
            println!("{}\n", r.markdown());
        }
        println!("{}", summary.markdown());
        return Ok(());
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for r in reports {
        let stem = Path::new(&r.document)
            .file_name()
            .map_or_else(|| "document".into(), |n| n.to_string_lossy().into_owned());
        std::fs::write(
            dir.join(format!("{stem}.json")),
            serde_json::to_vec_pretty(r)?,
        )?;
        std::fs::write(dir.join(format!("{stem}.md")), r.markdown())?;
    }
    std::fs::write(
        dir.join("summary.json"),
        serde_json::to_vec_pretty(summary)?,
    )?;
    std::fs::write(dir.join("summary.md"), summary.markdown())?;
    eprintln!("{}", summary.markdown());
    eprintln!("reports written to {}", dir.display());
    Ok(())
}
