//! What rose or fell beyond noise between two windows, the verdict the changes point to,
//! and the sentence that says it with its figures.

use std::fmt::Write;

use super::{CAUSE_FACTOR, Change, Factor, MIN_LANE_CALLS, Stats, Verdict, rose, share_rose};

/// What rose or fell beyond noise between two windows, and the changes said in words.
pub(super) struct Found {
    pub(super) changes: Vec<Change>,
    /// A lane's P99 grew.
    tail_grew: bool,
    /// The slowest calls' queue in sluice grew.
    queue_grew: bool,
    /// Their retries and pauses after 429s grew.
    waits_grew: bool,
    /// The upstream's own attempts got slower.
    upstream_grew: bool,
    /// By how many times (1 when they did not).
    upstream_factor: f64,
    /// The rate-limited share rose.
    limited: bool,
    /// The error rate rose.
    errors: bool,
    /// The upstreams whose own first byte got slower.
    slower_upstreams: Vec<String>,
}

impl Found {
    /// The changes from `b` to `r`.
    pub(super) fn between(b: &Stats, r: &Stats) -> Self {
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
        let waits_grew = rose(b.slow_waits, r.slow_waits);
        let (upstream_grew, upstream_factor) = upstream_growth(b, r);
        if queue_grew {
            push(
                "queue of the slowest 5%".into(),
                b.slow_queue,
                r.slow_queue,
                "s",
            );
        }
        if waits_grew {
            push(
                "retries and pauses after 429s of the slowest 5%".into(),
                b.slow_waits,
                r.slow_waits,
                "s",
            );
        }
        if upstream_grew {
            push(
                "the upstream's own first byte (or wait for one) of the slowest 5%".into(),
                b.slow_attempt,
                r.slow_attempt,
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
            push(
                "rate-limited share".into(),
                b.rate_limited,
                r.rate_limited,
                "%",
            );
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
        let slower_upstreams: Vec<String> = slower_upstreams(b, r)
            .map(|(up, before, after)| {
                push(
                    format!("upstream {up} attempts' own first byte P99"),
                    before,
                    after,
                    "s",
                );
                up.clone()
            })
            .collect();
        Self {
            changes,
            tail_grew,
            queue_grew,
            waits_grew,
            upstream_grew,
            upstream_factor,
            limited,
            errors,
            slower_upstreams,
        }
    }

    /// Every cause the figures show, the verdict's first.
    pub(super) fn factors(&self, verdict: Verdict, fell: bool) -> Vec<Factor> {
        let mut out: Vec<Factor> = [
            (self.limited, Factor::RateLimit),
            (self.upstream_grew, Factor::UpstreamSlower),
            (self.queue_grew, Factor::Queueing),
            (self.errors, Factor::Errors),
            (fell, Factor::TrafficFell),
        ]
        .into_iter()
        .filter_map(|(shown, f)| shown.then_some(f))
        .collect();
        if let Some(first) = Factor::of(verdict) {
            out.retain(|f| *f != first);
            out.insert(0, first);
        }
        out
    }

    /// The verdict the changes point to.
    pub(super) fn verdict(&self) -> Verdict {
        let Self {
            tail_grew,
            queue_grew,
            waits_grew,
            upstream_grew,
            limited,
            errors,
            ..
        } = *self;
        if limited && (tail_grew || queue_grew || waits_grew || !upstream_grew) {
            Verdict::RateLimitContention
        } else if upstream_grew && (!queue_grew || self.upstream_factor >= CAUSE_FACTOR) {
            // An upstream this much slower holds every slot that much longer: the queue that
            // grew behind it is its consequence.
            Verdict::UpstreamSlower
        } else if queue_grew {
            Verdict::Queueing
        } else if errors {
            Verdict::Errors
        } else if tail_grew {
            Verdict::Unexplained
        } else {
            Verdict::Quiet
        }
    }

    /// The verdict's sentence, with the figures that show it.
    pub(super) fn summary(&self, verdict: Verdict, b: &Stats, r: &Stats) -> String {
        let (queue_grew, waits_grew, upstream_grew) =
            (self.queue_grew, self.waits_grew, self.upstream_grew);
        let slower_upstreams = &self.slower_upstreams;
        let words: Vec<String> = self.changes.iter().map(Change::words).collect();
        // The upstream's own figure, said the same way under every verdict: its attempts' first
        // byte, each from its own start, never the time from dispatch.
        let own = own_first_byte(b, r);
        // Where the slowest calls waited, unless the changes above already say it.
        let waits = if queue_grew || waits_grew {
            String::new()
        } else {
            format!(
                "; the slowest 5% spent {:.2} s -> {:.2} s in sluice's queue and {:.2} s -> {:.2} s in retries and pauses after 429s",
                b.slow_queue, r.slow_queue, b.slow_waits, r.slow_waits
            )
        };
        match verdict {
            Verdict::Quiet => format!(
                "nothing is wrong: {} calls against {} in the baseline, the tail and the rates within noise (P99 {:.2} s -> {:.2} s)",
                r.calls, b.calls, b.p99_total, r.p99_total
            ),
            Verdict::RateLimitContention if upstream_grew => format!(
                "rate-limit contention, and the upstream is slower too: {}; {own}{waits}",
                words.join(", ")
            ),
            Verdict::RateLimitContention => format!(
                "rate-limit contention, not a slower LLM: {}; {own}{waits}",
                words.join(", ")
            ),
            Verdict::Queueing if upstream_grew => format!(
                "sluice is queueing, and the upstream is slower too{}, {:.1} times: {}; no rate limit met (no 429, no wait for the provider's pace), {own}",
                named(slower_upstreams),
                self.upstream_factor,
                words.join(", ")
            ),
            Verdict::Queueing => format!(
                "sluice is queueing: {}; no rate limit met (no 429, no wait for the provider's pace), {own}",
                words.join(", ")
            ),
            Verdict::UpstreamSlower if queue_grew => format!(
                "the upstream got slower{}, {:.1} times, and sluice queued behind it (each slot is held that much longer): {}; {own}",
                named(slower_upstreams),
                self.upstream_factor,
                words.join(", ")
            ),
            Verdict::UpstreamSlower => format!(
                "the upstream got slower{}: {}; sluice's queue unchanged; {own}",
                named(slower_upstreams),
                words.join(", ")
            ),
            Verdict::Errors => format!("calls fail more: {}", words.join(", ")),
            Verdict::Unexplained => format!(
                "the tail grew and no single cause stands out: {}",
                words.join(", ")
            ),
            Verdict::TrafficFell => format!(
                "traffic fell, and the calls that came look as before: {}",
                words.join(", ")
            ),
            Verdict::NoBaseline | Verdict::NoTraffic => String::new(),
        }
    }
}

/// Whether the upstream's own attempts got slower from `b` to `r`, and how many times (the
/// larger of the slowest calls' and the P99's growth; 1 when they did not). Only its own
/// attempts count: a first byte measured from dispatch also holds retries and pauses after
/// 429s, which are the rate limit's.
fn upstream_growth(b: &Stats, r: &Stats) -> (bool, f64) {
    let p99_rose = match (b.attempt_ttfb_p99, r.attempt_ttfb_p99) {
        (Some(before), Some(after)) => rose(before, after),
        _ => false,
    };
    let grew = rose(b.slow_attempt, r.slow_attempt) || p99_rose;
    let factor = [
        Some((b.slow_attempt, r.slow_attempt)),
        b.attempt_ttfb_p99.zip(r.attempt_ttfb_p99),
    ]
    .into_iter()
    .flatten()
    .filter(|(before, _)| *before > 0.0)
    .map(|(before, after)| after / before)
    .fold(1.0, f64::max);
    (grew, factor)
}

/// ` (a, b)` naming the upstreams, or nothing when none is known by name.
fn named(upstreams: &[String]) -> String {
    if upstreams.is_empty() {
        String::new()
    } else {
        format!(" ({})", upstreams.join(", "))
    }
}

/// The upstream's own first byte in both windows, each attempt from its own start, over the
/// calls that had one; a window where none had one says so instead of a figure.
fn own_first_byte(b: &Stats, r: &Stats) -> String {
    let p99 = |s: &Stats| match s.attempt_ttfb_p99 {
        Some(v) => format!("{v:.2} s"),
        None => "none".to_string(),
    };
    let mut out = format!(
        "the upstream's attempts answered their first byte at P99 {} -> {} (each from its own start)",
        p99(b),
        p99(r)
    );
    if r.unanswered > 0 {
        let _ = write!(
            out,
            "; {} of the recent calls' attempts never had a first byte (not in the P99)",
            r.unanswered
        );
    }
    out
}

/// The upstreams whose attempts' own first byte P99 rose from `b` to `r`, with both figures.
fn slower_upstreams<'a>(
    b: &'a Stats,
    r: &'a Stats,
) -> impl Iterator<Item = (&'a String, f64, f64)> + 'a {
    r.upstream_p99.iter().filter_map(|(up, after)| {
        let before = b
            .upstream_p99
            .iter()
            .find(|(u, _)| u == up)
            .map(|(_, v)| *v)?;
        rose(before, *after).then_some((up, before, *after))
    })
}
