//! The benchmark's report: added latency at each rate beside the bare forwarder's, round by
//! round, the first byte for streams, CPU a request and a chunk, the peak RSS.

use super::{OverheadArgs, Point, RateResult};

/// The results as a table, round by round, with CPU and the peak RSS.
pub(super) fn print(a: &OverheadArgs, results: &[RateResult], rss: Option<f64>) {
    println!(
        "{:>8}  {:>8}  {:>22}  {:>22}  {:>22}",
        "rate/s", "requests", "direct P50/P99/P999", "sluice P50/P99/P999", "added P50/P99/P999"
    );
    for r in results {
        let f = |p: &Point| format!("{:.3}/{:.3}/{:.3}", p.p50_ms, p.p99_ms, p.p999_ms);
        println!(
            "{:>8.0}  {:>8}  {:>22}  {:>22}  {:>22}",
            r.rate,
            r.requests_each,
            f(&r.direct),
            f(&r.sluice),
            f(&r.added)
        );
        if let (Some(fw), Some(added)) = (&r.forwarder, &r.floor_added) {
            println!(
                "{:>8}  {:>8}  {:>22}  {:>22}  {:>22}   <- bare forwarder",
                "",
                "",
                "",
                f(fw),
                f(added)
            );
        }
        println!(
            "          added P99 round by round: {}",
            by_round(&r.added_by_round, r.added_round_median.as_ref())
        );
        if let Some(rounds) = &r.floor_added_by_round {
            println!(
                "          the bare forwarder's:     {}",
                by_round(rounds, r.floor_added_round_median.as_ref())
            );
        }
        if a.stream {
            println!(
                "          added first byte P50/P99/P999: {}",
                f(&r.added_ttfb)
            );
            if let Some(fw) = &r.floor_added_ttfb {
                println!("          the bare forwarder's:          {}", f(fw));
            }
        }
        let chunks = f64::from(r.chunks);
        if let Some(us) = r.sluice_cpu_us_per_request {
            println!(
                "          sluice used {us:.0} µs of CPU per request ({:.1} a chunk)",
                us / chunks
            );
        }
        if let Some(us) = r.forwarder_cpu_us_per_request {
            println!(
                "          the bare forwarder used {us:.0} µs of CPU per request ({:.1} a chunk)",
                us / chunks
            );
        }
        if let Some(n) = r.forwarder_errors.filter(|n| *n > 0) {
            println!("          ({n} requests through the bare forwarder failed)");
        }
        if r.sluice_errors > 0 {
            println!(
                "          ({} requests through sluice failed; by status, 0 = no answer: {:?})",
                r.sluice_errors, r.sluice_errors_by_status
            );
        }
    }
    println!("(milliseconds)\n");
    match rss {
        Some(m) => println!("sluice peak RSS: {m:.1} MiB"),
        None => println!("sluice peak RSS: unavailable (no /proc)"),
    }
}

/// `median +X ms (+a to +b over N rounds)` for the P99s of `rounds`.
fn by_round(rounds: &[Point], median: Option<&Point>) -> String {
    let p99 = rounds.iter().map(|p| p.p99_ms);
    let low = p99.clone().fold(f64::INFINITY, f64::min);
    let high = p99.fold(f64::NEG_INFINITY, f64::max);
    match median {
        Some(m) => format!(
            "median {:+.3} ms ({low:+.3} to {high:+.3} over {} rounds)",
            m.p99_ms,
            rounds.len()
        ),
        None => "no round recorded both paths".into(),
    }
}
