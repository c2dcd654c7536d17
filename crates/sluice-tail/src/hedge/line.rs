//! A budget whose tokens go first come, first served to the requests waiting for one.
//!
//! Hedges are decided when an attempt has waited past the hedging quantile; by construction
//! about as many requests cross it as the budget earns tokens, so a plain budget is often
//! empty at that moment, and a request that is truly stuck is refused as often as one that
//! was about to answer. Here a request that finds the budget empty waits in line for the next
//! token instead. The ones still waiting when tokens come are the ones still stuck (the
//! others answered and left the line), so the tokens go where the tail is, and no more of
//! them are spent than before.

use std::collections::VecDeque;

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
    waiting: VecDeque<oneshot::Sender<()>>,
}

/// A place in the line: resolves once a token has been spent for its holder. Dropping it
/// leaves the line (a token handed to a waiter that left goes back to the budget).
pub type Place = oneshot::Receiver<()>;

impl FairBudget {
    /// A line in front of `budget`.
    pub fn new(budget: Budget) -> Self {
        Self {
            inner: Mutex::new(Inner {
                budget,
                waiting: VecDeque::new(),
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
        st.waiting.retain(|w| !w.is_closed());
        st.waiting.is_empty() && st.budget.try_spend(now)
    }

    /// Joins the line at `now` (served at once if a token is already there).
    pub fn wait(&self, now: Instant) -> Place {
        let (tx, rx) = oneshot::channel();
        let mut st = self.inner.lock();
        st.waiting.push_back(tx);
        st.hand_out(now);
        rx
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
            .filter(|w| !w.is_closed())
            .count()
    }
}

impl Inner {
    fn hand_out(&mut self, now: Instant) {
        while !self.waiting.is_empty() && self.budget.try_spend(now) {
            let given = self.waiting.pop_front().is_some_and(|w| w.send(()).is_ok());
            if !given {
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
        let mut first = b.wait(now);
        let second = b.wait(now);
        let mut third = b.wait(now);
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
        let mut waiting = b.wait(now);
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
        drop(b.wait(now));
        b.deposit(now);
        assert_eq!(b.balance(), 1.0);
        b.refund();
        assert_eq!(b.balance(), 1.0, "refunds are capped at the burst");
    }
}
