//! Whether a late attempt (a retry, a hedge) is still worth sending: only if the target's
//! median time to first byte fits in what the request's deadline leaves.

use tokio::time::{Duration, Instant};

/// Samples a target's latency window needs before its median is trusted to refuse a late
/// attempt; below that the attempt goes (no refusal on a guess).
pub const MEDIAN_MIN_SAMPLES: u64 = 20;

/// Whether an attempt leaving at `at` could answer before `deadline`: always without a
/// deadline or while the target's `median` first byte is unknown; else whether the median
/// fits in what is left.
pub fn worth_trying(at: Instant, deadline: Option<Instant>, median: Option<Duration>) -> bool {
    let Some(deadline) = deadline else {
        return true;
    };
    let left = deadline.saturating_duration_since(at);
    median.is_none_or(|m| m <= left)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attempt_goes_unless_the_median_outlasts_the_deadline() {
        let t = Instant::now();
        let s = Duration::from_secs;
        assert!(worth_trying(t, None, Some(s(100))), "no deadline");
        assert!(worth_trying(t, Some(t + s(1)), None), "median unknown");
        assert!(worth_trying(t, Some(t + s(2)), Some(s(2))), "just fits");
        assert!(!worth_trying(t, Some(t + s(2)), Some(s(3))), "too late");
        assert!(
            !worth_trying(t + s(5), Some(t + s(2)), Some(Duration::from_millis(1))),
            "past the deadline nothing that takes time fits"
        );
    }
}
