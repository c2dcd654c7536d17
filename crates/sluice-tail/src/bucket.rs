//! A bucket that refills continuously at a per-minute rate: how providers enforce requests-
//! and tokens-per-minute limits, and how sluice paces itself under them.

use std::time::Duration;

use tokio::time::Instant;

/// A bucket that refills `per_minute` units a minute and holds at most `capacity` (a limit
/// "quantised" to a shorter period, as providers enforce them, holds less than a minute's).
#[derive(Clone, Debug)]
pub struct MinuteBucket {
    per_minute: f64,
    capacity: f64,
    level: f64,
    at: Instant,
}

impl MinuteBucket {
    /// A full bucket refilling `per_minute`, holding `burst` (at least 1; a minute's worth
    /// when `None`), at `now`.
    pub fn new(per_minute: u64, burst: Option<u64>, now: Instant) -> Self {
        let capacity = burst.unwrap_or(per_minute).clamp(1, per_minute.max(1)) as f64;
        Self {
            per_minute: per_minute as f64,
            capacity,
            level: capacity,
            at: now,
        }
    }

    /// The configured per-minute limit.
    pub fn limit(&self) -> u64 {
        self.per_minute as u64
    }

    fn refill(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.level = (self.level + dt * self.per_minute / 60.0).min(self.capacity);
        self.at = now;
    }

    /// Units left at `now`.
    pub fn remaining(&mut self, now: Instant) -> u64 {
        self.refill(now);
        self.level.max(0.0) as u64
    }

    /// Time until `n` units are available at `now`.
    pub fn wait_for(&mut self, now: Instant, n: u64) -> Duration {
        self.refill(now);
        // A cost above the burst waits for a full bucket (it could never wait for more).
        let missing = (n as f64).min(self.capacity) - self.level;
        if missing <= 0.0 || self.per_minute <= 0.0 {
            return Duration::ZERO;
        }
        // At most a day: a rate too small to measure waits no longer.
        Duration::from_secs_f64((missing * 60.0 / self.per_minute).min(86_400.0))
    }

    /// Time until the bucket is full again.
    pub fn until_full(&mut self, now: Instant) -> Duration {
        self.wait_for(now, self.capacity as u64)
    }

    /// Returns `n` units taken by a request that was refused after all.
    pub fn refund(&mut self, n: u64) {
        self.level = (self.level + n as f64).min(self.capacity);
    }

    /// The most it holds.
    pub fn capacity(&self) -> u64 {
        self.capacity as u64
    }

    /// Follows a new limit and burst from `now` on, keeping what is left (never more than
    /// the new burst).
    pub fn reshape(&mut self, now: Instant, per_minute: u64, capacity: u64) {
        self.refill(now);
        self.per_minute = per_minute as f64;
        self.capacity = capacity.clamp(1, per_minute.max(1)) as f64;
        self.level = self.level.min(self.capacity);
    }

    /// Holds no more than `remaining` at `now` (what the provider says is left).
    pub fn at_most(&mut self, now: Instant, remaining: u64) {
        self.refill(now);
        self.level = self.level.min(remaining as f64);
    }

    /// Takes `n` units at `now` whether or not they are there: the level may go below zero,
    /// and refills from there (a debt, for a call that went before its cost was known).
    pub fn take(&mut self, now: Instant, n: u64) {
        self.refill(now);
        self.level -= n as f64;
    }

    /// Takes `n` units if there are enough.
    pub fn try_take(&mut self, now: Instant, n: u64) -> bool {
        self.refill(now);
        if self.level + 1e-9 >= n as f64 {
            self.level -= n as f64;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_admits_its_limit_then_refills_per_minute() {
        let t0 = Instant::now();
        let mut b = MinuteBucket::new(60, None, t0);
        let admitted = (0..120).filter(|_| b.try_take(t0, 1)).count();
        assert_eq!(admitted, 60);
        assert_eq!(b.wait_for(t0, 1), Duration::from_secs(1));
        assert!(!b.try_take(t0 + Duration::from_millis(999), 1));
        assert!(b.try_take(t0 + Duration::from_secs(1), 1));
        // Over the next minute exactly one more per second.
        let mut more = 0;
        for s in 2..=61 {
            while b.try_take(t0 + Duration::from_secs(s), 1) {
                more += 1;
            }
        }
        assert_eq!(more, 60);
    }

    #[test]
    fn a_quantised_bucket_admits_only_its_burst_at_once() {
        let t0 = Instant::now();
        let mut b = MinuteBucket::new(600, Some(20), t0);
        assert_eq!((0..100).filter(|_| b.try_take(t0, 1)).count(), 20);
        // Still 600 a minute on average: ten a second.
        let later = t0 + Duration::from_secs(1);
        assert_eq!((0..100).filter(|_| b.try_take(later, 1)).count(), 10);
        assert_eq!(b.limit(), 600);
    }
}
