//! `sluice batch`: submits a file of requests to a running gateway as a batch job, and
//! follows it: its status in a line, a progress bar a person can leave and come back to (the
//! job runs in the gateway, not here), its output and error files, its cancellation.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;
use sluice_cli::batch_client::{Client, Gateway};

/// Where the gateway is and who asks.
/// `sluice batch`'s subcommands.
#[derive(clap::Subcommand)]
pub enum BatchCommand {
    /// Uploads FILE (JSON lines of requests) and submits it as a job; prints the job's id.
    Submit {
        /// The file.
        file: PathBuf,
        /// The endpoint every line calls.
        #[arg(long, default_value = "/v1/chat/completions")]
        endpoint: String,
        /// Follow the job with a progress bar once submitted.
        #[arg(long)]
        watch: bool,
    },
    /// One line: the job's status and progress.
    Status {
        /// The job's id.
        id: String,
    },
    /// A progress bar until the job ends (leaving it leaves the job running).
    Watch {
        /// The job's id.
        id: String,
    },
    /// Writes the job's output file (or its error file) to standard output or OUT.
    Results {
        /// The job's id.
        id: String,
        /// The error file instead.
        #[arg(long)]
        errors: bool,
        /// Where to write it.
        #[arg(long, short)]
        out: Option<PathBuf>,
    },
    /// Cancels the job: queued items end at once, running ones finish.
    Cancel {
        /// The job's id.
        id: String,
    },
}

/// The job in one line: `batch_... in_progress: queued 47/200, running 3, done 150/200; 120
/// ahead; 4.1 a second; about 41 s left`.
pub fn line(v: &Value) -> String {
    let p = &v["sluice"];
    let n = |k: &str| p[k].as_u64().unwrap_or(0);
    let mut s = format!(
        "{} {}: {}",
        v["id"].as_str().unwrap_or("?"),
        v["status"].as_str().unwrap_or("?"),
        p["line"].as_str().unwrap_or("?"),
    );
    if n("ahead") > 0 {
        s.push_str(&format!("; {} ahead", n("ahead")));
    }
    if let Some(rate) = p["per_second"].as_f64().filter(|r| *r > 0.0) {
        s.push_str(&format!("; {rate:.1} a second"));
    }
    if let Some(eta) = p["eta_seconds"].as_f64() {
        s.push_str(&format!("; about {eta:.0} s left"));
    }
    s
}

fn ended(v: &Value) -> bool {
    matches!(
        v["status"].as_str(),
        Some("completed" | "cancelled" | "expired" | "failed")
    )
}

async fn watch(c: &Client, id: &str) -> anyhow::Result<Value> {
    let mut v = c.batch(id).await?;
    let total = v["request_counts"]["total"].as_u64().unwrap_or(0);
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}")
            .context("the progress bar's template")?,
    );
    loop {
        let p = &v["sluice"];
        let ended_items = ["done", "failed", "cancelled"]
            .iter()
            .map(|k| p[k].as_u64().unwrap_or(0))
            .sum();
        bar.set_position(ended_items);
        bar.set_message(line(&v));
        if ended(&v) {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        v = c.batch(id).await?;
    }
    bar.finish();
    Ok(v)
}

/// Runs `sluice batch`.
pub fn run(g: &Gateway, command: &BatchCommand) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let c = Client::new(g);
    rt.block_on(async {
        match command {
            BatchCommand::Submit {
                file,
                endpoint,
                watch: follow,
            } => {
                let v = c.submit(file, endpoint).await?;
                let id = v["id"].as_str().unwrap_or_default().to_string();
                println!("{id}");
                if *follow {
                    let v = watch(&c, &id).await?;
                    println!("{}", line(&v));
                }
            }
            BatchCommand::Status { id } => println!("{}", line(&c.batch(id).await?)),
            BatchCommand::Watch { id } => {
                let v = watch(&c, id).await?;
                println!("{}", line(&v));
            }
            BatchCommand::Results { id, errors, out } => {
                let v = c.batch(id).await?;
                let which = if *errors {
                    "error_file_id"
                } else {
                    "output_file_id"
                };
                let Some(file) = v[which].as_str() else {
                    anyhow::bail!(
                        "{id} has no {} yet (status {})",
                        if *errors { "error file" } else { "output file" },
                        v["status"]
                    );
                };
                let text = c.text(&format!("/v1/files/{file}/content")).await?;
                match out {
                    Some(path) => std::fs::write(path, text)
                        .with_context(|| format!("writing {}", path.display()))?,
                    None => print!("{text}"),
                }
            }
            BatchCommand::Cancel { id } => {
                let v = c
                    .json(c.req(reqwest::Method::POST, &format!("/v1/batches/{id}/cancel")))
                    .await?;
                println!("{}", line(&v));
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}
