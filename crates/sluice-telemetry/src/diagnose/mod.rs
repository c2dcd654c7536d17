//! The incident explainer: what changed between a baseline window of calls and a recent one,
//! said in plain words. Percentiles per lane, where a slow call's time went (queueing in
//! sluice, retries and pauses after 429s, the answering attempt's own first byte, the
//! stream), the batch share, the rate-limited share
//! (429s, and waits for the provider's pace), the error, hedge, retry and cache-hit rates,
//! each upstream's first byte; then one verdict that names the contention ("P99 rose with
//! the batch share and the rate-limited share: rate-limit contention") instead of "the
//! system is slow", and what to do. A pure function of the two windows' summaries.

mod found;
mod next;
mod stats;

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use found::Found;
use next::next_steps;
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
    /// Dispatch to the upstream's first byte: the answering attempt's own time, and before it
    /// every failed attempt, pause after a 429 and wait for a slot again.
    pub upstream_ttfb: Duration,
    /// The answering attempt's own time to first byte, from its own start (zero when no
    /// attempt answered): what the upstream itself took.
    pub attempt_ttfb: Duration,
    /// What the upstream itself took, from its attempt's own start: `attempt_ttfb`, or, when
    /// no attempt answered, the longest an attempt was out without a first byte (what it took
    /// at least; zero when none went).
    pub attempt_own: Duration,
    /// Arrival to the first byte sent (the whole call when none was).
    pub ttfb: Duration,
    /// Arrival to the end.
    pub total: Duration,
    /// It met the upstream's rate limit: a 429, or a wait in sluice's queue for the pacer
    /// or a pause after a 429.
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
    /// How it is written (`s` for seconds, `%` for a share, `calls` for a count; a count's
    /// `before` is what the baseline's rate would give in the recent window).
    pub unit: &'static str,
}

impl Change {
    fn words(&self) -> String {
        let f = |x: f64| match self.unit {
            "%" => format!("{:.1}%", x * 100.0),
            "calls" => format!("{x:.0}"),
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
    /// The baseline holds too few calls to compare against: no verdict.
    NoBaseline,
    /// The recent window holds too few calls to judge: no latency verdict, and never "nothing
    /// is wrong".
    NoTraffic,
    /// Fewer calls came, at under a fifth of the baseline's rate; those that came look as
    /// before.
    TrafficFell,
}

/// A cause the figures show; a verdict names its own first and every other after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Factor {
    /// More calls met the provider's rate limit.
    RateLimit,
    /// The upstream's own attempts got slower.
    UpstreamSlower,
    /// Calls waited longer in sluice's queue.
    Queueing,
    /// More calls failed.
    Errors,
    /// Fewer calls came.
    TrafficFell,
}

impl Factor {
    /// The factor a verdict is about, if it is one.
    fn of(v: Verdict) -> Option<Self> {
        match v {
            Verdict::RateLimitContention => Some(Self::RateLimit),
            Verdict::UpstreamSlower => Some(Self::UpstreamSlower),
            Verdict::Queueing => Some(Self::Queueing),
            Verdict::Errors => Some(Self::Errors),
            Verdict::TrafficFell => Some(Self::TrafficFell),
            _ => None,
        }
    }
}

/// How long each window was: the rates of calls are compared per second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Windows {
    /// The baseline's length.
    pub baseline: Duration,
    /// The recent window's.
    pub recent: Duration,
}

impl Windows {
    /// How many calls the recent window would hold at the baseline's rate.
    fn expected(&self, baseline_calls: u64) -> f64 {
        baseline_calls as f64 * self.recent.as_secs_f64() / self.baseline.as_secs_f64().max(1e-9)
    }
}

/// A length said the way a person would: `5 min`, `90 s`.
fn span(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 && s.is_multiple_of(60) {
        format!("{} min", s / 60)
    } else {
        format!("{s} s")
    }
}

/// The explanation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Diagnosis {
    /// The conclusion.
    pub verdict: Verdict,
    /// It, in plain words, ending with what to do.
    pub summary: String,
    /// What to do about it, and the settings and metrics to look at.
    pub next: String,
    /// Every cause the figures show, the verdict's first.
    pub factors: Vec<Factor>,
    /// What changed, most telling first.
    pub changes: Vec<Change>,
    /// The baseline window's figures.
    pub baseline: Stats,
    /// The recent window's.
    pub recent: Stats,
}

/// A tail this much longer than the baseline's is a change (and one shorter is not news).
const TAIL_GROWTH: f64 = 1.25;
/// An upstream this many times slower is the cause when sluice's queue grew too: each slot
/// is held that much longer, so the same arrivals queue (Little's law).
const CAUSE_FACTOR: f64 = 2.0;
/// A rate this many points up is a change.
const RATE_POINTS: f64 = 0.01;
/// A lane's P99 is compared only over this many calls in both windows (below it, the P99 is
/// one of a handful of calls, and noise).
const MIN_LANE_CALLS: u64 = 200;
/// A baseline with fewer calls than this is no baseline: every figure of it is noise, and a
/// verdict against it (a P99 "from 0.00 s") would be invented.
pub const MIN_BASELINE_CALLS: u64 = 100;
/// A recent window with fewer calls than this is not judged: its P99 is one of a handful.
pub const MIN_RECENT_CALLS: u64 = 20;
/// Traffic fell when the recent window's rate is below this share of the baseline's.
const TRAFFIC_FELL: f64 = 0.2;

pub(super) fn rose(before: f64, after: f64) -> bool {
    after > before * TAIL_GROWTH && after - before > 0.05
}

pub(super) fn share_rose(before: f64, after: f64) -> bool {
    after - before >= RATE_POINTS && after > before * 1.5
}

/// What changed from `baseline` to `recent`, windows as long as `windows` says.
pub fn explain(baseline: &[Summary], recent: &[Summary], windows: Windows) -> Diagnosis {
    let (b, r) = (Stats::of(baseline), Stats::of(recent));
    if b.calls < MIN_BASELINE_CALLS {
        return no_baseline(b, r);
    }
    if r.calls < MIN_RECENT_CALLS {
        return no_traffic(b, r, windows);
    }
    let mut found = Found::between(&b, &r);
    let expected = windows.expected(b.calls);
    let fell = (r.calls as f64) < expected * TRAFFIC_FELL;
    if fell {
        found.changes.push(Change {
            what: format!("calls in {}", span(windows.recent)),
            before: expected,
            after: r.calls as f64,
            unit: "calls",
        });
    }
    let verdict = match found.verdict() {
        Verdict::Quiet if fell => Verdict::TrafficFell,
        v => v,
    };
    let summary = found.summary(verdict, &b, &r);
    let next = next_steps(verdict).to_string();
    Diagnosis {
        verdict,
        summary: format!("{summary}. What to do: {next}"),
        next,
        factors: found.factors(verdict, fell),
        changes: found.changes,
        baseline: b,
        recent: r,
    }
}

/// The answer when the recent window is too thin to judge: how many calls came against the
/// baseline, and no latency verdict.
fn no_traffic(b: Stats, r: Stats, windows: Windows) -> Diagnosis {
    let next = next_steps(Verdict::NoTraffic).to_string();
    let what = if r.calls == 0 {
        "no traffic"
    } else {
        "too few calls to judge"
    };
    let summary = format!(
        "{what}: {} calls in the last {} against {} in the baseline's {} ({:.0} at its rate). \
         What to do: {next}",
        r.calls,
        span(windows.recent),
        b.calls,
        span(windows.baseline),
        windows.expected(b.calls)
    );
    Diagnosis {
        verdict: Verdict::NoTraffic,
        summary,
        next,
        factors: Vec::new(),
        changes: Vec::new(),
        baseline: b,
        recent: r,
    }
}

/// The answer when the baseline is too thin to compare against: the recent window's own
/// figures, and no verdict.
fn no_baseline(b: Stats, r: Stats) -> Diagnosis {
    let next = next_steps(Verdict::NoBaseline).to_string();
    let summary = format!(
        "no baseline yet: {} calls in the baseline window, fewer than the {MIN_BASELINE_CALLS} a \
         comparison needs ({} calls in the recent window: P99 {:.2} s, rate-limited {:.1}%, \
         error rate {:.1}%). What to do: {next}",
        b.calls,
        r.calls,
        r.p99_total,
        r.rate_limited * 100.0,
        r.errors * 100.0
    );
    Diagnosis {
        verdict: Verdict::NoBaseline,
        summary,
        next,
        factors: Vec::new(),
        changes: Vec::new(),
        baseline: b,
        recent: r,
    }
}

#[cfg(test)]
mod tests;
