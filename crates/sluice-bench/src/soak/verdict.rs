//! The soak's verdicts: the gateway drained after the load (connections, tasks, descriptors,
//! ledger rows), memory flat under it, requests answered, features exercised; and the
//! probes' added latency at the start and at the end.

use std::time::Duration;

use serde::Serialize;
use sluice_sim::load::{LaneSummary, Recorder};
use tokio::time::Instant;

use super::setup::{CHAT_STREAM, DIRECT, PROBE, THROUGH, UNIQUE_STREAM};
use super::watch::{Page, Watched};
use super::{Sample, SoakArgs, Window, sample};

/// How long the gateway has to give back what the load took: a cut stream is read on for
/// up to 30 s to learn its usage, so a little more than that.
const DRAIN_FOR: Duration = Duration::from_secs(40);
/// Tasks the idle gateway may hold after the load beyond its idle count and one per pooled
/// upstream connection: timers and workers started by the first requests.
const TASK_SLACK: f64 = 4.0;
/// Descriptors other than connections the gateway may hold after the load beyond its idle
/// count: files opened by the first requests (the ledger's journal).
const FD_SLACK: u32 = 4;
/// The share of requests through sluice that may fail.
const MAX_FAILED: f64 = 0.001;

/// The gateway after the load.
#[derive(Clone, Debug, Serialize)]
pub(super) struct Drained {
    /// Its last sample.
    pub(super) sample: Sample,
    /// How long it took to drain (or `DRAIN_FOR`, if it never did).
    pub(super) took_s: f64,
    /// Ledger rows committed, and waiting.
    pub(super) ledger_committed: f64,
    pub(super) ledger_pending: f64,
    /// What the features did: hedges sent, retries, exact and semantic cache hits.
    pub(super) hedges: f64,
    pub(super) retries: f64,
    pub(super) exact_hits: f64,
    pub(super) semantic_hits: f64,
}

/// Whether `s` (with `page`) has given back what the load took, against `idle`.
fn is_drained(s: &Sample, idle: &Sample, page: &Page) -> bool {
    s.fds.client == 0
        && s.inflight == 0.0
        && s.tasks <= idle.tasks + f64::from(s.fds.upstream) + TASK_SLACK
        && page.sum("sluice_ledger_rows_pending", "") == 0.0
}

/// Waits up to `DRAIN_FOR` for the gateway to give back what the load took.
pub(super) async fn drain(w: &Watched, idle: &Sample) -> anyhow::Result<Drained> {
    let start = Instant::now();
    loop {
        let s = sample(w, 0.0).await?;
        let page = w.metrics().await?;
        let took = start.elapsed();
        if is_drained(&s, idle, &page) || took >= DRAIN_FOR {
            return Ok(Drained {
                sample: Sample {
                    at_s: took.as_secs_f64(),
                    ..s
                },
                took_s: took.as_secs_f64(),
                ledger_committed: page.sum("sluice_ledger_rows_committed_total", ""),
                ledger_pending: page.sum("sluice_ledger_rows_pending", ""),
                hedges: page.sum("sluice_hedges_total", "result=\"won\"")
                    + page.sum("sluice_hedges_total", "result=\"lost\"")
                    + page.sum("sluice_hedges_total", "result=\"failed\"")
                    + page.sum("sluice_hedges_total", "result=\"cancelled\""),
                retries: page.sum("sluice_retries_total", "") - denied(&page),
                exact_hits: page.sum("sluice_answer_cache_requests_total", "result=\"hit\""),
                semantic_hits: page.sum("sluice_semantic_cache_lookups_total", "result=\"hit\""),
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Retries the budget refused (counted in the family, never sent).
fn denied(page: &Page) -> f64 {
    page.sum("sluice_retries_total", "outcome=\"denied\"")
}

/// One check: what it asks, what was measured, and whether it held.
#[derive(Clone, Debug, Serialize)]
pub(super) struct Check {
    pub(super) what: String,
    pub(super) measured: String,
    pub(super) held: bool,
}

/// Every check, and the probes' added latency at the start and at the end.
#[derive(Clone, Debug, Serialize)]
pub(super) struct Verdict {
    pub(super) checks: Vec<Check>,
    /// Added P50 and P99 of the probes in the first windows after settling, ms.
    pub(super) added_start_ms: Option<(f64, f64)>,
    /// The same in the last windows.
    pub(super) added_end_ms: Option<(f64, f64)>,
    /// Resident memory at the baseline and at the end of the load, MiB.
    pub(super) rss_baseline_mib: f64,
    pub(super) rss_end_mib: f64,
}

impl Verdict {
    /// Whether every check held.
    pub(super) fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.held)
    }
}

/// Windows (and samples at their ends) that settle the gateway, and how many make up the
/// start's and the end's measurement.
fn spans(a: &SoakArgs, n: usize) -> (usize, usize) {
    let settled = ((n as f64) * a.settle).ceil() as usize;
    let k = (n / 10).max(1);
    (settled.min(n.saturating_sub(k)), k)
}

/// The pooled results of `windows`.
fn pooled(windows: &[Window]) -> anyhow::Result<sluice_sim::load::Summary> {
    let mut all = Recorder::new(None)?;
    for w in windows {
        all.merge(&w.lock());
    }
    Ok(all.summary(Duration::ZERO, Duration::ZERO))
}

/// The probes' added P50 and P99 in `windows`, ms.
fn added(windows: &[Window]) -> Option<(f64, f64)> {
    let s = pooled(windows).ok()?;
    let (p, d) = (s.lanes.get(PROBE)?, s.lanes.get(DIRECT)?);
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    Some((
        ms(p.total.p50) - ms(d.total.p50),
        ms(p.total.p99) - ms(d.total.p99),
    ))
}

/// The mean resident memory of `samples`, MiB.
fn mean_rss(samples: &[Sample]) -> f64 {
    samples.iter().map(|s| s.rss_mib).sum::<f64>() / samples.len().max(1) as f64
}

/// Judges the run.
pub(super) fn judge(
    a: &SoakArgs,
    idle: &Sample,
    samples: &[Sample],
    windows: &[Window],
    drained: &Drained,
) -> anyhow::Result<Verdict> {
    let (settled, k) = spans(a, windows.len());
    let base = samples
        .get(settled..(settled + k).min(samples.len()))
        .unwrap_or(&[]);
    let end = samples
        .get(samples.len().saturating_sub(k)..)
        .unwrap_or(&[]);
    let (rss_baseline_mib, rss_end_mib) = (mean_rss(base), mean_rss(end));
    let all = pooled(windows)?;
    let through: Vec<&LaneSummary> = THROUGH.iter().filter_map(|l| all.lanes.get(*l)).collect();
    let count: u64 = through.iter().map(|l| l.count).sum();
    let ok: u64 = through.iter().map(|l| l.ok).sum();
    let streams_ok: u64 = [CHAT_STREAM, UNIQUE_STREAM]
        .iter()
        .filter_map(|l| all.lanes.get(*l))
        .map(|l| l.ok)
        .sum();
    let d = &drained.sample;
    let check = |what: String, measured: String, held: bool| Check {
        what,
        measured,
        held,
    };
    let checks = vec![
        check(
            format!(
                "resident memory grows at most {} MiB under load",
                a.max_rss_growth_mib
            ),
            format!("{rss_baseline_mib:.1} -> {rss_end_mib:.1} MiB"),
            rss_end_mib - rss_baseline_mib <= a.max_rss_growth_mib,
        ),
        check(
            format!(
                "at most {:.1}% of requests through sluice fail",
                MAX_FAILED * 100.0
            ),
            format!("{} of {count}", count - ok),
            ((count - ok) as f64) <= MAX_FAILED * count as f64 && count > 0,
        ),
        check(
            "after the load: no client connection, no request in flight".into(),
            format!("{} connections, {} in flight", d.fds.client, d.inflight),
            d.fds.client == 0 && d.inflight == 0.0,
        ),
        check(
            format!(
                "after the load: tasks at most idle + pooled upstream connections + {TASK_SLACK}"
            ),
            format!(
                "{} (idle {}, {} upstream connections)",
                d.tasks, idle.tasks, d.fds.upstream
            ),
            d.tasks <= idle.tasks + f64::from(d.fds.upstream) + TASK_SLACK,
        ),
        check(
            format!("after the load: other descriptors at most idle + {FD_SLACK}"),
            format!(
                "{} (idle {})",
                d.fds.other_sockets + d.fds.rest,
                idle.fds.other_sockets + idle.fds.rest
            ),
            d.fds.other_sockets + d.fds.rest <= idle.fds.other_sockets + idle.fds.rest + FD_SLACK,
        ),
        check(
            "every answered request has its ledger row, none left waiting".into(),
            format!(
                "{} committed for {ok} answered, {} waiting",
                drained.ledger_committed, drained.ledger_pending
            ),
            drained.ledger_pending == 0.0 && drained.ledger_committed >= ok as f64,
        ),
        check(
            "streams, hedges, retries, exact and semantic hits all happened".into(),
            format!(
                "{streams_ok} streams, {} hedges, {} retries, {} exact hits, {} semantic hits",
                drained.hedges, drained.retries, drained.exact_hits, drained.semantic_hits
            ),
            streams_ok > 0
                && drained.hedges > 0.0
                && drained.retries > 0.0
                && drained.exact_hits > 0.0
                && drained.semantic_hits > 0.0,
        ),
    ];
    Ok(Verdict {
        checks,
        added_start_ms: added(windows.get(settled..settled + k).unwrap_or(&[])),
        added_end_ms: added(
            windows
                .get(windows.len().saturating_sub(k)..)
                .unwrap_or(&[]),
        ),
        rss_baseline_mib,
        rss_end_mib,
    })
}
