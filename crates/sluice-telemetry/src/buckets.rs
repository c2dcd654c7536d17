//! Histogram bucket bounds fine where a P999 is read and coarse where only a median is.
//!
//! Below `fine_from` bounds grow by 2^(1/2) (41%) a bucket, above it by 2^(1/4) (19%), so
//! `histogram_quantile` reads the tail within a few percent instead of a 10x step between
//! 1 s and 10 s, without a hundred buckets a series (a scrape of a few groups was 155 KB).

/// Bounds from `low` seconds up to at least `high`: two per doubling below `fine_from`, four
/// per doubling from it, each rounded to 3 digits.
pub fn geometric(low: f64, fine_from: f64, high: f64) -> Vec<f64> {
    let mut out: Vec<f64> = Vec::new();
    let mut push = |b: f64| {
        if out.last().is_none_or(|last| b > *last) {
            out.push(b);
        }
    };
    let mut k = 0;
    while low * 2f64.powf(f64::from(k) / 2.0) < fine_from * 0.999 {
        push(round3(low * 2f64.powf(f64::from(k) / 2.0)));
        k += 1;
    }
    let mut k = 0;
    loop {
        let b = round3(fine_from * 2f64.powf(f64::from(k) / 4.0));
        push(b);
        if b >= high {
            return out;
        }
        k += 1;
    }
}

/// `x` to three significant digits, as the double nearest that decimal, so that Prometheus
/// prints `0.206` and not `0.20600000000000003`.
fn round3(x: f64) -> f64 {
    format!("{x:.2e}").parse().unwrap_or(x)
}

/// Buckets for LLM latencies: 10 ms to 120 s, fine from 1 s (where tails sit).
pub fn llm_latency() -> Vec<f64> {
    geometric(0.01, 1.0, 120.0)
}

/// Buckets for time spent inside sluice: 10 µs to 10 s, fine from 1 ms.
pub fn internal_latency() -> Vec<f64> {
    geometric(0.000_01, 0.001, 10.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llm_buckets_cover_the_range_finely() {
        let b = llm_latency();
        assert!(b[0] <= 0.01 + 1e-12);
        assert!(*b.last().unwrap() >= 120.0);
        for w in b.windows(2) {
            let ratio = w[1] / w[0];
            // Fine (19%, with rounding) where tails are read, coarser (41%) below 1 s.
            let most = if w[0] >= 1.0 { 1.22 } else { 1.45 };
            assert!(ratio > 1.0 && ratio < most, "{} -> {}", w[0], w[1]);
        }
        assert!(b.len() < 50, "{} buckets", b.len());
    }

    #[test]
    fn bounds_print_as_short_decimals() {
        for b in llm_latency().into_iter().chain(internal_latency()) {
            let shown = b.to_string();
            let digits = shown.trim_start_matches(['0', '.']).replace('.', "");
            assert!(digits.len() <= 3, "{shown}");
        }
    }

    #[test]
    fn internal_buckets_start_at_ten_microseconds() {
        let b = internal_latency();
        assert!((b[0] - 0.000_01).abs() < 1e-12);
        assert!(*b.last().unwrap() >= 10.0);
    }
}
