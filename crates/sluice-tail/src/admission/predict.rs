//! Refusing at arrival, not after the wait: while a lane's queue is backlogged, how fast it
//! drains is measured (its grants since it began to wait), and a newcomer whose predicted wait
//! (the requests ahead of it, plus itself, over that rate) exceeds the lane's `max_wait` is
//! refused at once, told when to come back by the same prediction. Until the queue has
//! drained for [`OBSERVED_FOR`] and at least [`MIN_GRANTS`] times nothing is predicted, and
//! requests queue as before; a prediction past [`MARGIN`] of `max_wait` refuses; one accepted
//! and then timed out is a counted misprediction.

use std::time::Duration;

use tokio::time::Instant;

/// How long a queue must have been draining before its rate is trusted.
pub const OBSERVED_FOR: Duration = Duration::from_secs(2);

/// How many grants a queue must have made before its rate is trusted.
pub const MIN_GRANTS: u32 = 3;

/// The share of `max_wait` a predicted wait may take: the rate is measured, not known, and a
/// request accepted at the edge would otherwise time out as often as not.
pub const MARGIN: f64 = 0.9;

/// One lane's backlog: since when its queue has held someone, and how many it has granted
/// since.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Backlog {
    since: Option<Instant>,
    granted: u32,
}

impl Backlog {
    /// Since when the lane's queue has held someone, if it does.
    pub(crate) fn since(&self) -> Option<Instant> {
        self.since
    }

    /// Someone joined the lane's queue at `now`.
    pub(crate) fn queued(&mut self, now: Instant) {
        self.since.get_or_insert(now);
    }

    /// The lane granted a waiter at `now`; `empty`: nobody waits in it any more.
    pub(crate) fn granted(&mut self, empty: bool) {
        if empty {
            *self = Self::default();
        } else if self.since.is_some() {
            self.granted = self.granted.saturating_add(1);
        }
    }

    /// Nobody waits any more (they gave up): the next backlog is measured afresh.
    pub(crate) fn cleared(&mut self) {
        *self = Self::default();
    }

    /// The wait of a newcomer with `ahead` requests before it, at `now`; `None` while too
    /// little is known of the rate.
    pub(crate) fn predicted(&self, ahead: usize, now: Instant) -> Option<Duration> {
        let observed = now.saturating_duration_since(self.since?);
        if observed < OBSERVED_FOR || self.granted < MIN_GRANTS {
            return None;
        }
        let rate = f64::from(self.granted) / observed.as_secs_f64();
        Some(Duration::from_secs_f64((ahead as f64 + 1.0) / rate))
    }

    /// The predicted wait of a newcomer with `ahead` before it, when it is too long for a
    /// lane that lets a request wait `max_wait` (refuse it); `None`: let it queue.
    pub(crate) fn refuses(
        &self,
        ahead: usize,
        now: Instant,
        max_wait: Duration,
    ) -> Option<Duration> {
        self.predicted(ahead, now)
            .filter(|wait| wait.as_secs_f64() > max_wait.as_secs_f64() * MARGIN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_predicted_until_the_queue_has_drained_a_while() {
        let t0 = Instant::now();
        let mut b = Backlog::default();
        assert_eq!(b.predicted(10, t0), None);
        b.queued(t0);
        for _ in 0..5 {
            b.granted(false);
        }
        assert_eq!(
            b.predicted(10, t0 + Duration::from_secs(1)),
            None,
            "too soon"
        );
        // Five grants in 2.5 s: two a second; eleven to go take 5.5 s.
        let at = t0 + Duration::from_millis(2_500);
        let wait = b.predicted(10, at).unwrap();
        assert!((wait.as_secs_f64() - 5.5).abs() < 1e-9, "{wait:?}");
        assert_eq!(b.refuses(10, at, Duration::from_secs(7)), None);
        assert!(
            b.refuses(10, at, Duration::from_secs(6)).is_some(),
            "5.5 s is past 90% of 6 s"
        );
        b.granted(true);
        assert_eq!(b.predicted(10, at), None, "an emptied queue starts afresh");
    }
}
