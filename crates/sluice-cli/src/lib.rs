//! What the `sluice` binary shares with the benchmarks' binary (`sluice-bench`): the batch
//! API's client, the runtime, results written as JSON.

pub mod batch_client;

use std::path::Path;

use anyhow::Context;

/// The runtime requests run on: `worker_threads` threads, by default one per core.
pub fn runtime(worker_threads: Option<usize>) -> anyhow::Result<tokio::runtime::Runtime> {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = worker_threads {
        b.worker_threads(n);
    }
    b.enable_all().build().context("starting the runtime")
}

/// Writes `value` as pretty JSON to `path`, when one is given, and says so.
pub fn write_json<T: serde::Serialize>(path: Option<&Path>, value: &T) -> anyhow::Result<()> {
    if let Some(p) = path {
        std::fs::write(p, serde_json::to_string_pretty(value)?)
            .with_context(|| format!("writing {}", p.display()))?;
        println!("\nwrote {}", p.display());
    }
    Ok(())
}
