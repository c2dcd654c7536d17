//! `sluice bench ledger`: how many calls a second the embedded ledger settles, measured two
//! ways side by side: as the gateway writes (hand the row over, never wait) and with every
//! caller waiting for its row's commit; with the commit wait's percentiles and batch sizes.
//! With `--acks` it prints each request id once committed, which the crash test reads.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;
use clap::Args;
use hdrhistogram::Histogram;
use parking_lot::Mutex;
use sluice_ledger::{CacheOutcome, Durability, Entry, Ledger, SqliteStore, Tokens};
use tokio::time::Instant;

/// Options of the ledger benchmark.
#[derive(Args, Debug, Clone)]
pub struct LedgerArgs {
    /// The SQLite file to write (default: a new file in the temp folder, removed after).
    #[arg(long)]
    pub path: Option<PathBuf>,
    /// Calls to settle in each measurement.
    #[arg(long, default_value_t = 50_000)]
    pub entries: u64,
    /// Callers settling at once in the waiting measurement.
    #[arg(long, default_value_t = 256)]
    pub concurrency: u64,
    /// `disk` (every commit flushed to the disk) or `process`.
    #[arg(long, default_value = "disk")]
    pub durability: String,
    /// Only the waiting measurement, printing each request id once its row is committed.
    #[arg(long)]
    pub acks: bool,
    /// The request ids' prefix.
    #[arg(long, default_value = "bench")]
    pub prefix: String,
}

fn entry(prefix: &str, i: u64) -> Entry {
    Entry {
        request_id: format!("{prefix}-{i}").into(),
        at_ms: 1_796_000_000_000 + i64::try_from(i).unwrap_or(0),
        tenant: Some(format!("tenant-{}", i % 50).into()),
        api_key: Some(format!("key-{}", i % 200).into()),
        model_group: Some("chat".into()),
        upstream: Some(
            if i.is_multiple_of(3) {
                "openai/gpt-4o"
            } else {
                "deepseek/deepseek-chat"
            }
            .into(),
        ),
        model: Some(
            if i.is_multiple_of(3) {
                "gpt-4o"
            } else {
                "deepseek-chat"
            }
            .into(),
        ),
        status: 200,
        error: None,
        stream: i.is_multiple_of(2),
        tokens: Tokens {
            prompt: 1_800,
            cached: 1_024,
            cache_write: 0,
            completion: 240,
            reasoning: 0,
        },
        cost_micros: Some(2_400),
        saved_micros: 1_100,
        extra_micros: 0,
        cache: CacheOutcome::Provider,
        ttfb_ms: Some(620),
        total_ms: 3_100,
        attempts: 1,
        hedges: 0,
        retries: 0,
        batch_item: None,
        currency: None,
        native_micros: None,
        hold: None,
        settled_in_ledger: false,
    }
}

/// Runs the benchmark.
pub fn run(a: &LedgerArgs) -> anyhow::Result<ExitCode> {
    let durability = match a.durability.as_str() {
        "disk" => Durability::Disk,
        "process" => Durability::Process,
        other => anyhow::bail!("--durability {other}: use disk or process"),
    };
    let temp = match &a.path {
        Some(_) => None,
        None => Some(tempfile::tempdir().context("making a temp folder")?),
    };
    let path = match (&a.path, &temp) {
        (Some(p), _) => p.clone(),
        (None, Some(t)) => t.path().join("ledger.db"),
        (None, None) => anyhow::bail!("no ledger path"),
    };
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let store = Arc::new(SqliteStore::open(&path, durability).await?);
        let (ledger, _writer) = Ledger::start(store);
        if a.acks {
            waiting(&ledger, a, "acked").await?;
            return Ok(ExitCode::SUCCESS);
        }
        println!(
            "ledger: {} calls per measurement, SQLite WAL, durability {}, at {}",
            a.entries,
            a.durability,
            path.display()
        );
        // The gateway's way: the call hands its row over and goes on.
        let before = ledger.stats();
        let t0 = Instant::now();
        for i in 0..a.entries {
            ledger.record(entry(&a.prefix, i));
        }
        ledger.flush().await?;
        let secs = t0.elapsed().as_secs_f64();
        let after = ledger.stats();
        let batches = after.batches - before.batches;
        println!(
            "  hand over, then flush:   {:>9.0} settled/s  ({} transactions, {:.0} rows each)",
            a.entries as f64 / secs,
            batches,
            a.entries as f64 / batches.max(1) as f64
        );
        let rate = waiting(&ledger, a, "wait").await?;
        println!(
            "  target >= 5,000 settled/s on the embedded store: {}",
            if rate >= 5_000.0 { "met" } else { "NOT met" }
        );
        Ok(ExitCode::SUCCESS)
    })
}

/// `concurrency` callers each settling calls one after another and waiting for each
/// commit; returns the rate.
async fn waiting(ledger: &Ledger, a: &LedgerArgs, prefix: &str) -> anyhow::Result<f64> {
    let next = Arc::new(AtomicU64::new(0));
    let waits = Arc::new(Mutex::new(Histogram::<u64>::new_with_bounds(
        1,
        600_000_000,
        3,
    )?));
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let before = ledger.stats();
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..a.concurrency {
        let (ledger, next, waits, out) = (ledger.clone(), next.clone(), waits.clone(), out.clone());
        let (n, tag, acks) = (a.entries, format!("{}-{prefix}", a.prefix), a.acks);
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok::<(), anyhow::Error>(());
                }
                let e = entry(&tag, i);
                let id = e.request_id.clone();
                let started = Instant::now();
                ledger.append(e).await?;
                let us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                waits.lock().saturating_record(us.max(1));
                if acks {
                    // Printed only after the commit: a line seen is a row on the disk.
                    writeln!(out.lock(), "{id}")?;
                }
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    let secs = t0.elapsed().as_secs_f64();
    let rate = a.entries as f64 / secs;
    if !a.acks {
        let h = waits.lock();
        let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        let batches = ledger.stats().batches - before.batches;
        println!(
            "  each caller waits commit: {rate:>9.0} settled/s  ({} callers; commit wait P50 {:.2} ms, P99 {:.2} ms, max {:.2} ms; {:.0} rows per transaction)",
            a.concurrency,
            ms(0.5),
            ms(0.99),
            h.max() as f64 / 1000.0,
            a.entries as f64 / batches.max(1) as f64
        );
    }
    Ok(rate)
}
