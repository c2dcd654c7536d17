//! Hedging policy: when to send a second copy of a slow request, and how many such copies the
//! budget allows.
//!
//! After the primary attempt has been waiting longer than the observed quantile (P95 by
//! default) of its upstream's time to first byte, a hedge goes to another upstream; the first
//! good first byte wins and the loser is cancelled (Dean and Barroso, "The Tail at Scale").
//! Every request deposits `budget` tokens and every hedge spends one, so hedges stay below
//! that share of traffic; when everything is slow (an overload, where more copies would only
//! add load), the budget runs dry and hedging stops by itself.

use std::time::Duration;

use crate::budget::Budget;

/// How a model group hedges.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HedgePolicy {
    /// Hedge after this quantile of the upstream's time to first byte.
    pub quantile: f64,
    /// Samples the latency window needs before hedging starts.
    pub min_samples: u64,
    /// Never hedge sooner than this.
    pub min_delay: Duration,
    /// Hedges allowed per request, on average (0.05: at most 5% extra requests).
    pub budget: f64,
    /// Hedges that may be spent at once after a quiet spell.
    pub burst: f64,
    /// Hedges earned per second whatever the traffic (so that a stuck request is hedged
    /// even when few others arrive to earn tokens).
    pub min_per_second: f64,
}

impl Default for HedgePolicy {
    fn default() -> Self {
        Self {
            quantile: 0.95,
            min_samples: 20,
            min_delay: Duration::from_millis(10),
            budget: 0.05,
            burst: 10.0,
            min_per_second: 0.1,
        }
    }
}

impl HedgePolicy {
    /// A fresh budget for this policy.
    pub fn budget(&self) -> Budget {
        Budget::new(self.budget, self.burst).with_floor(self.min_per_second)
    }

    /// The hedge delay given the observed quantile (`None` while the window is too thin: no
    /// hedge rather than a guess).
    pub fn delay(&self, observed: Option<Duration>) -> Option<Duration> {
        observed.map(|d| d.max(self.min_delay))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_is_the_observed_quantile_but_never_below_the_floor() {
        let p = HedgePolicy::default();
        assert_eq!(p.delay(None), None);
        assert_eq!(
            p.delay(Some(Duration::from_secs(2))),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            p.delay(Some(Duration::from_millis(1))),
            Some(Duration::from_millis(10))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn hedges_stay_within_the_budget_when_everything_is_slow() {
        let p = HedgePolicy::default();
        let mut b = p.budget();
        let mut hedges = 0;
        for _ in 0..10_000 {
            b.deposit();
            if b.try_spend(tokio::time::Instant::now()) {
                hedges += 1;
            }
        }
        // Every request wanted a hedge; 5% plus the starting (full) balance got one.
        assert!((500..=510).contains(&hedges), "{hedges}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_spell_saves_up_only_to_the_burst() {
        let p = HedgePolicy {
            budget: 0.5,
            burst: 3.0,
            ..HedgePolicy::default()
        };
        let mut b = p.budget();
        for _ in 0..100 {
            b.deposit();
        }
        let spent = (0..10)
            .filter(|_| b.try_spend(tokio::time::Instant::now()))
            .count();
        assert_eq!(spent, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_zero_budget_allows_no_hedge() {
        let p = HedgePolicy {
            budget: 0.0,
            ..HedgePolicy::default()
        };
        let mut b = p.budget();
        for _ in 0..100 {
            b.deposit();
        }
        assert!(!b.try_spend(tokio::time::Instant::now()));
    }
}
