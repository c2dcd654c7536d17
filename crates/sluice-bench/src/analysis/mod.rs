//! `sluice bench analysis`: the document-analysis workload measured. (a) The rule engine on
//! one core at the shipped 210 rules and at 2,000: MB and pages a second, and a 47-page
//! document's P50 and P99. (b) At 2,000 rules, a document's rules on one core, sharded over
//! two, hedged at once and hedged late: P99 and CPU each. (c) 47-page documents end to end
//! against reviewers with the heavy tail, in virtual time: P50, P99 and P999 without
//! hedging, with it, and with merging and pipelining, against the 10 s SLA. (d) A batch of
//! documents at a rate-limited provider while interactive documents go on.

mod rules;
mod tail;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use sluice_rules::Engine;

/// Options of `sluice bench analysis`.
#[derive(Args, Debug, Clone)]
pub struct AnalysisArgs {
    /// Documents for the rule engine's measures (a, b).
    #[arg(long, default_value_t = 200)]
    pub docs: usize,
    /// Documents end to end, per variant (c).
    #[arg(long, default_value_t = 2_000)]
    pub tail_docs: usize,
    /// Documents in the batch (d; 0 skips it).
    #[arg(long, default_value_t = 200)]
    pub batch: usize,
    /// The provider's calls a minute in (d).
    #[arg(long, default_value_t = 600)]
    pub rpm: u64,
}

/// The `q` quantile of sorted `xs` (nearest rank).
pub(super) fn percentile(xs: &[f64], q: f64) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let i = ((xs.len() as f64 * q).ceil() as usize).clamp(1, xs.len()) - 1;
    xs[i]
}

/// The CPU time this process has used (user and system), from `/proc/self/stat`.
pub(super) fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command's closing parenthesis, from the state (field 3): utime
    // and stime (fields 14 and 15) are the 12th and 13th, in ticks of 10 ms.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    Duration::from_millis((tick(11) + tick(12)) * 10)
}

/// Runs the benchmark, printing Markdown tables.
pub fn run(a: &AnalysisArgs) -> anyhow::Result<ExitCode> {
    let docs = rules::docs(a.docs)?;
    let (prep50, prep99) = rules::preparing(&docs);
    println!(
        "## (a) The rule engine on one core, {} documents of 47 pages\n",
        docs.len()
    );
    println!("Reading and cutting a document: P50 {prep50:.1} ms, P99 {prep99:.1} ms.\n");
    println!(
        "| rules | compile | MB/s | pages/s | P50 ms | P99 ms | max ms |\n|---|---|---|---|---|---|---|"
    );
    let mut big = None;
    for n in [210, 2_000] {
        let t = tokio::time::Instant::now();
        let engine = Engine::compile(sluice_rules::shipped::generated(n)?)?;
        let compile = t.elapsed().as_secs_f64() * 1e3;
        // One pass first, so that the search caches are warm as they are in a server.
        rules::measure(&engine, &docs, rules::Way::One, 1);
        let (mb, pages, l) = rules::throughput(&engine, &docs);
        println!(
            "| {n} | {compile:.0} ms | {mb:.2} | {pages:.0} | {:.2} | {:.2} | {:.2} |",
            l.p50, l.p99, l.max
        );
        if n == 2_000 {
            big = Some((engine, l.p50));
        }
    }
    let Some((engine, p50)) = big else {
        return Ok(ExitCode::FAILURE);
    };
    println!("\n## (b) Hedging local computation: 2,000 rules, 47-page documents\n");
    println!("| way | P50 ms | P99 ms | max ms | CPU ms a document |\n|---|---|---|---|---|");
    let mut single = None;
    for way in [rules::Way::One, rules::Way::Sharded, rules::Way::Hedged] {
        let l = rules::measure(&engine, &docs, way, 3);
        println!(
            "| {} | {:.2} | {:.2} | {:.2} | {:.2} |",
            l.way, l.p50, l.p99, l.max, l.cpu_ms
        );
        if matches!(way, rules::Way::One) {
            single = Some(l);
        }
    }
    // A late hedge starts its copy at the single run's P90 (estimated from its P50 and P99).
    let p90 = single.map_or(p50, |s| s.p50 + (s.p99 - s.p50) * 0.55);
    let l = rules::measure(
        &engine,
        &docs,
        rules::Way::HedgedAfter(Duration::from_secs_f64(p90 / 1e3)),
        3,
    );
    println!(
        "| {} | {:.2} | {:.2} | {:.2} | {:.2} |",
        l.way, l.p50, l.p99, l.max, l.cpu_ms
    );

    let shipped = Arc::new(Engine::compile(sluice_rules::shipped::contract_risks()?)?);
    println!(
        "\n## (c) End to end, virtual time: {} documents of 47 pages, one every 2 s; reviews' first byte log-normal (median 800 ms, sigma 0.5), 1% stall 8 s first, verdicts of about 100 tokens at 40 a second\n",
        a.tail_docs
    );
    println!(
        "| variant | flagged a document | calls a document | P50 s | P99 s | P999 s | over 10 s |\n|---|---|---|---|---|---|---|"
    );
    for v in [
        tail::Variant {
            name: "no hedging, no merging, not pipelined",
            hedge: false,
            merge: false,
            pipeline: false,
        },
        tail::Variant {
            name: "hedged",
            hedge: true,
            merge: false,
            pipeline: false,
        },
        tail::Variant {
            name: "hedged, merged, pipelined",
            hedge: true,
            merge: true,
            pipeline: true,
        },
    ] {
        let t = tail::documents(&shipped, v, a.tail_docs, Duration::from_secs(2))?;
        println!(
            "| {} | {:.1} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2}% |",
            t.name,
            t.flagged,
            t.calls,
            t.p50 / 1e3,
            t.p99 / 1e3,
            t.p999 / 1e3,
            t.over_sla * 100.0
        );
    }
    if a.batch > 0 {
        println!(
            "\n## (d) {} documents as one batch at {} calls a minute, an interactive document every 10 s\n",
            a.batch, a.rpm
        );
        let b = tail::batch(&shipped, a.batch, a.rpm, Duration::from_secs(10))?;
        println!(
            "The batch ended after {:.0} s ({} reviews sent, {} merged). Interactive documents meanwhile: P50 {:.2} s, P99 {:.2} s (with no batch: P50 {:.2} s, P99 {:.2} s).\n",
            b.done_s,
            b.calls,
            b.merged,
            b.interactive_p50 / 1e3,
            b.interactive_p99 / 1e3,
            b.alone_p50 / 1e3,
            b.alone_p99 / 1e3
        );
        let step = (b.progress.len() / 8).max(1);
        for (t, line) in b.progress.iter().step_by(step) {
            println!("- at {t:.0} s: {line}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
