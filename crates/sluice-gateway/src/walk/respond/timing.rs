//! `Server-Timing` and `x-sluice-route` as a client reads them, from the call's record.

use std::time::Duration;

use sluice_core::{AttemptOutcome, CallRecord};
use tokio::time::Instant;

/// Writes `d` in milliseconds with three decimals, rounded to the microsecond (integers
/// only: float formatting showed in profiles).
fn ms(out: &mut String, d: Duration) {
    // Integers written with itoa: this runs a few times a request, and `write!` of a u128
    // cost more than the rest of the header.
    let micros = u64::try_from((d.as_nanos() + 500) / 1000).unwrap_or(u64::MAX);
    let mut buf = itoa::Buffer::new();
    out.push_str(buf.format(micros / 1000));
    out.push('.');
    let frac = buf.format(1000 + micros % 1000);
    out.push_str(frac.get(1..).unwrap_or("000"));
}

/// `text` inside a quoted `Server-Timing` description (quotes and backslashes replaced).
fn push_quoted(out: &mut String, text: &str) {
    if text.contains(['"', '\\']) {
        out.push_str(&text.replace(['"', '\\'], "_"));
    } else {
        out.push_str(text);
    }
}

/// `x-sluice-route`, when a task route chose the group: `ROUTE: RULE -> GROUP`, then each
/// fallback taken, `; fallback FROM -> TO (REASON)`.
pub fn route_text(r: &CallRecord) -> Option<String> {
    let route = r.route.as_ref();
    if route.is_none() && r.fallbacks.is_empty() {
        return None;
    }
    let mut out = String::new();
    if let Some(t) = route {
        match &t.auto {
            Some(auto) => out.push_str(&crate::walk::auto::explain(t, auto)),
            None => out.push_str(&format!("{}: {} -> {}", t.route, t.rule, t.group)),
        }
    }
    for f in &r.fallbacks {
        if !out.is_empty() {
            out.push_str("; ");
        }
        out.push_str(&format!("fallback {} -> {} ({})", f.from, f.to, f.reason));
    }
    Some(out)
}

/// Starts the next `Server-Timing` entry with `text`.
fn part(out: &mut String, text: &str) {
    if !out.is_empty() {
        out.push_str(", ");
    }
    out.push_str(text);
}

/// `Server-Timing` (durations in milliseconds): `queue`, `upstream_ttfb`, one `attempt` per
/// attempt (`desc` = why it went, where, how it ended; `dur` = to its first byte or its end),
/// `cache;desc="hit"` or `"coalesced"` for an answer from the answer cache,
/// `hedge;desc="denied"` and `retry;desc="denied"` when a budget or the deadline stopped one,
/// `deadline` with the time left of the request's budget, and `total`.
///
/// For a stream the headers leave at the first byte, so `total` is the time to that byte
/// (marked with a description) and the winning attempt reads `first_byte`; the full
/// duration is in the call record and metrics.
pub fn server_timing(r: &CallRecord, now: Instant, stream: bool) -> String {
    let t = &r.timings;
    let mut out = String::with_capacity(96 + 64 * r.attempts.len());
    if let Some(q) = t.queue() {
        part(&mut out, "queue;dur=");
        ms(&mut out, q);
    }
    if let Some(u) = t.upstream_ttfb() {
        part(&mut out, "upstream_ttfb;dur=");
        ms(&mut out, u);
    }
    for a in &r.attempts {
        let until = a.first_byte.or(a.ended).unwrap_or(now);
        let outcome = match a.outcome {
            AttemptOutcome::Pending if a.first_byte.is_some() => "first_byte",
            o => o.label(),
        };
        part(&mut out, "attempt;desc=\"");
        out.push_str(a.kind.label());
        out.push(' ');
        push_quoted(&mut out, &a.upstream);
        out.push(' ');
        out.push_str(outcome);
        out.push_str("\";dur=");
        ms(&mut out, until.saturating_duration_since(a.started));
    }
    if let Some(c) = r.cache.filter(|c| c.served()) {
        part(&mut out, "cache;desc=\"");
        out.push_str(c.label());
        out.push('"');
    }
    for f in &r.fallbacks {
        part(&mut out, "fallback;desc=\"");
        push_quoted(&mut out, &f.from);
        out.push_str(" -> ");
        push_quoted(&mut out, &f.to);
        out.push(' ');
        out.push_str(f.reason);
        out.push('"');
    }
    if r.hedge_denied {
        part(&mut out, "hedge;desc=\"denied\"");
    }
    if r.retry_denied {
        part(&mut out, "retry;desc=\"denied\"");
    }
    if let Some(d) = t.deadline {
        part(&mut out, "deadline;desc=\"left\";dur=");
        ms(&mut out, d.saturating_duration_since(now));
    }
    let total = now.saturating_duration_since(t.received);
    if stream {
        part(&mut out, "total;desc=\"to first byte\";dur=");
    } else {
        part(&mut out, "total;dur=");
    }
    ms(&mut out, total);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(d: Duration) -> String {
        let mut s = String::new();
        ms(&mut s, d);
        s
    }

    #[test]
    fn durations_read_in_milliseconds_rounded_to_the_microsecond() {
        assert_eq!(shown(Duration::ZERO), "0.000");
        assert_eq!(shown(Duration::from_nanos(1_234_567)), "1.235");
        assert_eq!(shown(Duration::from_nanos(1_234_499)), "1.234");
        assert_eq!(shown(Duration::from_nanos(999_999_600)), "1000.000");
        assert_eq!(shown(Duration::from_secs(12)), "12000.000");
        assert_eq!(shown(Duration::from_micros(7)), "0.007");
    }
}
