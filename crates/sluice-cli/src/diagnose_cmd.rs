//! `sluice diagnose`: asks a running gateway's `/admin/diagnose` what changed between the last
//! window of calls and the baseline before it, and prints the answer in plain words.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use serde_json::Value;

/// `sluice diagnose`'s arguments.
#[derive(clap::Args)]
pub struct DiagnoseArgs {
    /// The gateway's base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// The recent window.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub window: Duration,
    /// The baseline: this long before the window.
    #[arg(long, default_value = "30m", value_parser = humantime::parse_duration)]
    pub baseline: Duration,
    /// The admin token, when the gateway has one (else SLUICE_ADMIN_TOKEN).
    #[arg(long, env = "SLUICE_ADMIN_TOKEN")]
    pub admin_token: Option<String>,
    /// Print the whole answer as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `sluice diagnose`.
pub fn run(a: &DiagnoseArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let v: Value = rt.block_on(async {
        let url = format!(
            "{}/admin/diagnose?window={}&baseline={}",
            a.url.trim_end_matches('/'),
            a.window.as_secs().max(1),
            a.baseline.as_secs().max(1)
        );
        let mut req = reqwest::Client::new().get(&url);
        if let Some(t) = &a.admin_token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.with_context(|| format!("asking {url}"))?;
        let status = resp.status();
        let body: Value = resp.json().await.context("reading the answer")?;
        if !status.is_success() {
            anyhow::bail!("{url} answered {status}: {body}");
        }
        Ok::<_, anyhow::Error>(body)
    })?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    let d = &v["diagnosis"];
    println!("{}", d["summary"].as_str().unwrap_or(""));
    let calls = |w: &str| d[w]["calls"].as_u64().unwrap_or(0);
    println!(
        "\n{} calls in the last {} s, {} in the {} s before",
        calls("recent"),
        v["window_seconds"],
        calls("baseline"),
        v["baseline_seconds"]
    );
    for c in d["changes"].as_array().into_iter().flatten() {
        let (b, r) = (
            c["before"].as_f64().unwrap_or(0.0),
            c["after"].as_f64().unwrap_or(0.0),
        );
        let f = |x: f64| match c["unit"].as_str() {
            Some("%") => format!("{:.1}%", x * 100.0),
            Some("calls") => format!("{x:.0}"),
            _ => format!("{x:.2} s"),
        };
        println!(
            "  {:<40} {:>10} -> {:>10}",
            c["what"].as_str().unwrap_or(""),
            f(b),
            f(r)
        );
    }
    Ok(ExitCode::SUCCESS)
}
