//! Hedging policy: when to send a second copy of a slow request, and how many such copies the
//! budget allows.
//!
//! After the primary attempt has been waiting longer than the observed quantile (P95 by
//! default) of its upstream's time to first byte, a hedge goes to another upstream; the first
//! good first byte wins and the loser is cancelled (Dean and Barroso, "The Tail at Scale").
//! Every request deposits `budget` tokens and every hedge spends one, so hedges stay below
//! that share of traffic; when everything is slow (an overload, where more copies would only
//! add load), the budget runs dry and hedging stops by itself.
//!
//! The whole decision is here: when an attempt is slow enough ([`HedgePolicy::when`]), which
//! deployment may take its hedge ([`may_take`]), and the budget with its line of waiting
//! requests ([`Hedging`], [`line`]). The gateway's dispatch only carries it out.

pub mod line;

use tokio::time::{Duration, Instant};

pub use line::{FairBudget, Place};

use crate::budget::Budget;
use crate::deadline::worth_trying;

/// How often a request whose upstream's latency window is still too thin to give a hedging
/// delay looks again (right after a start, or on a rarely used deployment).
pub const THIN_WINDOW_RECHECK: Duration = Duration::from_millis(250);

/// A model group's hedging: its policy, and its budget with the line of requests waiting for
/// a token.
#[derive(Debug)]
pub struct Hedging {
    /// When to hedge.
    pub policy: HedgePolicy,
    /// How many hedges are left to spend, and who waits for the next.
    pub budget: FairBudget,
}

impl Hedging {
    /// Hedging by `policy`, with a fresh budget.
    pub fn new(policy: HedgePolicy) -> Self {
        Self {
            budget: FairBudget::new(policy.budget()),
            policy,
        }
    }
}

/// When an attempt that has not answered is looked at next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// The upstream's window is too thin to give a delay: look again then.
    Recheck(Instant),
    /// Hedge then, if it has still not answered.
    HedgeAt(Instant),
}

/// What the glue knows of a deployment that could take a hedge now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Its breaker lets a call through.
    pub healthy: bool,
    /// It holds calls back: with a limiter, a 429's pause that is not over; without one, the
    /// quiet period after a 429 (a hedge would spend quota its next ordinary call needs).
    pub held_back: bool,
    /// Its median time to first byte, once its window knows it.
    pub median: Option<Duration>,
}

/// Whether `c` may take a hedge at `now` for a request due by `deadline`: healthy, not held
/// back, and its median first byte fits in what is left.
pub fn may_take(now: Instant, deadline: Option<Instant>, c: &Candidate) -> bool {
    c.healthy && !c.held_back && worth_trying(now, deadline, c.median)
}

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

    /// When an attempt that started at `started` is looked at next, given the upstream's
    /// `observed` quantile at `now`.
    pub fn when(&self, started: Instant, now: Instant, observed: Option<Duration>) -> When {
        match self.delay(observed) {
            Some(d) => When::HedgeAt(started + d),
            None => When::Recheck(now + THIN_WINDOW_RECHECK),
        }
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

    #[test]
    fn a_slow_attempt_is_hedged_after_the_quantile_and_a_thin_window_looks_again() {
        let p = HedgePolicy::default();
        let t = Instant::now();
        let later = t + Duration::from_millis(400);
        assert_eq!(
            p.when(t, later, Some(Duration::from_secs(2))),
            When::HedgeAt(t + Duration::from_secs(2))
        );
        assert_eq!(
            p.when(t, later, Some(Duration::from_millis(1))),
            When::HedgeAt(t + p.min_delay)
        );
        assert_eq!(
            p.when(t, later, None),
            When::Recheck(later + THIN_WINDOW_RECHECK)
        );
    }

    #[test]
    fn a_hedge_goes_only_where_it_is_healthy_free_and_in_time() {
        let t = Instant::now();
        let s = Duration::from_secs;
        let ok = Candidate {
            healthy: true,
            held_back: false,
            median: Some(s(1)),
        };
        assert!(may_take(t, Some(t + s(2)), &ok));
        assert!(may_take(t, None, &ok));
        let sick = Candidate {
            healthy: false,
            ..ok
        };
        assert!(!may_take(t, None, &sick), "its breaker is open");
        let paused = Candidate {
            held_back: true,
            ..ok
        };
        assert!(!may_take(t, None, &paused), "a 429 holds it back");
        assert!(
            !may_take(t, Some(t + Duration::from_millis(500)), &ok),
            "its median would outlast the deadline"
        );
        let unknown = Candidate { median: None, ..ok };
        assert!(may_take(t, Some(t + Duration::from_millis(1)), &unknown));
    }

    #[test]
    fn hedges_stay_within_the_budget_when_everything_is_slow() {
        let p = HedgePolicy::default();
        let mut b = p.budget();
        let mut hedges = 0;
        for _ in 0..10_000 {
            b.deposit();
            if b.try_spend(Instant::now()) {
                hedges += 1;
            }
        }
        // Every request wanted a hedge; 5% plus the starting (full) balance got one.
        assert!((500..=510).contains(&hedges), "{hedges}");
    }

    #[test]
    fn a_quiet_spell_saves_up_only_to_the_burst() {
        let p = HedgePolicy {
            budget: 0.5,
            burst: 3.0,
            ..HedgePolicy::default()
        };
        let mut b = p.budget();
        for _ in 0..100 {
            b.deposit();
        }
        let spent = (0..10).filter(|_| b.try_spend(Instant::now())).count();
        assert_eq!(spent, 3);
    }

    #[test]
    fn a_zero_budget_allows_no_hedge() {
        let p = HedgePolicy {
            budget: 0.0,
            ..HedgePolicy::default()
        };
        let mut b = p.budget();
        for _ in 0..100 {
            b.deposit();
        }
        assert!(!b.try_spend(Instant::now()));
    }
}
