//! Retry policy: whether a failed attempt is tried again, where, after how long, and the
//! budget that keeps retries from turning an upstream's bad minute into a storm.
//!
//! The whole decision is [`Retrying::decide`]: the glue gathers the facts (what failed, how
//! many tries, where a retry could go and that target's median first byte, the deadline)
//! and carries out the answer (sleep, then try the target).

use parking_lot::Mutex;
use tokio::time::{Duration, Instant};

use crate::budget::Budget;
use crate::deadline::worth_trying;
use crate::pace::wait_after_429;

/// Attempts in all for a call whose 429s are retried at their deployment through its pacer
/// (see [`Retrying::decide`]).
pub const PACED_TRIES: u32 = 10;

/// How a model group retries failed attempts: `retry = { ... }` of a `[models.GROUP]`, read
/// as it is written (every field optional, unknown fields refused). A failed attempt (a 429,
/// a 5xx, a timeout, a lost connection) is tried again, on another deployment when one is
/// free, after `retry-after` for a 429, within the lane's `max_wait`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// Retries allowed per request on average (0.2: at most 20% extra requests).
    pub budget: f64,
    /// Retries that may be spent at once after a quiet spell.
    pub burst: f64,
    /// Retries earned per second whatever the traffic (the floor that lets a quiet service
    /// retry its rare failure).
    pub min_per_second: f64,
    /// Base of the backoff between attempts that failed fast (not configurable).
    #[serde(skip)]
    pub backoff_base: Duration,
    /// Longest backoff (not configurable).
    #[serde(skip)]
    pub backoff_cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            budget: 0.2,
            burst: 10.0,
            min_per_second: 0.5,
            backoff_base: Duration::from_millis(25),
            backoff_cap: Duration::from_millis(250),
        }
    }
}

impl RetryPolicy {
    /// What is wrong with it, if anything: (field, message).
    pub fn problems(&self) -> Vec<crate::Problem> {
        let mut out = Vec::new();
        if !(1..=10).contains(&self.max_attempts) {
            out.push(("max_attempts", "must be between 1 and 10".into()));
        }
        if !(0.0..=1.0).contains(&self.budget) {
            out.push(("budget", "must be between 0 and 1".into()));
        }
        if !(self.min_per_second >= 0.0 && self.min_per_second <= 1000.0) {
            out.push(("min_per_second", "must be between 0 and 1000".into()));
        }
        out
    }

    /// A fresh budget for this policy.
    pub fn budget(&self) -> Budget {
        Budget::new(self.budget, self.burst).with_floor(self.min_per_second)
    }

    /// The wait before retry number `n` (1 for the first retry): "full jitter", uniform in
    /// `[0, min(cap, base × (2^n − 1)))`, with `unit` in `[0, 1)` supplying the randomness
    /// (from the request id, so runs repeat).
    pub fn backoff(&self, n: u32, unit: f64) -> Duration {
        let factor = 2f64.powi(n.min(16) as i32) - 1.0;
        let ceiling = self.backoff_base.mul_f64(factor).min(self.backoff_cap);
        ceiling.mul_f64(unit.clamp(0.0, 1.0))
    }
}

/// A model group's retries: its policy and its budget.
#[derive(Debug)]
pub struct Retrying {
    /// How to retry.
    pub policy: RetryPolicy,
    /// How many retries are left to spend.
    pub budget: Mutex<Budget>,
}

/// What a failed attempt was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The upstream answered 429: a retry at the same deployment waits what it asked for.
    pub rate_limited: bool,
    /// The error is one that another try could mend (not the client's own).
    pub retryable: bool,
    /// What the upstream's `retry-after` asked for, if it said.
    pub retry_after: Option<Duration>,
    /// The failed deployment's requests are paced (by a limit configured, announced or
    /// learnt): a 429 that asked for no wait is retried through its pacer, not after a
    /// second.
    pub paced: bool,
}

/// Where a retry would go, as routing found it: another deployment that is healthy and not
/// cooling down, else the one that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    /// It is another deployment than the one that failed.
    pub other: bool,
    /// Its breaker lets a call through.
    pub healthy: bool,
    /// Its median time to first byte, once its window knows it.
    pub median: Option<Duration>,
    /// Its requests are paced (a limit configured, announced or learnt): a retry there
    /// waits for its pacer's grant.
    pub paced: bool,
}

/// Everything a retry decision reads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Facts {
    /// What failed.
    pub failure: Failure,
    /// Tries made so far, the failed one included.
    pub tries: u32,
    /// Where the retry would go.
    pub target: Target,
    /// The lane's patience or the request's deadline, whichever is first.
    pub give_up: Instant,
    /// The request's deadline, if it has one.
    pub deadline: Option<Instant>,
    /// A number in `[0, 1)` for the backoff's jitter (from the request id, so runs repeat).
    pub jitter: f64,
}

/// Whether a failed try is tried again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// At the target, after this wait.
    Go(Duration),
    /// It was worth retrying, but the retry budget is spent.
    Denied,
    /// Not worth retrying (or not allowed: the client's error, out of attempts or time).
    No,
}

impl Retrying {
    /// Retries by `policy`, with a fresh budget.
    pub fn new(policy: RetryPolicy) -> Self {
        Self {
            budget: Mutex::new(policy.budget()),
            policy,
        }
    }

    /// Credits the budget with one incoming request.
    pub fn deposit(&self) {
        self.budget.lock().deposit();
    }

    /// Whether and when to try again at `now`. Another deployment takes the retry at once;
    /// the same one after its 429's `retry-after` (with none, through its pacer when it paces
    /// requests, else after [`crate::pace::DEFAULT_RETRY_AFTER`]) or a short jittered backoff. No retry when the error is the client's, the target's breaker is
    /// open, the tries reached `max_attempts`, the wait would outlast `give_up`, or what the
    /// deadline leaves is shorter than the target's median first byte; and none when the
    /// budget is empty (spent only on a `Go`). A 429 is retried like any failure, within the
    /// same attempts and budget: pacing (admission's pause and buckets) is what keeps a
    /// rate-limited upstream from being hammered, and an unbounded 429 retry would hammer it
    /// wherever pacing is off or has not learnt the limit yet.
    pub fn decide(&self, now: Instant, f: &Facts) -> Decision {
        let paced = f.failure.rate_limited;
        if !(paced || f.failure.retryable) {
            return Decision::No;
        }
        // A 429 retried through a pacer (at a deployment whose requests are paced) waits for
        // the pacer's grant: it cannot send faster than the limit the pacer keeps, so it
        // spends neither attempts (up to `PACED_TRIES`) nor budget. While a limit was being
        // learnt, a call met 429 three times and failed although the cluster had slowed.
        let through_pacer = paced && f.target.paced;
        let attempts = if through_pacer {
            PACED_TRIES.max(self.policy.max_attempts)
        } else {
            self.policy.max_attempts
        };
        if f.tries >= attempts || !f.target.healthy {
            return Decision::No;
        }
        let wait = if f.target.other {
            Duration::ZERO
        } else if paced {
            wait_after_429(f.failure.retry_after, f.failure.paced)
        } else {
            self.policy.backoff(f.tries, f.jitter)
        };
        let at = now + wait;
        if at > f.give_up || !worth_trying(at, f.deadline, f.target.median) {
            return Decision::No;
        }
        if !through_pacer && !self.budget.lock().try_spend(now) {
            return Decision::Denied;
        }
        Decision::Go(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pace::DEFAULT_RETRY_AFTER;

    #[test]
    fn backoff_grows_then_caps_and_follows_the_jitter() {
        let p = RetryPolicy::default();
        assert_eq!(p.backoff(1, 0.999_999).as_millis(), 24);
        assert_eq!(p.backoff(2, 0.5), Duration::from_micros(37_500));
        assert_eq!(p.backoff(3, 0.999_999).as_millis(), 174);
        assert_eq!(p.backoff(9, 1.0), Duration::from_millis(250));
        assert_eq!(p.backoff(4, 0.0), Duration::ZERO);
    }

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    /// A retryable failure after one try, the retry going elsewhere, with time to spare.
    fn facts(now: Instant) -> Facts {
        Facts {
            failure: Failure {
                rate_limited: false,
                retryable: true,
                retry_after: None,
                paced: false,
            },
            tries: 1,
            target: Target {
                other: true,
                healthy: true,
                median: Some(Duration::from_millis(100)),
                paced: false,
            },
            give_up: now + s(60),
            deadline: Some(now + s(10)),
            jitter: 0.5,
        }
    }

    #[test]
    fn another_deployment_takes_the_retry_at_once_and_the_same_one_after_a_backoff() {
        let r = Retrying::new(RetryPolicy::default());
        let t = Instant::now();
        assert_eq!(r.decide(t, &facts(t)), Decision::Go(Duration::ZERO));
        let mut same = facts(t);
        same.target.other = false;
        same.tries = 2;
        assert_eq!(
            r.decide(t, &same),
            Decision::Go(r.policy.backoff(2, 0.5)),
            "the same deployment, after full-jitter backoff"
        );
    }

    #[test]
    fn the_clients_errors_and_open_breakers_are_not_retried() {
        let r = Retrying::new(RetryPolicy::default());
        let t = Instant::now();
        let mut f = facts(t);
        f.failure.retryable = false;
        assert_eq!(r.decide(t, &f), Decision::No);
        let mut f = facts(t);
        f.target.healthy = false;
        assert_eq!(r.decide(t, &f), Decision::No);
    }

    #[test]
    fn attempts_stop_at_max_attempts_429s_included() {
        let r = Retrying::new(RetryPolicy::default());
        let t = Instant::now();
        let mut f = facts(t);
        f.tries = 2;
        assert_eq!(r.decide(t, &f), Decision::Go(Duration::ZERO));
        f.tries = 3;
        assert_eq!(r.decide(t, &f), Decision::No, "max_attempts is 3");
        f.failure.rate_limited = true;
        f.failure.retryable = false;
        assert_eq!(r.decide(t, &f), Decision::No, "a 429 too");
        f.tries = 1;
        assert_eq!(r.decide(t, &f), Decision::Go(Duration::ZERO));
    }

    #[test]
    fn a_429_at_the_same_deployment_waits_what_it_asked_for() {
        let r = Retrying::new(RetryPolicy::default());
        let t = Instant::now();
        let mut f = facts(t);
        f.target.other = false;
        f.failure.rate_limited = true;
        f.failure.retry_after = Some(s(3));
        assert_eq!(r.decide(t, &f), Decision::Go(s(3)));
        f.failure.retry_after = None;
        assert_eq!(r.decide(t, &f), Decision::Go(DEFAULT_RETRY_AFTER));
        f.failure.paced = true;
        f.target.paced = true;
        assert_eq!(
            r.decide(t, &f),
            Decision::Go(Duration::ZERO),
            "a paced deployment's pacer is the wait"
        );
        f.tries = 3;
        assert_eq!(
            r.decide(t, &f),
            Decision::Go(Duration::ZERO),
            "through the pacer, past max_attempts"
        );
        f.tries = PACED_TRIES;
        assert_eq!(r.decide(t, &f), Decision::No, "up to PACED_TRIES");
        f.tries = 1;
        f.failure.paced = false;
        f.target.paced = false;
        f.give_up = t + Duration::from_millis(500);
        assert_eq!(r.decide(t, &f), Decision::No, "the wait outlasts patience");
    }

    #[test]
    fn no_retry_whose_median_outlasts_the_deadline() {
        let r = Retrying::new(RetryPolicy::default());
        let t = Instant::now();
        let mut f = facts(t);
        f.target.median = Some(s(11));
        assert_eq!(r.decide(t, &f), Decision::No);
        f.target.median = None;
        assert_eq!(r.decide(t, &f), Decision::Go(Duration::ZERO), "unknown: go");
    }

    #[test]
    fn an_empty_budget_denies_every_retry_429s_included() {
        let r = Retrying::new(RetryPolicy {
            burst: 1.0,
            min_per_second: 0.0,
            ..RetryPolicy::default()
        });
        let t = Instant::now();
        assert_eq!(r.decide(t, &facts(t)), Decision::Go(Duration::ZERO));
        assert_eq!(r.decide(t, &facts(t)), Decision::Denied);
        let mut paced = facts(t);
        paced.failure.rate_limited = true;
        assert_eq!(r.decide(t, &paced), Decision::Denied);
        paced.target.paced = true;
        assert_eq!(
            r.decide(t, &paced),
            Decision::Go(Duration::ZERO),
            "a 429 retried through its pacer spends no budget"
        );
        for _ in 0..5 {
            r.deposit();
        }
        assert_eq!(r.decide(t, &facts(t)), Decision::Go(Duration::ZERO));
    }
}
