//! Histogram bucket bounds fine enough to read a P999 off Prometheus.
//!
//! Bounds grow by 2^(1/6) (about 12%) per bucket, so `histogram_quantile` interpolates within
//! 12% of the true value anywhere in the range, instead of a 10x step between 1 s and 10 s.

/// Bounds from `low` seconds up to at least `high`, six per doubling, rounded to 3 digits.
pub fn geometric(low: f64, high: f64) -> Vec<f64> {
    let step = 2f64.powf(1.0 / 6.0);
    let mut out = Vec::new();
    let mut k = 0i32;
    loop {
        let b = round3(low * step.powi(k));
        if out.last().is_none_or(|last| b > *last) {
            out.push(b);
        }
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

/// Buckets for LLM latencies: 10 ms to 120 s.
pub fn llm_latency() -> Vec<f64> {
    geometric(0.01, 120.0)
}

/// Buckets for time spent inside sluice: 10 µs to 10 s.
pub fn internal_latency() -> Vec<f64> {
    geometric(0.000_01, 10.0)
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
            assert!(ratio > 1.0 && ratio < 1.15, "{} -> {}", w[0], w[1]);
        }
        assert!(b.len() < 100, "{} buckets", b.len());
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
