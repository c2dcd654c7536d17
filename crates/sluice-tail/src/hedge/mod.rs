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
//! deployment may take its hedge ([`may_take`]), the budget with its line of waiting
//! requests ([`Hedging`], [`line`]), and one request's hedge from its start to its send or
//! its end, a step at a time ([`step`]). The gateway's race only carries it out.

pub mod body;
pub mod line;
pub mod step;

use tokio::time::{Duration, Instant};

pub use body::BodyQuantile;
pub use line::{FairBudget, Place};
pub use step::{Hedge, Look, Next, Window};

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

/// Which rule set the time of a hedge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DelayRule {
    /// The configured quantile of the upstream's whole window.
    Quantile,
    /// The quantile of the window's body, its stalls left out ([`body`]).
    BodyQuantile,
    /// The latest moment from which a hedge can still finish inside the deadline, which
    /// came before the quantile.
    Deadline,
}

impl DelayRule {
    /// A short label for the call record and `Server-Timing`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Quantile => "quantile",
            Self::BodyQuantile => "body_quantile",
            Self::Deadline => "deadline",
        }
    }
}

/// The quantile of the hedge target's body a hedge is expected to take to its first byte,
/// when the deadline decides how late it may leave: it leaves by the deadline minus this.
/// A later start filters the requests still waiting down to more of the doomed ones
/// (stalls), an earlier one gives the hedge more time; under a budget of a few percent the
/// product of the two (what one hedge rescues) peaks a little before the deadline minus the
/// target's median (for a lognormal body of sigma 0.5 and 10% stalls, at about its P60),
/// where a high percentile would send every hedge so early that the budget is spent on
/// requests that needed none.
pub const DEADLINE_TTFB_QUANTILE: f64 = 0.6;

/// The quantile of the target's body that says until when a hedge is still worth sending
/// for a request with a deadline: its median (a hedge leaving later lands in time less often
/// than not). A request waits in line for a token from [`DEADLINE_TTFB_QUANTILE`]'s moment
/// to this one's, so that the budget is not lost to requests that missed a token by a
/// moment.
pub const LAST_USEFUL_QUANTILE: f64 = 0.5;

/// The latest moment a hedge can leave and still have its first byte by `deadline`, given
/// the target's first byte at some quantile of its body.
pub fn latest_start(deadline: Option<Instant>, target_ttfb: Option<Duration>) -> Option<Instant> {
    deadline?.checked_sub(target_ttfb?)
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

/// How a model group hedges: `hedge = { ... }` of a `[models.GROUP]`, read as it is written
/// (every field optional, unknown fields refused). After the primary attempt has waited
/// longer than the `quantile` of its upstream's time to first byte, a copy goes to another
/// deployment; the first good first byte wins and the other attempt is cancelled.
#[derive(Clone, Copy, Debug, PartialEq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HedgePolicy {
    /// Hedge after this quantile of the upstream's time to first byte (0 to 1, exclusive).
    pub quantile: f64,
    /// Samples the latency window needs before hedging starts.
    pub min_samples: u64,
    /// Never hedge sooner than this.
    #[serde(with = "humantime_serde")]
    pub min_delay: Duration,
    /// Hedges allowed per request, on average (0.05: at most 5% extra requests).
    pub budget: f64,
    /// Hedges that may be spent at once after a quiet spell.
    pub burst: f64,
    /// Hedges earned per second whatever the traffic (so that a stuck request is hedged
    /// even when few others arrive to earn tokens).
    pub min_per_second: f64,
    /// The lanes whose requests are hedged (and earn the budget).
    pub lanes: HedgeLanes,
    /// Whether a hedge goes only to another deployment (else, in a group of one, to the same
    /// one: a stall of one request is its own, but a slowdown of the only upstream is not,
    /// and hedging it there adds load to what is already slow).
    pub elsewhere_only: bool,
}

/// Which lanes' requests a group hedges.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HedgeLanes {
    /// Every lane's.
    #[default]
    All,
    /// The first lane's only (the interactive one, by default): a batch call waits minutes
    /// anyway, and its hedge would spend the quota interactive calls need.
    First,
}

impl HedgeLanes {
    /// Whether requests of lane `lane` (its index, the first 0) are hedged.
    pub fn covers(self, lane: usize) -> bool {
        match self {
            Self::All => true,
            Self::First => lane == 0,
        }
    }
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
            lanes: HedgeLanes::All,
            elsewhere_only: false,
        }
    }
}

impl HedgePolicy {
    /// What a group hedges with when its configuration says nothing of hedging: the first
    /// lane's requests only, within 2% of them (plus 0.1 a second), after the upstream's
    /// P95 first byte, and only to another deployment. Writing `hedge` (`true` or a table)
    /// sets hedging from [`HedgePolicy::default`] instead: every lane, 5%.
    pub fn interactive() -> Self {
        Self {
            budget: 0.02,
            lanes: HedgeLanes::First,
            elsewhere_only: true,
            ..Self::default()
        }
    }
}

impl HedgePolicy {
    /// What is wrong with it, if anything: (field, message).
    pub fn problems(&self) -> Vec<crate::Problem> {
        let mut out = Vec::new();
        if !(self.quantile > 0.0 && self.quantile < 1.0) {
            out.push((
                "quantile",
                format!("must be between 0 and 1 (got {})", self.quantile),
            ));
        }
        if !(0.0..=1.0).contains(&self.budget) {
            out.push((
                "budget",
                format!("must be between 0 and 1 (got {})", self.budget),
            ));
        }
        if self.burst < 1.0 {
            out.push(("burst", format!("must be at least 1 (got {})", self.burst)));
        }
        if !(0.0..=100.0).contains(&self.min_per_second) {
            out.push((
                "min_per_second",
                format!("must be between 0 and 100 (got {})", self.min_per_second),
            ));
        }
        out
    }

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

    /// When an attempt is looked at next, knowing the deadline: the earlier of the observed
    /// quantile (of the window's body, when it has a cluster of stalls) and `latest`, the
    /// last moment from which a hedge can still finish in time ([`latest_start`]); never
    /// before `min_delay`. The rule that set the time comes with it. Without `latest`, as
    /// [`HedgePolicy::when`] over the body.
    pub fn when_by(
        &self,
        started: Instant,
        now: Instant,
        observed: Option<BodyQuantile>,
        latest: Option<Instant>,
    ) -> (When, Option<DelayRule>) {
        let Some(o) = observed else {
            return (When::Recheck(now + THIN_WINDOW_RECHECK), None);
        };
        let by_quantile = started + o.value.max(self.min_delay);
        let rule = if o.stalls > 0 {
            DelayRule::BodyQuantile
        } else {
            DelayRule::Quantile
        };
        match latest {
            Some(l) if l < by_quantile => (
                When::HedgeAt(l.max(started + self.min_delay)),
                Some(DelayRule::Deadline),
            ),
            _ => (When::HedgeAt(by_quantile), Some(rule)),
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
    fn with_a_deadline_the_hedge_leaves_in_time_to_finish_inside_it() {
        let p = HedgePolicy::default();
        let t = Instant::now();
        let ms = Duration::from_millis;
        let body = |value: u64, stalls: u64| {
            Some(BodyQuantile {
                value: ms(value),
                stalls,
            })
        };
        // P95 of 1.8 s, a 2 s deadline, a target whose body median is 1.3 s: leave by 0.7 s.
        let latest = latest_start(Some(t + ms(2_000)), Some(ms(1_300)));
        assert_eq!(latest, Some(t + ms(700)));
        assert_eq!(
            p.when_by(t, t, body(1_800, 0), latest),
            (When::HedgeAt(t + ms(700)), Some(DelayRule::Deadline))
        );
        // The quantile first: the deadline changes nothing.
        assert_eq!(
            p.when_by(t, t, body(500, 0), latest),
            (When::HedgeAt(t + ms(500)), Some(DelayRule::Quantile))
        );
        // Stalls left out of the window: the body's quantile sets it.
        assert_eq!(
            p.when_by(t, t, body(500, 12), None),
            (When::HedgeAt(t + ms(500)), Some(DelayRule::BodyQuantile))
        );
        // A deadline already too close: as soon as the floor allows (the target check then
        // says whether it is worth it).
        let late = latest_start(Some(t + ms(1_000)), Some(ms(1_300)));
        assert_eq!(late, t.checked_sub(ms(300)));
        assert_eq!(
            p.when_by(t, t, body(1_800, 0), late),
            (When::HedgeAt(t + p.min_delay), Some(DelayRule::Deadline))
        );
        // No deadline, or a thin window: today's behaviour.
        assert_eq!(latest_start(None, Some(ms(1))), None);
        assert_eq!(latest_start(Some(t), None), None);
        assert_eq!(
            p.when_by(t, t, None, latest),
            (When::Recheck(t + THIN_WINDOW_RECHECK), None)
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
