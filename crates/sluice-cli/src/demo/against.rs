//! What each column gains and loses against the first (the plain proxy, its clients retrying
//! as the official SDKs do), line by line, with the cause the run's own figures show for each
//! line it loses, and what it costs more.

use std::collections::BTreeMap;
use std::time::Duration;

use sluice_sim::load::LaneSummary;

use super::report::{lane_order, secs, thousands};

/// The figures of one column a comparison reads.
pub(super) struct Facts<'a> {
    pub name: &'a str,
    pub lanes: &'a BTreeMap<String, LaneSummary>,
    /// The most requests waiting in the column's queues at once, per lane.
    pub deepest_queue: &'a BTreeMap<String, usize>,
    /// 429s the upstreams answered the column.
    pub upstream_429s: u64,
    /// What the column's calls cost, and what of it hedges and retries cost.
    pub cost_micros: i128,
    pub extra_micros: i128,
}

/// One line of a lane's comparison: its label, the column's and the base's figure as read,
/// and whether the column's is better, the same or worse.
struct Line {
    label: &'static str,
    ours: String,
    theirs: String,
    order: std::cmp::Ordering,
}

fn lines(ours: &LaneSummary, theirs: &LaneSummary) -> Vec<Line> {
    // Times within 3% of each other are the same: run-to-run noise, not a policy's doing.
    let time = |label, a: Duration, b: Duration| Line {
        label,
        ours: secs(a),
        theirs: secs(b),
        order: if a.abs_diff(b).as_secs_f64() <= 0.03 * a.max(b).as_secs_f64() {
            std::cmp::Ordering::Equal
        } else {
            a.cmp(&b)
        },
    };
    let count = |label, a: u64, b: u64| Line {
        label,
        ours: thousands(a),
        theirs: thousands(b),
        order: a.cmp(&b),
    };
    vec![
        time("first byte P99", ours.ttfb.p99, theirs.ttfb.p99),
        count("over SLO", ours.over_slo, theirs.over_slo),
        count("failed", ours.count - ours.ok, theirs.count - theirs.ok),
        time("total P50", ours.total.p50, theirs.total.p50),
        time("total P99", ours.total.p99, theirs.total.p99),
    ]
}

fn listed(ls: &[&Line]) -> String {
    ls.iter()
        .map(|l| format!("{} {} against {}", l.label, l.ours, l.theirs))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why `col`'s `lane` lost where it did, as far as its figures show it.
fn why(base: &Facts<'_>, col: &Facts<'_>, lane: &str, first: &str) -> String {
    let queued = col.deepest_queue.get(lane).copied().unwrap_or(0);
    if queued == 0 {
        return "the figures of this run do not show why".to_owned();
    }
    let mut out = format!("its calls waited in sluice's queue (up to {queued} at once)");
    if lane != first {
        out.push_str(&format!(" behind the {first} lane's"));
    }
    if base.upstream_429s > col.upstream_429s {
        out.push_str(&format!(
            " and under the upstream's rate limit, where the proxy sent them at once and met {} \
             429s ({} through sluice) that its clients waited out and sent again",
            thousands(base.upstream_429s),
            thousands(col.upstream_429s)
        ));
    }
    out
}

/// The sentences comparing `col` with `base`: per lane what is better and what is worse
/// (with why), then the cost.
pub(super) fn against(base: &Facts<'_>, col: &Facts<'_>) -> Vec<String> {
    let mut out = Vec::new();
    let order = lane_order(base.lanes);
    let first = order.first().map(|s| s.as_str()).unwrap_or("");
    for lane in order {
        let (Some(ours), Some(theirs)) = (col.lanes.get(lane), base.lanes.get(lane)) else {
            continue;
        };
        let ls = lines(ours, theirs);
        let better: Vec<&Line> = ls.iter().filter(|l| l.order.is_lt()).collect();
        let worse: Vec<&Line> = ls.iter().filter(|l| l.order.is_gt()).collect();
        let mut s = format!("{} against proxy, {lane}:", col.name);
        if !better.is_empty() {
            s.push_str(&format!(" better on {}", listed(&better)));
        }
        if !worse.is_empty() {
            s.push_str(if better.is_empty() { " " } else { "; " });
            s.push_str(&format!(
                "worse on {}, because {}",
                listed(&worse),
                why(base, col, lane, first)
            ));
        }
        if better.is_empty() && worse.is_empty() {
            s.push_str(" the same on every line");
        }
        s.push('.');
        out.push(s);
    }
    let more = col.cost_micros - base.cost_micros;
    let pct = 100.0 * more as f64 / base.cost_micros.max(1) as f64;
    let usd = |m: i128| format!("${:.4}", m as f64 / 1e6);
    out.push(format!(
        "{} against proxy, the bill: {} against {} ({pct:+.1}%), of which hedges and retries {}.",
        col.name,
        usd(col.cost_micros),
        usd(base.cost_micros),
        usd(col.extra_micros)
    ));
    out
}
