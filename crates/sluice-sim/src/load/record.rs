//! Client-side results: HDR histograms of time to first byte and total time, per lane, with
//! errors by status and SLO breaches; summarised as a table or JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;
use sluice_tail::Percentiles;

/// Status recorded when no HTTP answer came back (connection failed).
pub const NO_ANSWER: u16 = 0;

/// Histograms with three significant digits: the load generator measures overheads of tens
/// of microseconds, so it keeps more precision than the gateway's windows.
fn histogram() -> Result<Histogram<u64>, hdrhistogram::CreationError> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3)
}

fn record(h: &mut Histogram<u64>, d: Duration) {
    let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1);
    h.saturating_record(us);
}

struct Lane {
    ttfb: Histogram<u64>,
    total: Histogram<u64>,
    /// Total time of successful answers that did not come from the answer cache.
    uncached: Histogram<u64>,
    count: u64,
    ok: u64,
    cache_hits: u64,
    errors: BTreeMap<u16, u64>,
    stream_failures: BTreeMap<String, u64>,
    over_slo: u64,
}

/// What one request got, as the client saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answered {
    /// The HTTP status ([`NO_ANSWER`] when none came).
    pub status: u16,
    /// A clean 2xx (a stream only if it ended with `[DONE]`).
    pub ok: bool,
    /// Time to the first byte of the body.
    pub ttfb: Option<Duration>,
    /// Time to the last byte.
    pub total: Duration,
    /// Served from the gateway's answer cache (`x-sluice-cache: hit` or `coalesced`).
    pub cache_hit: bool,
    /// Why a stream that began with a 2xx did not end cleanly: the error event's code, or
    /// `no [DONE]` when it just stopped.
    pub stream_failure: Option<String>,
    /// The upstream that answered (`x-sluice-upstream`), if one did.
    pub upstream: Option<String>,
}

impl Lane {
    /// Adds `other`'s requests to these (histograms of one shape always add).
    fn merge(&mut self, other: &Lane) {
        // Both come from one template, so the bounds match and adding cannot fail.
        let _ = self.ttfb.add(&other.ttfb);
        let _ = self.total.add(&other.total);
        let _ = self.uncached.add(&other.uncached);
        self.count += other.count;
        self.ok += other.ok;
        self.cache_hits += other.cache_hits;
        for (status, n) in &other.errors {
            *self.errors.entry(*status).or_insert(0) += n;
        }
        for (why, n) in &other.stream_failures {
            *self.stream_failures.entry(why.clone()).or_insert(0) += n;
        }
        self.over_slo += other.over_slo;
    }

    fn new(template: &Histogram<u64>) -> Self {
        Self {
            ttfb: template.clone(),
            total: template.clone(),
            uncached: template.clone(),
            count: 0,
            ok: 0,
            cache_hits: 0,
            errors: BTreeMap::new(),
            stream_failures: BTreeMap::new(),
            over_slo: 0,
        }
    }
}

/// Collects results while a run goes.
pub struct Recorder {
    template: Histogram<u64>,
    slo: Option<Duration>,
    lanes: BTreeMap<String, Lane>,
    all: Lane,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("count", &self.all.count)
            .finish_non_exhaustive()
    }
}

/// Results of one lane (or of all lanes).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LaneSummary {
    /// Requests sent.
    pub count: u64,
    /// Requests answered 2xx (a stream counts only if it ended cleanly).
    pub ok: u64,
    /// Failed requests by status (0: no answer; a 2xx is a stream that failed after it).
    pub errors_by_status: BTreeMap<u16, u64>,
    /// Streams that failed after their 2xx, by why (the error event's code, or `no [DONE]`).
    pub stream_failures: BTreeMap<String, u64>,
    /// Successful answers served from the gateway's answer cache.
    pub cache_hits: u64,
    /// Total time of successful answers that did not come from the cache, ms.
    pub uncached_total: Percentiles,
    /// Time to first byte of successful requests, ms.
    pub ttfb: Percentiles,
    /// Total time of successful requests, ms.
    pub total: Percentiles,
    /// Requests (any outcome) whose total time exceeded the SLO.
    pub over_slo: u64,
}

/// Results of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// All lanes together.
    #[serde(flatten)]
    pub all: LaneSummary,
    /// The SLO the breaches count against, ms.
    pub slo_ms: Option<f64>,
    /// Wall (or virtual) length of the run, s, the wait for the last answers included.
    pub duration_s: f64,
    /// Requests sent per second over the sending window (the first request to the last).
    pub achieved_rate: f64,
    /// Per lane.
    pub lanes: BTreeMap<String, LaneSummary>,
}

impl Recorder {
    /// An empty recorder counting breaches of `slo`.
    pub fn new(slo: Option<Duration>) -> Result<Self, hdrhistogram::CreationError> {
        let template = histogram()?;
        Ok(Self {
            all: Lane::new(&template),
            template,
            slo,
            lanes: BTreeMap::new(),
        })
    }

    /// Records one request: its status (`ok` meaning a clean 2xx), time to first byte and total.
    pub fn record(
        &mut self,
        lane: &str,
        status: u16,
        ok: bool,
        ttfb: Option<Duration>,
        total: Duration,
    ) {
        self.record_answer(
            lane,
            &Answered {
                status,
                ok,
                ttfb,
                total,
                ..Answered::default()
            },
        );
    }

    /// Records one request's answer.
    pub fn record_answer(&mut self, lane: &str, a: &Answered) {
        let slo = self.slo;
        let template = &self.template;
        let lane = self
            .lanes
            .entry(lane.to_string())
            .or_insert_with(|| Lane::new(template));
        for l in [lane, &mut self.all] {
            l.count += 1;
            if a.ok {
                l.ok += 1;
                if let Some(t) = a.ttfb {
                    record(&mut l.ttfb, t);
                }
                record(&mut l.total, a.total);
                if a.cache_hit {
                    l.cache_hits += 1;
                } else {
                    record(&mut l.uncached, a.total);
                }
            } else {
                *l.errors.entry(a.status).or_insert(0) += 1;
                if let Some(why) = &a.stream_failure {
                    *l.stream_failures.entry(why.clone()).or_insert(0) += 1;
                }
            }
            if slo.is_some_and(|s| a.total > s) {
                l.over_slo += 1;
            }
        }
    }

    /// Adds everything `other` recorded (say, one round of several) to this recorder.
    pub fn merge(&mut self, other: &Recorder) {
        let template = &self.template;
        for (name, lane) in &other.lanes {
            self.lanes
                .entry(name.clone())
                .or_insert_with(|| Lane::new(template))
                .merge(lane);
        }
        self.all.merge(&other.all);
    }

    /// The summary of a run that lasted `duration`, sending for `sending` of it.
    pub fn summary(&self, duration: Duration, sending: Duration) -> Summary {
        let lane = |l: &Lane| LaneSummary {
            count: l.count,
            ok: l.ok,
            errors_by_status: l.errors.clone(),
            stream_failures: l.stream_failures.clone(),
            cache_hits: l.cache_hits,
            uncached_total: Percentiles::of(&l.uncached),
            ttfb: Percentiles::of(&l.ttfb),
            total: Percentiles::of(&l.total),
            over_slo: l.over_slo,
        };
        // n requests sent over a window from the first to the last are n - 1 gaps.
        let window = sending.as_secs_f64();
        let achieved = match self.all.count {
            0 => 0.0,
            1 => 1.0 / duration.as_secs_f64().max(1e-9),
            n if window > 0.0 => (n - 1) as f64 / window,
            _ => 0.0,
        };
        Summary {
            all: lane(&self.all),
            slo_ms: self.slo.map(|s| s.as_secs_f64() * 1000.0),
            duration_s: duration.as_secs_f64(),
            achieved_rate: achieved,
            lanes: self
                .lanes
                .iter()
                .map(|(k, v)| (k.clone(), lane(v)))
                .collect(),
        }
    }
}

fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms >= 10_000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.2} ms")
    }
}

/// `-` for a percentile of no samples, else the time.
fn dash_or_ms(p: &Percentiles, d: Duration) -> String {
    if p.count == 0 { "-".to_string() } else { ms(d) }
}

/// Renders a table with one row per metric and one column per named summary lane, so that a
/// policy's effect reads across a row.
pub fn table(columns: &[(&str, &LaneSummary)]) -> String {
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let mut row = |name: &str, f: &dyn Fn(&LaneSummary) -> String| {
        rows.push((
            name.to_string(),
            columns.iter().map(|(_, s)| f(s)).collect(),
        ));
    };
    row("requests", &|s| s.count.to_string());
    row("ok", &|s| s.ok.to_string());
    row("failed", &|s| (s.count - s.ok).to_string());
    let hits = columns.iter().any(|(_, s)| s.cache_hits > 0);
    if hits {
        row("cache hits", &|s| s.cache_hits.to_string());
    }
    for (label, pick) in [
        ("P50", 0usize),
        ("P95", 2),
        ("P99", 3),
        ("P999", 4),
        ("max", 5),
    ] {
        row(&format!("total {label}"), &|s| {
            if s.total.count == 0 {
                return "-".to_string();
            }
            let v = [
                s.total.p50,
                s.total.p90,
                s.total.p95,
                s.total.p99,
                s.total.p999,
                s.total.max,
            ];
            ms(v[pick])
        });
    }
    if hits {
        // A rerun with the same seed is mostly hits: show the answers upstreams gave apart.
        row("uncached P50", &|s| {
            dash_or_ms(&s.uncached_total, s.uncached_total.p50)
        });
        row("uncached P99", &|s| {
            dash_or_ms(&s.uncached_total, s.uncached_total.p99)
        });
    }
    row("first byte P99", &|s| dash_or_ms(&s.ttfb, s.ttfb.p99));
    row("over SLO", &|s| s.over_slo.to_string());
    let width0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0).max(8);
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, (name, _))| {
            rows.iter()
                .map(|r| r.1[i].len())
                .max()
                .unwrap_or(0)
                .max(name.len())
        })
        .collect();
    let mut out = String::new();
    let _ = write!(out, "{:width0$}", "");
    for ((name, _), w) in columns.iter().zip(&widths) {
        let _ = write!(out, "  {name:>w$}");
    }
    out.push('\n');
    for (name, cells) in rows {
        let _ = write!(out, "{name:width0$}");
        for (c, w) in cells.iter().zip(&widths) {
            let _ = write!(out, "  {c:>w$}");
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests;
