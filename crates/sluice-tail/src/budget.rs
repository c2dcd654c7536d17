//! A budget for optional or repeated work (hedges, retries): every request deposits a
//! fraction of a token, every extra attempt spends a whole one, and savings are capped. The
//! extra attempts stay below that fraction of traffic, and when everything fails or is slow
//! at once (an overload, where more attempts only add load) the budget runs dry and they stop.
//!
//! A floor may add tokens with time as well (Finagle's and tower's reserve), so that a
//! quiet service can still retry its rare failure.

use tokio::time::{Duration, Instant};

/// Tokens for extra attempts.
#[derive(Clone, Debug, PartialEq)]
pub struct Budget {
    balance: f64,
    ratio: f64,
    burst: f64,
    per_second: f64,
    refilled: Option<Instant>,
}

impl Budget {
    /// A budget of `ratio` extra attempts per request, saving up to `burst`. It starts full,
    /// as a service that has been quiet would be (empty when `ratio` is zero).
    pub fn new(ratio: f64, burst: f64) -> Self {
        let ratio = ratio.max(0.0);
        let burst = burst.max(1.0);
        Self {
            balance: if ratio > 0.0 { burst } else { 0.0 },
            ratio,
            burst,
            per_second: 0.0,
            refilled: None,
        }
    }

    /// The same budget, also earning `per_second` tokens each second (the floor). A budget
    /// of zero stays zero: it means "none of this work", floor or not.
    pub fn with_floor(mut self, per_second: f64) -> Self {
        if self.ratio > 0.0 {
            self.per_second = per_second.max(0.0);
        }
        self
    }

    /// Credits one incoming request.
    pub fn deposit(&mut self) {
        self.balance = (self.balance + self.ratio).min(self.burst);
    }

    /// Gives back a token that was spent but not used (up to the burst).
    pub fn refund(&mut self) {
        self.balance = (self.balance + 1.0).min(self.burst);
    }

    /// Tokens saved now (whole extra attempts that may go).
    pub fn balance(&self) -> f64 {
        self.balance
    }

    /// Spends one extra attempt at `now` if the budget has it.
    pub fn try_spend(&mut self, now: Instant) -> bool {
        self.refill(now);
        if self.balance >= 1.0 {
            self.balance -= 1.0;
            true
        } else {
            false
        }
    }

    /// When the floor alone will have earned a whole token (a millisecond late, so that a
    /// spend then finds it), or `None` without a floor.
    pub fn whole_token_at(&self, now: Instant) -> Option<Instant> {
        if self.per_second <= 0.0 {
            return None;
        }
        let since = self.refilled.unwrap_or(now);
        let missing = (1.0 - self.balance).max(0.0);
        Some(since + Duration::from_secs_f64(missing / self.per_second) + Duration::from_millis(1))
    }

    fn refill(&mut self, now: Instant) {
        if self.per_second <= 0.0 {
            return;
        }
        if let Some(last) = self.refilled {
            let earned = now.saturating_duration_since(last).as_secs_f64() * self.per_second;
            self.balance = (self.balance + earned).min(self.burst);
        }
        self.refilled = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_earns_tokens_with_time_up_to_the_burst() {
        let t = Instant::now();
        let mut b = Budget::new(0.2, 2.0).with_floor(0.5);
        assert!(b.try_spend(t) && b.try_spend(t), "it starts full");
        assert!(!b.try_spend(t));
        // Two seconds earn one token, with no request at all.
        assert!(!b.try_spend(t + Duration::from_millis(1_900)));
        assert!(b.try_spend(t + Duration::from_millis(2_000)));
        // A long quiet spell saves only up to the burst.
        let later = t + Duration::from_secs(60);
        let spent = (0..10).filter(|_| b.try_spend(later)).count();
        assert_eq!(spent, 2);
        // Empty at `later`: the floor's next whole token is two seconds on.
        assert_eq!(
            b.whole_token_at(later),
            Some(later + Duration::from_millis(2_001))
        );
        assert_eq!(Budget::new(0.2, 2.0).whole_token_at(later), None);
    }

    #[test]
    fn without_a_floor_only_requests_earn() {
        let t = Instant::now();
        let mut b = Budget::new(0.5, 1.0);
        assert!(b.try_spend(t));
        assert!(!b.try_spend(t + Duration::from_secs(3600)));
        b.deposit();
        b.deposit();
        assert!(b.try_spend(t));
    }
}
