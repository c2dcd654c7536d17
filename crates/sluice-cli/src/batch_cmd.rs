//! `sluice batch`: submits a file of requests to a running gateway as a batch job, and
//! follows it: its status in a line, a progress bar a person can leave and come back to (the
//! job runs in the gateway, not here), its output and error files, its cancellation.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

/// Where the gateway is and who asks.
#[derive(clap::Args)]
pub struct Gateway {
    /// The gateway's base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080", global = true)]
    pub url: String,
    /// The API key the job runs as (else SLUICE_API_KEY).
    #[arg(long, env = "SLUICE_API_KEY", global = true, hide_env_values = true)]
    pub key: Option<String>,
    /// The tenant, for a gateway that requires no keys (`x-sluice-tenant`).
    #[arg(long, global = true)]
    pub tenant: Option<String>,
}

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

/// A gateway's batch API, as this command (and `sluice bench batch`) calls it.
pub(crate) struct Client {
    http: reqwest::Client,
    base: String,
    key: Option<String>,
    tenant: Option<String>,
}

impl Client {
    /// The gateway at `url`, asked with no key and no tenant.
    pub(crate) fn at(url: &str) -> Self {
        Self::new(&Gateway {
            url: url.to_string(),
            key: None,
            tenant: None,
        })
    }

    fn new(g: &Gateway) -> Self {
        Self {
            http: reqwest::Client::new(),
            base: g.url.trim_end_matches('/').to_string(),
            key: g.key.clone(),
            tenant: g.tenant.clone(),
        }
    }

    fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut r = self.http.request(method, format!("{}{path}", self.base));
        if let Some(k) = &self.key {
            r = r.bearer_auth(k);
        }
        if let Some(t) = &self.tenant {
            r = r.header("x-sluice-tenant", t);
        }
        r
    }

    /// Sends `r`; the JSON answer, or the gateway's error message.
    async fn json(&self, r: reqwest::RequestBuilder) -> anyhow::Result<Value> {
        let resp = r
            .send()
            .await
            .with_context(|| format!("asking {}", self.base))?;
        let status = resp.status();
        let body: Value = resp.json().await.context("reading the answer")?;
        if !status.is_success() {
            let message = body["error"]["message"].as_str().unwrap_or("no message");
            anyhow::bail!("{status}: {message}");
        }
        Ok(body)
    }

    async fn batch(&self, id: &str) -> anyhow::Result<Value> {
        self.json(self.req(reqwest::Method::GET, &format!("/v1/batches/{id}")))
            .await
    }

    async fn submit(&self, file: &PathBuf, endpoint: &str) -> anyhow::Result<Value> {
        let content = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        let name = file
            .file_name()
            .map_or("batch.jsonl".into(), |n| n.to_string_lossy().into_owned());
        self.submit_content(&name, &content, endpoint).await
    }

    /// Uploads `content` as file `name` and submits it as a job calling `endpoint`: the
    /// job's object.
    pub(crate) async fn submit_content(
        &self,
        name: &str,
        content: &[u8],
        endpoint: &str,
    ) -> anyhow::Result<Value> {
        let boundary = format!("sluice-{}", std::process::id());
        let mut body = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\
             Content-Type: application/jsonl\r\n\r\n"
        )
        .into_bytes();
        body.extend_from_slice(content);
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        let uploaded = self
            .json(
                self.req(reqwest::Method::POST, "/v1/files")
                    .header(
                        "content-type",
                        format!("multipart/form-data; boundary={boundary}"),
                    )
                    .body(body),
            )
            .await
            .context("uploading the file")?;
        self.json(self.req(reqwest::Method::POST, "/v1/batches").json(&json!({
            "input_file_id": uploaded["id"],
            "endpoint": endpoint,
            "completion_window": "24h",
        })))
        .await
        .context("submitting the job")
    }

    async fn text(&self, path: &str) -> anyhow::Result<String> {
        let resp = self.req(reqwest::Method::GET, path).send().await?;
        let status = resp.status();
        let text = resp.text().await?;
        if !status.is_success() {
            anyhow::bail!("{status}: {text}");
        }
        Ok(text)
    }
}

/// The job in one line: `batch_... in_progress: queued 47/200, 3 running, 150 done, 0
/// failed; 120 ahead; 4.1 a second; about 41 s left`.
pub fn line(v: &Value) -> String {
    let p = &v["sluice"];
    let n = |k: &str| p[k].as_u64().unwrap_or(0);
    let mut s = format!(
        "{} {}: {}, {} running, {} done, {} failed",
        v["id"].as_str().unwrap_or("?"),
        v["status"].as_str().unwrap_or("?"),
        p["line"].as_str().unwrap_or("?"),
        n("running"),
        n("done"),
        n("failed") + n("cancelled"),
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
