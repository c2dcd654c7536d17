//! The body of a latency window, without its stalls: when an upstream's first bytes are a
//! body plus a distinct cluster of stalls, a percentile over the whole window lands in the
//! stalls as soon as they are more common than `1 - q`, and a hedge scheduled there comes
//! too late to help. The rule: sort the window's latencies, find the largest gap between
//! neighbours on a log scale; when it is at least [`STALL_GAP`] (a doubling) and the samples
//! above it are at most [`MAX_STALL_SHARE`] of the window, those are stalls and the
//! percentile is taken over the samples below it.

use tokio::time::Duration;

/// The smallest ratio between two neighbouring latencies that separates stalls from the
/// body. A lognormal body of sigma 0.5 has neighbours far closer than this in any window of
/// twenty samples or more.
pub const STALL_GAP: f64 = 2.0;

/// The largest share of a window that can be called stalls; beyond it the slow cluster is
/// the body itself.
pub const MAX_STALL_SHARE: f64 = 0.5;

/// A percentile of a window, and whether stalls were left out of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyQuantile {
    /// The latency at the quantile.
    pub value: Duration,
    /// Samples above the gap, left out (0 when no stall cluster was found).
    pub stalls: u64,
}

/// The latency at quantile `q` over the body of a window whose `(latency, count)` pairs, in
/// ascending order of latency, `buckets` gives (twice: once to find the gap, once to read
/// the quantile, so nothing is collected); `None` for an empty window.
pub fn body_quantile<I>(buckets: impl Fn() -> I, q: f64) -> Option<BodyQuantile>
where
    I: Iterator<Item = (Duration, u64)>,
{
    // First pass: the total, and the widest gap between neighbours (the latency above it,
    // the ratio, and how many samples lie at or above it).
    let mut total = 0u64;
    let mut prev: Option<Duration> = None;
    let mut widest: Option<(Duration, f64, u64)> = None;
    for (value, count) in buckets().filter(|(_, n)| *n > 0) {
        if let Some(lo) = prev.map(|p| p.as_secs_f64()).filter(|lo| *lo > 0.0) {
            let ratio = value.as_secs_f64() / lo;
            if widest.is_none_or(|(_, r, _)| ratio > r) {
                widest = Some((value, ratio, total));
            }
        }
        total += count;
        prev = Some(value);
    }
    if total == 0 {
        return None;
    }
    // Samples from `above` up are stalls when the gap is wide and they are few enough.
    let cut = widest.and_then(|(above, ratio, below)| {
        let stalls = total - below;
        (ratio >= STALL_GAP && stalls as f64 <= MAX_STALL_SHARE * total as f64)
            .then_some((above, stalls))
    });
    let (n, stalls) = match cut {
        Some((_, stalls)) => (total - stalls, stalls),
        None => (total, 0),
    };
    // Second pass: the smallest latency with at least q of the body at or below it.
    let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).max(1);
    let mut seen = 0;
    let mut last = None;
    for (value, count) in buckets().filter(|(_, c)| *c > 0) {
        if cut.is_some_and(|(above, _)| value >= above) {
            break;
        }
        seen += count;
        last = Some(value);
        if seen >= rank {
            break;
        }
    }
    last.map(|value| BodyQuantile { value, stalls })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// 90 body samples spread 300 ms to 3 s, plus `stalls` at 8.4 s.
    fn window(stalls: u64) -> Vec<(Duration, u64)> {
        let mut w: Vec<(Duration, u64)> = (0..90).map(|i| (ms(300 + i * 30), 1)).collect();
        if stalls > 0 {
            w.push((ms(8_400), stalls));
        }
        w
    }

    #[test]
    fn a_cluster_of_stalls_is_left_out_of_the_percentile() {
        // 10 of 100 are stalls: the whole window's P95 is a stall; the body's is not.
        let b = body_quantile(|| window(10).into_iter(), 0.95).unwrap();
        assert_eq!(b.stalls, 10);
        assert!(b.value < ms(3_000), "{:?}", b.value);
        assert!(b.value >= ms(2_800), "{:?}", b.value);
    }

    #[test]
    fn without_a_gap_the_window_is_all_body() {
        let b = body_quantile(|| window(0).into_iter(), 0.95).unwrap();
        assert_eq!(b.stalls, 0);
        assert_eq!(b.value, ms(300 + 85 * 30));
        // A slow tail that is not separated by a doubling is body too.
        let mut w = window(0);
        w.push((ms(4_500), 5));
        assert_eq!(
            body_quantile(|| w.clone().into_iter(), 0.95)
                .unwrap()
                .stalls,
            0
        );
    }

    #[test]
    fn a_slow_cluster_larger_than_half_is_the_body_itself() {
        let b = body_quantile(|| window(120).into_iter(), 0.95).unwrap();
        assert_eq!(b.stalls, 0);
        assert_eq!(b.value, ms(8_400));
    }

    #[test]
    fn an_empty_window_has_no_quantile() {
        assert_eq!(body_quantile(|| Vec::new().into_iter(), 0.95), None);
        assert_eq!(body_quantile(|| vec![(ms(5), 0)].into_iter(), 0.95), None);
        assert_eq!(
            body_quantile(|| vec![(ms(5), 1)].into_iter(), 0.5)
                .unwrap()
                .value,
            ms(5)
        );
    }
}
