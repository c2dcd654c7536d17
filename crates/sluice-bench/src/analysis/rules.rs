//! The rule engine on one core, and the essay's open question: at 2,000 rules, a
//! document's rules on one core, sharded over two, or hedged (the same work started twice,
//! the first copy to finish wins and the other gives up), each with its P99 and its CPU.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use sluice_documents::{Clause as Cut, read, split};
use sluice_rules::{Clause, Engine};

use super::{percentile, process_cpu};

/// A document made ready: its clauses, its bytes and pages.
pub(super) struct Doc {
    clauses: Vec<Cut>,
    bytes: usize,
    pages: usize,
    /// Reading and cutting it, in milliseconds.
    prepare_ms: f64,
}

/// `n` 47-page contracts, read and cut.
pub(super) fn docs(n: usize) -> anyhow::Result<Vec<Doc>> {
    (0..n as u64)
        .map(|seed| {
            let text = sluice_analysis::synth::contract(seed, 47, 0.2).join("\x0c");
            let t = tokio::time::Instant::now();
            let doc = read(&format!("contract-{seed}.txt"), text.as_bytes())?;
            let clauses = split(&doc);
            let prepare_ms = t.elapsed().as_secs_f64() * 1e3;
            Ok(Doc {
                clauses,
                bytes: doc.bytes(),
                pages: doc.pages.len(),
                prepare_ms,
            })
        })
        .collect()
}

fn views(d: &Doc) -> Vec<Clause<'_>> {
    d.clauses
        .iter()
        .map(|c| Clause {
            kind: c.kind.as_str(),
            text: &c.text,
        })
        .collect()
}

/// How a document's rules are run.
#[derive(Clone, Copy, Debug)]
pub(super) enum Way {
    /// On one core.
    One,
    /// Sharded: the clauses split over two threads.
    Sharded,
    /// Hedged: two copies started at once.
    Hedged,
    /// Hedged late: a second copy only if the first has not finished after the delay.
    HedgedAfter(Duration),
}

impl Way {
    pub(super) fn name(self) -> String {
        match self {
            Self::One => "one core".into(),
            Self::Sharded => "sharded over two".into(),
            Self::Hedged => "hedged (two copies at once)".into(),
            Self::HedgedAfter(d) => format!("hedged after {:.1} ms (P90)", d.as_secs_f64() * 1e3),
        }
    }
}

/// Runs `engine` over `clauses` the `way` says; the wall time.
fn run(engine: &Engine, clauses: &[Clause<'_>], way: Way) -> Duration {
    let t = tokio::time::Instant::now();
    match way {
        Way::One => {
            std::hint::black_box(engine.rule_all(clauses, 1));
        }
        Way::Sharded => {
            std::hint::black_box(engine.rule_all(clauses, 2));
        }
        Way::Hedged | Way::HedgedAfter(_) => {
            // The copies run on the engine's warm pool of two threads; this thread waits.
            let Some(pool) = engine.pool(2) else {
                std::hint::black_box(engine.rule_all(clauses, 1));
                return t.elapsed();
            };
            let stop = AtomicBool::new(false);
            let (tx, rx) = mpsc::channel::<()>();
            let mut won = Duration::ZERO;
            pool.in_place_scope(|s| {
                let copy = || {
                    let tx = tx.clone();
                    let stop = &stop;
                    move |_: &rayon::Scope<'_>| {
                        if engine.rule_until(clauses, stop).is_some() {
                            stop.store(true, Ordering::Relaxed);
                            let _ = tx.send(());
                        }
                    }
                };
                s.spawn(copy());
                let late = match way {
                    Way::HedgedAfter(d) => rx.recv_timeout(d).is_err(),
                    _ => true,
                };
                if late {
                    s.spawn(copy());
                    let _ = rx.recv();
                }
                // The winner has answered; the loser stops at its next clause.
                won = t.elapsed();
            });
            return won;
        }
    }
    t.elapsed()
}

/// One line of a table: a way's per-document P50, P99, max and CPU.
pub(super) struct Line {
    pub(super) way: String,
    pub(super) p50: f64,
    pub(super) p99: f64,
    pub(super) max: f64,
    pub(super) cpu_ms: f64,
}

/// `docs` ruled by `engine` the `way` says, `rounds` times over.
pub(super) fn measure(engine: &Engine, docs: &[Doc], way: Way, rounds: usize) -> Line {
    let views: Vec<Vec<Clause<'_>>> = docs.iter().map(views).collect();
    let cpu = process_cpu();
    let mut ms = Vec::new();
    for _ in 0..rounds {
        for v in &views {
            ms.push(run(engine, v, way).as_secs_f64() * 1e3);
        }
    }
    let cpu_ms = (process_cpu() - cpu).as_secs_f64() * 1e3 / ms.len() as f64;
    ms.sort_by(f64::total_cmp);
    Line {
        way: way.name(),
        p50: percentile(&ms, 0.5),
        p99: percentile(&ms, 0.99),
        max: ms.last().copied().unwrap_or(0.0),
        cpu_ms,
    }
}

/// The engine's throughput on one core over `docs`: MB and pages a second, and per document
/// P50, P99 and max.
pub(super) fn throughput(engine: &Engine, docs: &[Doc]) -> (f64, f64, Line) {
    let line = measure(engine, docs, Way::One, 3);
    let bytes: usize = docs.iter().map(|d| d.bytes).sum();
    let pages: usize = docs.iter().map(|d| d.pages).sum();
    let mean_ms = line.cpu_ms;
    let secs = mean_ms / 1e3 * docs.len() as f64;
    (bytes as f64 / 1e6 / secs, pages as f64 / secs, line)
}

/// Reading and cutting: per document P50 and P99.
pub(super) fn preparing(docs: &[Doc]) -> (f64, f64) {
    let mut ms: Vec<f64> = docs.iter().map(|d| d.prepare_ms).collect();
    ms.sort_by(f64::total_cmp);
    (percentile(&ms, 0.5), percentile(&ms, 0.99))
}
