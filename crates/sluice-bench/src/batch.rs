//! `sluice bench batch`: a batch job of long documents sharing a system prompt, against a
//! simulated provider with a rate limit, while interactive traffic runs: how long the job
//! takes against the least time the limit allows for the work interactive traffic leaves,
//! interactive P99 against its P99 with no job, the provider's 429s, the job's cached share,
//! and that no item was lost or done twice; then the same with sluice killed (SIGKILL) in
//! the middle and started again.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use anyhow::Context;
use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::child::{Child, free_port};

/// `sluice bench batch`'s arguments.
#[derive(clap::Args)]
pub struct BatchArgs {
    /// Documents in the job.
    #[arg(long, default_value_t = 200)]
    pub documents: usize,
    /// The provider's limit, requests a minute.
    #[arg(long, default_value_t = 600)]
    pub rpm: u32,
    /// Interactive requests a second, all along.
    #[arg(long, default_value_t = 2.0)]
    pub interactive: f64,
    /// How long interactive traffic runs alone first, for its unloaded P99.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub baseline: Duration,
    /// Skip the run with a kill in the middle.
    #[arg(long)]
    pub no_kill: bool,
}

/// What one run measured.
struct Run {
    seconds: f64,
    interactive_p50: f64,
    interactive_p99: f64,
    interactive_failed: usize,
    upstream_requests: u64,
    upstream_429: u64,
    cached_share: f64,
    lines: usize,
    unique: usize,
    billed_rows: i64,
    billed_items: i64,
}

fn sim_config(port: u16, rpm: u32) -> String {
    format!(
        "[sim]\nlisten = \"127.0.0.1:{port}\"\nseed = 11\n\
         [upstreams.up]\napi = \"openai\"\nttft_median = \"500ms\"\nttft_sigma = 0.3\n\
         output_tokens_median = 60\nper_token = \"5ms\"\nrpm = {rpm}\nrpm_burst = {}\n\
         prefill_per_token = \"50us\"\n",
        (rpm / 60).max(1)
    )
}

fn gateway_config(port: u16, sim: u16, rpm: u32, ledger: &std::path::Path) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:{port}\"\nshutdown_grace = \"1s\"\n\
         [ledger]\nstore = \"sqlite\"\npath = \"{}\"\n\
         [providers.up]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{sim}/up/v1\"\n\
         [prices.sim-model]\ninput = 1.0\noutput = 2.0\n\
         [models.chat]\ndeployments = [{{ provider = \"up\", model = \"sim-model\", rpm = {rpm} }}]\n",
        ledger.display()
    )
}

/// A system prompt of about 1,500 tokens, the same for every document.
fn system_prompt() -> String {
    let clause = "You review commercial contracts for a legal team. For each clause, say \
                  whether it limits liability, assigns indemnity, sets termination rights, \
                  or restricts data use, and quote the sentence that decides it. ";
    clause.repeat(40)
}

fn documents(n: usize) -> String {
    let system = system_prompt();
    (0..n)
        .map(|i| {
            let text = format!("Clause {i}: the supplier shall not be liable for indirect loss. ")
                .repeat(40);
            json!({"custom_id": format!("doc-{i}"), "method": "POST", "url": "/v1/chat/completions",
                "body": {"model": "chat", "max_tokens": 80, "messages": [
                    {"role": "system", "content": system},
                    {"role": "user", "content": text}]}})
            .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Interactive requests at `rate` a second until `stop`; their latencies (seconds) and
/// failures.
async fn interactive(url: String, rate: f64, stop: Arc<tokio::sync::Notify>) -> (Vec<f64>, usize) {
    let client = reqwest::Client::new();
    let seen = Arc::new(Mutex::new((Vec::new(), 0usize)));
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate.max(0.01)));
    let mut tasks = Vec::new();
    loop {
        tokio::select! {
            () = stop.notified() => break,
            _ = tick.tick() => {}
        }
        let (client, url, seen) = (client.clone(), url.clone(), seen.clone());
        tasks.push(tokio::spawn(async move {
            let started = Instant::now();
            let ok = client
                .post(format!("{url}/v1/chat/completions"))
                .json(&json!({"model": "chat", "max_tokens": 40,
                    "messages": [{"role": "user", "content": "Is clause 7 a liability cap?"}]}))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            let mut s = seen.lock();
            if ok {
                s.0.push(started.elapsed().as_secs_f64());
            } else {
                s.1 += 1;
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let s = seen.lock();
    (s.0.clone(), s.1)
}

fn quantile(xs: &[f64], q: f64) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(((v.len() as f64 * q).ceil() as usize).saturating_sub(1))
        .copied()
        .unwrap_or(0.0)
}

async fn upstream_stats(sim: &str) -> anyhow::Result<(u64, u64)> {
    let v: Value = reqwest::get(format!("{sim}/stats")).await?.json().await?;
    let u = &v["upstreams"]["up"];
    Ok((
        u["requests"].as_u64().unwrap_or(0),
        u["rate_limited"].as_u64().unwrap_or(0),
    ))
}

async fn submit(url: &str, content: &str) -> anyhow::Result<String> {
    let job = sluice_cli::batch_client::Client::at(url)
        .submit_content("docs.jsonl", content.as_bytes(), "/v1/chat/completions")
        .await?;
    job["id"]
        .as_str()
        .map(str::to_string)
        .with_context(|| format!("the job was refused: {job}"))
}

/// One run: interactive traffic with the job beside it (killing sluice once, at half the
/// items, when `kill`).
async fn run_once(a: &BatchArgs, kill: bool) -> anyhow::Result<(Run, Vec<f64>)> {
    let dir = tempfile::tempdir()?;
    let (sim_port, gw_port) = (free_port()?, free_port()?);
    let sim_url = format!("http://127.0.0.1:{sim_port}");
    let url = format!("http://127.0.0.1:{gw_port}");
    let _sim = Child::spawn(
        "sim",
        &sim_config(sim_port, a.rpm),
        &format!("{sim_url}/stats"),
        None,
    )
    .await?;
    let ledger = dir.path().join("ledger.db");
    let config = gateway_config(gw_port, sim_port, a.rpm, &ledger);
    let ready = format!("{url}/readyz");
    let mut gw = Some(Child::spawn("serve", &config, &ready, None).await?);

    // Interactive traffic alone first: its unloaded latency.
    let stop = Arc::new(tokio::sync::Notify::new());
    let alone = tokio::spawn(interactive(url.clone(), a.interactive, stop.clone()));
    tokio::time::sleep(a.baseline).await;
    stop.notify_one();
    let (unloaded, _) = alone.await?;

    let before = upstream_stats(&sim_url).await?;
    let stop = Arc::new(tokio::sync::Notify::new());
    let traffic = tokio::spawn(interactive(url.clone(), a.interactive, stop.clone()));
    let started = Instant::now();
    let id = submit(&url, &documents(a.documents)).await?;
    let mut killed = !kill;
    let job = loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let Ok(resp) = reqwest::get(format!("{url}/v1/batches/{id}")).await else {
            continue;
        };
        let Ok(job) = resp.json::<Value>().await else {
            continue;
        };
        let done = job["request_counts"]["completed"].as_u64().unwrap_or(0) as usize;
        if !killed && done >= a.documents / 2 {
            // SIGKILL (the child's drop), then a start on the same ledger.
            drop(gw.take());
            gw = Some(Child::spawn("serve", &config, &ready, None).await?);
            killed = true;
        }
        if matches!(
            job["status"].as_str(),
            Some("completed" | "cancelled" | "expired")
        ) {
            break job;
        }
    };
    let seconds = started.elapsed().as_secs_f64();
    stop.notify_one();
    let (latencies, failed) = traffic.await?;
    let after = upstream_stats(&sim_url).await?;
    let out = reqwest::get(format!(
        "{url}/v1/files/{}/content",
        job["output_file_id"].as_str().unwrap_or("none")
    ))
    .await?
    .text()
    .await?;
    let ids: Vec<String> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["custom_id"].as_str().map(str::to_string))
        .collect();
    let unique = ids.iter().collect::<std::collections::HashSet<_>>().len();
    drop(gw);
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", ledger.display())).await?;
    let (billed_rows, billed_items): (i64, i64) = sqlx::query_as(
        "SELECT COUNT(*), COUNT(DISTINCT batch_item) FROM sluice_ledger WHERE batch_item IS NOT NULL",
    )
    .fetch_one(&pool)
    .await?;
    Ok((
        Run {
            seconds,
            interactive_p50: quantile(&latencies, 0.5),
            interactive_p99: quantile(&latencies, 0.99),
            interactive_failed: failed,
            upstream_requests: after.0 - before.0,
            upstream_429: after.1 - before.1,
            cached_share: job["sluice"]["cached_share"].as_f64().unwrap_or(0.0),
            lines: ids.len(),
            unique,
            billed_rows,
            billed_items,
        },
        unloaded,
    ))
}

fn report(what: &str, a: &BatchArgs, r: &Run, unloaded: &[f64]) {
    // The provider's limit, less what interactive traffic takes of it, is all the job can
    // have: it cannot end sooner than its items at that rate.
    let left = a.rpm as f64 / 60.0 - a.interactive;
    let least = a.documents as f64 / left.max(0.01);
    println!("{what}");
    println!(
        "  job of {} documents: {:.1} s; the least the limit allows: {:.1} s ({} a minute less {} interactive a second); {:.2}x",
        a.documents,
        r.seconds,
        least,
        a.rpm,
        a.interactive,
        r.seconds / least
    );
    println!(
        "  interactive: P50 {:.2} s, P99 {:.2} s with the job; P50 {:.2} s, P99 {:.2} s alone; {} failed",
        r.interactive_p50,
        r.interactive_p99,
        quantile(unloaded, 0.5),
        quantile(unloaded, 0.99),
        r.interactive_failed
    );
    println!(
        "  upstream: {} requests, {} answered 429 ({:.2}%); the job's cached share {:.2}",
        r.upstream_requests,
        r.upstream_429,
        100.0 * r.upstream_429 as f64 / r.upstream_requests.max(1) as f64,
        r.cached_share
    );
    println!(
        "  items: {} output lines, {} distinct ({} lost, {} twice); ledger: {} rows for {} items",
        r.lines,
        r.unique,
        a.documents.saturating_sub(r.unique),
        r.lines - r.unique,
        r.billed_rows,
        r.billed_items
    );
}

/// Runs the benchmark.
pub fn run(a: &BatchArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let (r, unloaded) = run_once(a, false).await?;
        report("batch beside interactive traffic", a, &r, &unloaded);
        let mut fine = r.unique == a.documents && r.billed_rows == a.documents as i64;
        if !a.no_kill {
            let (k, unloaded) = run_once(a, true).await?;
            report(
                "the same, sluice killed (SIGKILL) at half the items and started again",
                a,
                &k,
                &unloaded,
            );
            fine &= k.unique == a.documents && k.billed_rows == a.documents as i64;
        }
        Ok(if fine {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        })
    })
}
