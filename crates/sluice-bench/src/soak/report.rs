//! What the soak prints as it goes and at the end, and its JSON.

use std::time::Duration;

use serde::Serialize;

use super::setup::{DIRECT, PROBE, THROUGH, UNIQUE};
use super::verdict::{Drained, Verdict};
use super::{Sample, SoakArgs, Window};

/// One line as the load goes: the gateway at the end of a window.
pub(super) fn progress(s: &Sample) {
    eprintln!(
        "  {:>6.0} s  rss {:>6.1} MiB  fds {:>5} ({} client, {} upstream)  tasks {:>5.0}  in flight {:>4.0}",
        s.at_s,
        s.rss_mib,
        s.fds.total(),
        s.fds.client,
        s.fds.upstream,
        s.tasks,
        s.inflight
    );
}

/// One window's results, as the table and the JSON show them.
#[derive(Clone, Debug, Serialize)]
pub(super) struct WindowRow {
    /// Seconds since the load began, at the window's end.
    end_s: f64,
    /// Requests through sluice, and how many failed.
    requests: u64,
    failed: u64,
    /// The P99 of complete answers to unique documents (always upstream), ms.
    chat_p99_ms: f64,
    /// The probes' P99 through sluice less their P99 sent directly, ms.
    probe_added_p99_ms: f64,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `w`'s row, ending at `end_s`.
fn row(w: &Window, end_s: f64) -> WindowRow {
    let s = w.lock().summary(Duration::ZERO, Duration::ZERO);
    let lane = |l: &str| s.lanes.get(l);
    let through = THROUGH.iter().filter_map(|l| lane(l));
    let (requests, ok) = through.fold((0, 0), |(n, ok), l| (n + l.count, ok + l.ok));
    let p99 = |l: &str| lane(l).map_or(0.0, |l| ms(l.total.p99));
    WindowRow {
        end_s,
        requests,
        failed: requests - ok,
        chat_p99_ms: p99(UNIQUE),
        probe_added_p99_ms: p99(PROBE) - p99(DIRECT),
    }
}

/// Every window's row.
fn rows(samples: &[Sample], windows: &[Window]) -> Vec<WindowRow> {
    windows
        .iter()
        .zip(samples)
        .map(|(w, s)| row(w, s.at_s))
        .collect()
}

/// The table over time, the verdicts, and the added latency at the start and the end.
pub(super) fn print(
    idle: &Sample,
    samples: &[Sample],
    windows: &[Window],
    drained: &Drained,
    verdict: &Verdict,
) {
    println!(
        "{:>7} {:>9} {:>6} {:>7} {:>6} {:>9} {:>8} {:>7} {:>12} {:>11}",
        "time",
        "rss MiB",
        "fds",
        "client",
        "tasks",
        "in flight",
        "requests",
        "failed",
        "upstream P99",
        "added P99"
    );
    let line = |t: String, s: &Sample, r: Option<&WindowRow>| {
        let (req, failed, p99, added) = r.map_or_else(
            || ("-".into(), "-".into(), "-".into(), "-".into()),
            |r| {
                (
                    r.requests.to_string(),
                    r.failed.to_string(),
                    format!("{:.1} ms", r.chat_p99_ms),
                    format!("{:+.2} ms", r.probe_added_p99_ms),
                )
            },
        );
        println!(
            "{t:>7} {:>9.1} {:>6} {:>7} {:>6.0} {:>9.0} {req:>8} {failed:>7} {p99:>12} {added:>11}",
            s.rss_mib,
            s.fds.total(),
            s.fds.client,
            s.tasks,
            s.inflight
        );
    };
    line("idle".into(), idle, None);
    for (s, r) in samples.iter().zip(rows(samples, windows)) {
        line(format!("{:.0} s", s.at_s), s, Some(&r));
    }
    line(format!("+{:.0} s", drained.took_s), &drained.sample, None);
    println!(
        "\n(the last row: {:.1} s after the load stopped; \"added P99\": the probes' P99 through \
         sluice less their P99 sent directly, in that window)",
        drained.took_s
    );
    let pair = |p: Option<(f64, f64)>| {
        p.map_or("-".to_string(), |(p50, p99)| {
            format!("P50 {p50:+.3} ms, P99 {p99:+.3} ms")
        })
    };
    println!(
        "\nadded by sluice to the probes: at the start {}; at the end {}",
        pair(verdict.added_start_ms),
        pair(verdict.added_end_ms)
    );
    println!();
    for c in &verdict.checks {
        let mark = if c.held { "ok  " } else { "FAIL" };
        println!("{mark} {}: {}", c.what, c.measured);
    }
}

/// The JSON of a run.
#[derive(Serialize)]
pub(super) struct Results<'a> {
    rate: f64,
    duration_s: f64,
    sample_s: f64,
    cache_mib: u64,
    idle: &'a Sample,
    samples: &'a [Sample],
    windows: Vec<WindowRow>,
    drained: &'a Drained,
    verdict: &'a Verdict,
    passed: bool,
}

impl<'a> Results<'a> {
    pub(super) fn new(
        a: &SoakArgs,
        idle: &'a Sample,
        samples: &'a [Sample],
        windows: &[Window],
        drained: &'a Drained,
        verdict: &'a Verdict,
    ) -> Self {
        Self {
            rate: a.rate,
            duration_s: a.duration.as_secs_f64(),
            sample_s: a.sample.as_secs_f64(),
            cache_mib: a.cache_mib,
            idle,
            samples,
            windows: rows(samples, windows),
            drained,
            verdict,
            passed: verdict.passed(),
        }
    }
}
