//! The incident explainer: what changed between a baseline window of calls and a recent one,
//! said in plain words. Percentiles per lane, where a slow call's time went (queueing in
//! sluice, the upstream's first byte, the stream), the batch share, the 429, error, hedge,
//! retry and cache-hit rates, each upstream's first byte; then one verdict that names the
//! contention ("P99 rose with the batch share and the 429 rate: rate-limit contention")
//! instead of "the system is slow". A pure function of the two windows' summaries.

mod stats;

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

pub use stats::Stats;

/// What the explainer keeps of a finished call.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// Its lane (`-` when none).
    pub lane: Arc<str>,
    /// The upstream that answered or was last tried (`-` when none).
    pub upstream: Arc<str>,
    /// The status the client got.
    pub status: u16,
    /// Arrival to dispatch (parse, route, queue).
    pub queue: Duration,
    /// Dispatch to the upstream's first byte.
    pub upstream_ttfb: Duration,
    /// Arrival to the first byte sent (the whole call when none was).
    pub ttfb: Duration,
    /// Arrival to the end.
    pub total: Duration,
    /// It met a 429.
    pub rate_limited: bool,
    /// It was hedged.
    pub hedged: bool,
    /// It was retried.
    pub retried: bool,
    /// Served from the answer or semantic cache.
    pub cache_hit: bool,
}

/// One thing that changed, with both windows' values.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Change {
    /// What (`p99 interactive`, `batch share`, ...).
    pub what: String,
    /// In the baseline.
    pub before: f64,
    /// In the recent window.
    pub after: f64,
    /// How it is written (`s` for seconds, `%` for a share).
    pub unit: &'static str,
}

impl Change {
    fn words(&self) -> String {
        let f = |x: f64| match self.unit {
            "%" => format!("{:.1}%", x * 100.0),
            _ => format!("{x:.2} s"),
        };
        format!("{} {} -> {}", self.what, f(self.before), f(self.after))
    }
}

/// What the explainer concludes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Nothing changed beyond noise.
    Quiet,
    /// The tail grew with the provider's rate limit: 429s and (usually) a batch flood.
    RateLimitContention,
    /// The tail grew in sluice's queue without a rate limit in play.
    Queueing,
    /// The upstream itself got slower.
    UpstreamSlower,
    /// Calls fail more.
    Errors,
    /// The tail grew, and no single cause stands out.
    Unexplained,
}

/// The explanation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Diagnosis {
    /// The conclusion.
    pub verdict: Verdict,
    /// It, in plain words.
    pub summary: String,
    /// What changed, most telling first.
    pub changes: Vec<Change>,
    /// The baseline window's figures.
    pub baseline: Stats,
    /// The recent window's.
    pub recent: Stats,
}

/// A tail this much longer than the baseline's is a change (and one shorter is not news).
const TAIL_GROWTH: f64 = 1.25;
/// A rate this many points up is a change.
const RATE_POINTS: f64 = 0.01;
/// A lane's P99 is compared only over this many calls in both windows (below it, the P99 is
/// one of a handful of calls, and noise).
const MIN_LANE_CALLS: u64 = 200;

fn rose(before: f64, after: f64) -> bool {
    after > before * TAIL_GROWTH && after - before > 0.05
}

fn share_rose(before: f64, after: f64) -> bool {
    after - before >= RATE_POINTS && after > before * 1.5
}

/// What changed from `baseline` to `recent`.
pub fn explain(baseline: &[Summary], recent: &[Summary]) -> Diagnosis {
    let (b, r) = (Stats::of(baseline), Stats::of(recent));
    let mut changes = Vec::new();
    let mut push = |what: String, before: f64, after: f64, unit: &'static str| {
        changes.push(Change {
            what,
            before,
            after,
            unit,
        });
    };
    let mut tail_grew = false;
    for (lane, after) in &r.lanes {
        if let Some(before) = b.lanes.iter().find(|(l, _)| l == lane).map(|(_, s)| s)
            && before.calls >= MIN_LANE_CALLS
            && after.calls >= MIN_LANE_CALLS
            && rose(before.p99_total, after.p99_total)
        {
            tail_grew = true;
            push(
                format!("P99 {lane}"),
                before.p99_total,
                after.p99_total,
                "s",
            );
        }
    }
    let queue_grew = rose(b.slow_queue, r.slow_queue);
    let upstream_grew = rose(b.slow_upstream, r.slow_upstream);
    if queue_grew {
        push(
            "queue of the slowest 5%".into(),
            b.slow_queue,
            r.slow_queue,
            "s",
        );
    }
    if upstream_grew {
        push(
            "upstream first byte of the slowest 5%".into(),
            b.slow_upstream,
            r.slow_upstream,
            "s",
        );
    }
    if rose(b.slow_stream, r.slow_stream) {
        push(
            "stream of the slowest 5%".into(),
            b.slow_stream,
            r.slow_stream,
            "s",
        );
    }
    let batch = share_rose(b.batch_share, r.batch_share);
    if batch {
        push("batch share".into(), b.batch_share, r.batch_share, "%");
    }
    let limited = share_rose(b.rate_limited, r.rate_limited);
    if limited {
        push("429 rate".into(), b.rate_limited, r.rate_limited, "%");
    }
    let errors = share_rose(b.errors, r.errors);
    if errors {
        push("error rate".into(), b.errors, r.errors, "%");
    }
    for (what, before, after) in [
        ("hedge rate", b.hedged, r.hedged),
        ("retry rate", b.retried, r.retried),
    ] {
        if share_rose(before, after) {
            push(what.into(), before, after, "%");
        }
    }
    if b.cache_hits - r.cache_hits >= 0.05 {
        push("cache hit rate".into(), b.cache_hits, r.cache_hits, "%");
    }
    let mut slower_upstreams = Vec::new();
    for (up, after) in &r.upstream_p99 {
        if let Some(before) = b
            .upstream_p99
            .iter()
            .find(|(u, _)| u == up)
            .map(|(_, v)| *v)
            && rose(before, *after)
        {
            slower_upstreams.push(up.clone());
            push(format!("upstream {up} first byte P99"), before, *after, "s");
        }
    }
    let verdict = if limited && (tail_grew || queue_grew || !upstream_grew) {
        Verdict::RateLimitContention
    } else if upstream_grew && !queue_grew {
        Verdict::UpstreamSlower
    } else if queue_grew {
        Verdict::Queueing
    } else if errors {
        Verdict::Errors
    } else if tail_grew {
        Verdict::Unexplained
    } else {
        Verdict::Quiet
    };
    let words: Vec<String> = changes.iter().map(Change::words).collect();
    let ttfb = |s: &Stats| s.upstream_ttfb_p99;
    let summary = match verdict {
        Verdict::Quiet => format!(
            "nothing is wrong: {} calls against {} in the baseline, the tail and the rates within noise (P99 {:.2} s -> {:.2} s)",
            r.calls, b.calls, b.p99_total, r.p99_total
        ),
        Verdict::RateLimitContention => format!(
            "rate-limit contention, not a slower LLM: {}; the upstream's own first byte P99 {:.2} s -> {:.2} s",
            words.join(", "),
            ttfb(&b),
            ttfb(&r)
        ),
        Verdict::Queueing => format!(
            "sluice is queueing: {}; no 429 met, the upstream's first byte P99 {:.2} s -> {:.2} s: look at concurrency limits, lane shares and pacing to the provider's announced limits",
            words.join(", "),
            ttfb(&b),
            ttfb(&r)
        ),
        Verdict::UpstreamSlower => format!(
            "the upstream got slower{}: {}; sluice's queue unchanged",
            if slower_upstreams.is_empty() {
                String::new()
            } else {
                format!(" ({})", slower_upstreams.join(", "))
            },
            words.join(", ")
        ),
        Verdict::Errors => format!("calls fail more: {}", words.join(", ")),
        Verdict::Unexplained => format!(
            "the tail grew and no single cause stands out: {}",
            words.join(", ")
        ),
    };
    Diagnosis {
        verdict,
        summary,
        changes,
        baseline: b,
        recent: r,
    }
}

#[cfg(test)]
mod tests;
