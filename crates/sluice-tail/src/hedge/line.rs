//! A budget whose tokens go to the requests waiting for one: to the one with the most time
//! left to use it, first come, first served among equals.
//!
//! Hedges are decided when an attempt has waited past the hedging quantile; by construction
//! about as many requests cross it as the budget earns tokens, so a plain budget is often
//! empty at that moment, and a request that is truly stuck is refused as often as one that
//! was about to answer. Here a request that finds the budget empty waits in line for the next
//! token instead. The ones still waiting when tokens come are the ones still stuck (the
//! others answered and left the line), so the tokens go where the tail is, and no more of
//! them are spent than before.
//!
//! A request with a deadline says until when a hedge could still land in it; past that it
//! leaves the line, and of those in line the one that can wait longest is served first
//! ([`next`]). Without deadlines that is the oldest: a request waiting longer is more likely
//! stuck. With them, a hedge sent with more time left is more likely to arrive in time, and
//! the ones that waited longest are the likeliest to miss anyway: first come, first served
//! would spend a scarce budget on the requests it can least help.

use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::budget::Budget;

/// A [`Budget`] with a line of waiters.
#[derive(Debug)]
pub struct FairBudget {
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    budget: Budget,
    /// In the order they came.
    waiting: Vec<Waiter>,
}

#[derive(Debug)]
struct Waiter {
    served: oneshot::Sender<()>,
    /// The last moment a hedge sent for it could still arrive in time (`None`: no deadline).
    until: Option<Instant>,
}

/// A place in the line: resolves once a token has been spent for its holder, or fails once
/// its time to use one is over. Dropping it leaves the line (a token handed to a waiter that
/// left goes back to the budget; one that leaves with a token it did not read, as its answer
/// came, gives it back with [`FairBudget::refund`]).
pub type Place = oneshot::Receiver<()>;

/// Which of the waiters (each the last moment it could use a token, in the order they came)
/// is served next: the one that can wait longest, a waiter without a deadline before any
/// with one, the first to come among equals.
pub fn next(until: impl IntoIterator<Item = Option<Instant>>) -> Option<usize> {
    let mut best: Option<(usize, Option<Instant>)> = None;
    for (i, u) in until.into_iter().enumerate() {
        let later = match (best, u) {
            (None, _) => true,
            (Some((_, None)), _) => false,
            (Some((_, Some(_))), None) => true,
            (Some((_, Some(b))), Some(u)) => u > b,
        };
        if later {
            best = Some((i, u));
        }
    }
    best.map(|(i, _)| i)
}

impl FairBudget {
    /// A line in front of `budget`.
    pub fn new(budget: Budget) -> Self {
        Self {
            inner: Mutex::new(Inner {
                budget,
                waiting: Vec::new(),
            }),
        }
    }

    /// Credits one request, and hands out whole tokens to the waiters at `now`.
    pub fn deposit(&self, now: Instant) {
        let mut st = self.inner.lock();
        st.budget.deposit();
        st.hand_out(now);
    }

    /// Spends a token at `now` if there is one and nobody is waiting for it.
    pub fn try_spend(&self, now: Instant) -> bool {
        let mut st = self.inner.lock();
        st.leave(now);
        st.waiting.is_empty() && st.budget.try_spend(now)
    }

    /// Joins the line at `now`, for a token usable until `until` (`None`: no deadline);
    /// served at once if a token is already there and nobody in line can wait longer.
    pub fn wait(&self, now: Instant, until: Option<Instant>) -> Place {
        let (served, place) = oneshot::channel();
        let mut st = self.inner.lock();
        st.waiting.push(Waiter { served, until });
        st.hand_out(now);
        place
    }

    /// Hands out what the floor has earned by `now` to the waiters.
    pub fn tick(&self, now: Instant) {
        self.inner.lock().hand_out(now);
    }

    /// When the budget's floor alone earns the next whole token, if it has a floor.
    pub fn whole_token_at(&self, now: Instant) -> Option<Instant> {
        self.inner.lock().budget.whole_token_at(now)
    }

    /// Gives back a token its holder could not use.
    pub fn refund(&self) {
        self.inner.lock().budget.refund();
    }

    /// Tokens saved now.
    pub fn balance(&self) -> f64 {
        self.inner.lock().budget.balance()
    }

    /// Requests in line now.
    pub fn waiting(&self) -> usize {
        self.inner
            .lock()
            .waiting
            .iter()
            .filter(|w| !w.served.is_closed())
            .count()
    }
}

impl Inner {
    /// Lets go of the waiters that left, and of those whose time to use a token is over at
    /// `now` (their place fails).
    fn leave(&mut self, now: Instant) {
        self.waiting
            .retain(|w| !w.served.is_closed() && w.until.is_none_or(|u| u >= now));
    }

    fn hand_out(&mut self, now: Instant) {
        self.leave(now);
        while let Some(i) = next(self.waiting.iter().map(|w| w.until)) {
            if !self.budget.try_spend(now) {
                break;
            }
            if self.waiting.remove(i).served.send(()).is_err() {
                self.budget.refund();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_go_to_the_waiters_in_order_and_none_are_lost() {
        let now = Instant::now();
        let b = FairBudget::new(Budget::new(0.5, 1.0));
        assert!(b.try_spend(now), "it starts with one token");
        let mut first = b.wait(now, None);
        let second = b.wait(now, None);
        let mut third = b.wait(now, None);
        drop(second);
        assert!(first.try_recv().is_err(), "no token yet");
        b.deposit(now);
        b.deposit(now);
        assert!(
            first.try_recv().is_ok(),
            "the first in line is served first"
        );
        assert!(third.try_recv().is_err());
        // The second left the line: the next token goes to the third.
        b.deposit(now);
        b.deposit(now);
        assert!(third.try_recv().is_ok());
        assert_eq!(b.balance(), 0.0);
    }

    #[test]
    fn nobody_jumps_the_line() {
        let now = Instant::now();
        let b = FairBudget::new(Budget::new(1.0, 1.0));
        assert!(b.try_spend(now));
        let mut waiting = b.wait(now, None);
        b.deposit(now);
        assert!(!b.try_spend(now), "the token went to the waiter");
        assert!(waiting.try_recv().is_ok());
        b.deposit(now);
        assert!(
            b.try_spend(now),
            "with the line empty, tokens are free to take"
        );
    }

    #[test]
    fn a_token_for_a_waiter_that_left_goes_back() {
        let now = Instant::now();
        let b = FairBudget::new(Budget::new(1.0, 1.0));
        assert!(b.try_spend(now));
        drop(b.wait(now, None));
        b.deposit(now);
        assert_eq!(b.balance(), 1.0);
        b.refund();
        assert_eq!(b.balance(), 1.0, "refunds are capped at the burst");
    }

    #[test]
    fn the_waiter_that_can_wait_longest_goes_first() {
        let t = Instant::now();
        let at = |ms: u64| Some(t + tokio::time::Duration::from_millis(ms));
        assert_eq!(next([]), None);
        assert_eq!(next([at(5), at(9), at(7)]), Some(1), "the latest deadline");
        assert_eq!(
            next([at(5), None, at(9), None]),
            Some(1),
            "no deadline first"
        );
        assert_eq!(
            next([None, None]),
            Some(0),
            "the first to come among equals"
        );
        assert_eq!(next([at(9), at(9)]), Some(0));
    }

    #[test]
    fn with_deadlines_a_token_goes_to_the_one_with_most_time_left() {
        let t = Instant::now();
        let ms = tokio::time::Duration::from_millis;
        let b = FairBudget::new(Budget::new(1.0, 1.0));
        assert!(b.try_spend(t));
        let mut old = b.wait(t, Some(t + ms(300)));
        let mut young = b.wait(t, Some(t + ms(900)));
        b.deposit(t);
        assert!(young.try_recv().is_ok(), "more time left to land a hedge");
        assert!(old.try_recv().is_err());
        assert_eq!(b.waiting(), 1);
    }

    #[test]
    fn a_waiter_whose_time_is_over_leaves_the_line_and_takes_no_token() {
        let t = Instant::now();
        let ms = tokio::time::Duration::from_millis;
        let b = FairBudget::new(Budget::new(1.0, 1.0));
        assert!(b.try_spend(t));
        let mut late = b.wait(t, Some(t + ms(100)));
        let mut patient = b.wait(t, None);
        let mut next_up = b.wait(t, Some(t + ms(500)));
        // At 200 ms the first can no longer use a token; the one without a deadline is served.
        b.deposit(t + ms(200));
        assert!(patient.try_recv().is_ok());
        assert!(
            matches!(late.try_recv(), Err(oneshot::error::TryRecvError::Closed)),
            "its place fails: no hedge could land in time"
        );
        assert_eq!(b.waiting(), 1);
        b.deposit(t + ms(200));
        assert!(next_up.try_recv().is_ok());
        assert_eq!(b.balance(), 0.0, "the expired waiter took nothing");
    }
}
