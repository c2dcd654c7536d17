//! The demo's report: the variants side by side, lane by lane in plain words, the queues,
//! the upstreams and the bill.

use super::*;

/// `1234567` → `1,234,567`.
pub(super) fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub(super) fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 10.0 {
        format!("{s:.1} s")
    } else {
        format!("{:.0} ms", s * 1000.0)
    }
}

/// One sentence per lane: how many waited longer than the SLO, and how many failed.
pub(super) fn plain_words(lane: &str, l: &LaneSummary, slo: Option<Duration>) -> String {
    let mut out = String::new();
    if let Some(slo) = slo {
        out.push_str(&format!(
            "{} of {} {lane} requests waited more than {}",
            thousands(l.over_slo),
            thousands(l.count),
            secs(slo)
        ));
    } else {
        out.push_str(&format!("{} {lane} requests", thousands(l.count)));
    }
    out.push_str(&format!("; the slowest answer took {}", secs(l.total.max)));
    let failed = l.count - l.ok;
    if failed > 0 {
        let parts: Vec<String> = l
            .errors_by_status
            .iter()
            .map(|(status, n)| match status {
                0 => format!("{n} got no answer"),
                429 => format!("{n} were refused by a rate limit (429)"),
                s => format!("{n} got {s}"),
            })
            .collect();
        out.push_str(&format!(
            ". {} failed: {}",
            thousands(failed),
            parts.join(", ")
        ));
    }
    out.push('.');
    out
}

pub(super) fn report(s: &Scenario, results: &[VariantResult]) {
    let Some(first) = results.first() else { return };
    println!("What clients saw, per lane (time from the scheduled send to the last byte):\n");
    for lane in lane_order(&first.summary.lanes) {
        let columns: Vec<(&str, &LaneSummary)> = results
            .iter()
            .filter_map(|r| r.summary.lanes.get(lane).map(|l| (r.name, l)))
            .collect();
        println!("{lane}");
        print!("{}", table(&columns));
        println!();
    }
    queue_table(results);
    bill_table(results);
    println!("In plain words:");
    for r in results {
        for lane in lane_order(&r.summary.lanes) {
            if let Some(l) = r.summary.lanes.get(lane) {
                println!("  {}: {}", r.name, plain_words(lane, l, s.meta.slo));
            }
        }
    }
    println!();
    println!("Against the plain proxy:");
    let base = facts(first);
    for r in &results[1..] {
        for sentence in super::against::against(&base, &facts(r)) {
            println!("  {sentence}");
        }
    }
    println!();
    for r in results {
        println!(
            "Upstreams behind {} (time to first byte as sluice measured it, last window):",
            r.name
        );
        println!(
            "  {:33} {:>9} {:>9} {:>9} {:>9}   {:>6} {:>6} {:>6} {:>7}",
            "deployment (answers)", "P50", "P95", "P99", "P999", "reqs", "429s", "5xx", "stalls"
        );
        for (group, m) in &s.models {
            for d in &m.deployments {
                upstream_rows(r, group, &d.display_name(), r.upstreams.get(&d.provider));
            }
        }
        println!();
    }
}

/// What a comparison with another column reads of `r`.
fn facts(r: &VariantResult) -> super::against::Facts<'_> {
    super::against::Facts {
        name: r.name,
        lanes: &r.summary.lanes,
        deepest_queue: &r.deepest_queue,
        upstream_429s: r.upstreams.values().map(|u| u.rate_limited).sum(),
        cost_micros: i128::from(r.bill.cost_micros),
        extra_micros: i128::from(r.bill.extra_micros),
    }
}

/// Per column: the 429s the upstreams answered, and the deepest each lane's queue in sluice
/// grew (`-` for a gateway without queues).
pub(super) fn queue_table(results: &[VariantResult]) {
    println!("Upstream 429s, and sluice's queues at their deepest (sampled every 200 ms)");
    print!("{:20}", "");
    for r in results {
        print!("{:>11}", r.name);
    }
    println!();
    print!("{:20}", "upstream 429s");
    for r in results {
        let n: u64 = r.upstreams.values().map(|u| u.rate_limited).sum();
        print!("{n:>11}");
    }
    println!();
    let lanes: std::collections::BTreeSet<&String> = results
        .iter()
        .flat_map(|r| r.deepest_queue.keys())
        .collect();
    for lane in lanes {
        print!("{:20}", format!("queued {lane}"));
        for r in results {
            match r.deepest_queue.get(lane) {
                Some(n) => print!("{n:>11}"),
                None => print!("{:>11}", "-"),
            }
        }
        println!();
    }
    println!();
}

/// Per column: the token bill from its usage ledger: tokens, what the provider's prompt cache
/// served, cost, what caching saved and what hedges and retries cost; and, where the semantic
/// cache was on, what its answers by meaning saved, what verifying spent, and the net.
pub(super) fn bill_table(results: &[VariantResult]) {
    println!("The token bill, from each column's usage ledger (US dollars)");
    print!("{:20}", "");
    for r in results {
        print!("{:>11}", r.name);
    }
    println!();
    type Cell = fn(&UsageRow) -> String;
    let rows: [(&str, Cell); 8] = [
        ("calls", |b| thousands(b.requests)),
        ("prompt tokens", |b| thousands(b.prompt_tokens)),
        ("  from cache", |b| {
            let pct = 100.0 * b.cached_tokens as f64 / b.prompt_tokens.max(1) as f64;
            format!("{pct:.0}%")
        }),
        ("output tokens", |b| thousands(b.completion_tokens)),
        ("cost", |b| dollars(i128::from(b.cost_micros))),
        ("  hedges, retries", |b| dollars(i128::from(b.extra_micros))),
        ("saved by caching", |b| dollars(i128::from(b.saved_micros))),
        ("hedges sent", |b| thousands(b.hedges)),
    ];
    // The semantic cache's rows, when some column used it.
    let semantic: [(&str, Cell); 5] = [
        ("answered by meaning", |b| thousands(b.semantic_hits)),
        ("  saved", |b| dollars(i128::from(b.semantic_saved_micros))),
        ("verified upstream", |b| thousands(b.verifications)),
        ("  spent verifying", |b| {
            dollars(i128::from(b.verification_micros))
        }),
        ("semantic net saving", |b| {
            dollars(i128::from(b.semantic_net_micros()))
        }),
    ];
    let used = results
        .iter()
        .any(|r| r.bill.semantic_hits > 0 || r.bill.verifications > 0);
    let semantic = semantic.into_iter().filter(|_| used);
    for (label, cell) in rows.into_iter().chain(semantic) {
        print!("{label:20}");
        for r in results {
            print!("{:>11}", cell(&r.bill));
        }
        println!();
    }
    println!();
}

/// Micro-units as dollars with four decimals.
pub(super) fn dollars(micros: i128) -> String {
    format!("{:.4}", micros as f64 / 1e6)
}

/// One row per way of answering (streamed, complete) of one deployment; the upstream's own
/// counts on the first.
pub(super) fn upstream_rows(r: &VariantResult, group: &str, name: &str, st: Option<&Stats>) {
    let st = st.cloned().unwrap_or_default();
    let rows = r
        .gateway
        .upstreams
        .iter()
        .filter(|u| u.group == group && u.upstream == name);
    for (i, u) in rows.enumerate() {
        let counts = if i == 0 {
            format!(
                "{:>6} {:>6} {:>6} {:>7}",
                st.requests,
                st.rate_limited,
                st.error_500 + st.error_503,
                st.stalls
            )
        } else {
            String::new()
        };
        let how = if u.mode == "stream" {
            "streamed"
        } else {
            "complete"
        };
        println!(
            "  {:33} {:>9} {:>9} {:>9} {:>9}   {counts}",
            format!("{name} ({how})"),
            secs(u.ttfb.p50),
            secs(u.ttfb.p95),
            secs(u.ttfb.p99),
            secs(u.ttfb.p999),
        );
    }
}

/// Lanes in reading order: interactive first, then the others alphabetically.
pub(super) fn lane_order(lanes: &BTreeMap<String, LaneSummary>) -> Vec<&String> {
    let mut names: Vec<&String> = lanes.keys().collect();
    names.sort_by_key(|n| (n.as_str() != "interactive", n.as_str()));
    names
}
