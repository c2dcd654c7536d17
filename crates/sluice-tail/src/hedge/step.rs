//! One request's hedge, decided a step at a time: when to look again, when it is due, whether
//! a token is spent or the request waits in line for one (and until when), where the hedge
//! goes, and when it gives up. The glue (the gateway's race) only waits for what a step says
//! (an instant, a place in line, the attempt's answer) and carries out a send.
//!
//! What the step reads of the world it asks through [`Look`]: the primary's latency window,
//! a window's first byte at a quantile, and where a hedge could go now. Which window answers
//! which question is decided here: the hedging delay from the primary's own window, and for
//! a request with a deadline how long a hedge would take from the likely target's window,
//! the primary's when the target's is too thin.

use tokio::time::{Duration, Instant};

use super::line::Place;
use super::{
    BodyQuantile, DEADLINE_TTFB_QUANTILE, DelayRule, Hedging, LAST_USEFUL_QUANTILE, When,
    latest_start,
};

/// Whose latency window a question is asked of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// The deployment a hedge would likely go to.
    Target,
    /// The deployment the request went to first.
    Primary,
}

/// What a step reads of the world at `now`.
pub trait Look {
    /// Where a hedge goes.
    type Target;

    /// The primary's hedging quantile of time to first byte over the body of its window (a
    /// cluster of stalls left out), once the window holds enough samples.
    fn observed(&self) -> Option<BodyQuantile>;

    /// The body of `window`'s time to first byte at quantile `q`, once it holds enough.
    fn ttfb(&self, window: Window, q: f64) -> Option<Duration>;

    /// Whether a hedge could go somewhere at `now` (healthy, not held back by a 429, its
    /// median first byte inside the deadline).
    fn could_go(&self, now: Instant) -> bool;

    /// Where the hedge goes at `now`, its slot taken: `None` when nowhere can take it now.
    fn claim(&self, now: Instant) -> Option<Self::Target>;
}

/// What the glue does next.
#[derive(Debug)]
pub enum Next<T> {
    /// Step again at this instant, unless the attempt answers first.
    Wait(Instant),
    /// Wait in this place in line for a token ([`Hedge::served`] with what it gave), unless
    /// the attempt answers first ([`Hedge::answered_in_line`]); the budget's floor earns the
    /// next token at the instant `floor` says ([`Hedge::tick`]).
    Line(Place),
    /// Send the hedge there: a token is spent for it, its slot taken.
    Send(T),
    /// No hedge for this request. `denied`: one was due, and the budget, the line's time or
    /// the targets said no.
    GiveUp {
        /// One was due.
        denied: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for the hedge's time.
    Timing,
    /// Due at this instant.
    Due(Instant),
    /// In line for a token.
    InLine,
    /// A token in hand.
    Token,
    /// Sent, or given up.
    Done,
}

/// One request's hedge: its state between steps.
#[derive(Debug)]
pub struct Hedge {
    started: Instant,
    deadline: Option<Instant>,
    phase: Phase,
    rule: Option<DelayRule>,
    /// The last moment a hedge could still land in the deadline.
    until: Option<Instant>,
}

impl Hedge {
    /// The hedge of an attempt started at `started`, for a request due by `deadline`. The
    /// attempt earns the budget its share of a hedge.
    pub fn new(h: &Hedging, started: Instant, deadline: Option<Instant>) -> Self {
        h.budget.deposit(started);
        Self {
            started,
            deadline,
            phase: Phase::Timing,
            rule: None,
            until: None,
        }
    }

    /// Which rule set the hedge's time, once it is set.
    pub fn rule(&self) -> Option<DelayRule> {
        self.rule
    }

    /// How long a hedge would take to its first byte at quantile `q`: the likely target's
    /// window, else the primary's. Only a request with a deadline asks.
    fn hedge_ttfb<L: Look>(&self, look: &L, q: f64) -> Option<Duration> {
        self.deadline?;
        look.ttfb(Window::Target, q)
            .or_else(|| look.ttfb(Window::Primary, q))
    }

    /// The next step at `now`, the attempt not having answered.
    pub fn step<L: Look>(&mut self, h: &Hedging, now: Instant, look: &L) -> Next<L::Target> {
        loop {
            match self.phase {
                Phase::Timing => {
                    let latest =
                        latest_start(self.deadline, self.hedge_ttfb(look, DEADLINE_TTFB_QUANTILE));
                    match h.policy.when_by(self.started, now, look.observed(), latest) {
                        (When::Recheck(at), _) => return Next::Wait(at),
                        (When::HedgeAt(at), rule) => {
                            self.rule = rule;
                            self.until = latest_start(
                                self.deadline,
                                self.hedge_ttfb(look, LAST_USEFUL_QUANTILE),
                            );
                            self.phase = Phase::Due(at);
                        }
                    }
                }
                Phase::Due(at) if now < at => return Next::Wait(at),
                Phase::Due(_) => {
                    if !look.could_go(now) {
                        self.phase = Phase::Done;
                        return Next::GiveUp { denied: true };
                    }
                    if h.budget.try_spend(now) {
                        self.phase = Phase::Token;
                    } else {
                        // The budget is empty: wait in line for the next token while the
                        // attempt goes on; a request truly stuck will still be waiting.
                        self.phase = Phase::InLine;
                        return Next::Line(h.budget.wait(now, self.until));
                    }
                }
                Phase::Token => {
                    // Time may have passed: where the hedge goes is looked at again.
                    self.phase = Phase::Done;
                    return match look.claim(now) {
                        Some(t) => Next::Send(t),
                        None => {
                            h.budget.refund();
                            Next::GiveUp { denied: true }
                        }
                    };
                }
                Phase::InLine | Phase::Done => return Next::GiveUp { denied: false },
            }
        }
    }

    /// When the budget's floor alone earns the next token, while in line.
    pub fn floor(&self, h: &Hedging, now: Instant) -> Option<Instant> {
        (self.phase == Phase::InLine)
            .then(|| h.budget.whole_token_at(now))
            .flatten()
    }

    /// The floor's time has come: what it earned goes to the line.
    pub fn tick(&self, h: &Hedging, now: Instant) {
        h.budget.tick(now);
    }

    /// The place in line resolved: with a token (`got`), or failed (its time was over).
    pub fn served<L: Look>(
        &mut self,
        h: &Hedging,
        now: Instant,
        got: bool,
        look: &L,
    ) -> Next<L::Target> {
        if !got {
            self.phase = Phase::Done;
            return Next::GiveUp { denied: true };
        }
        self.phase = Phase::Token;
        self.step(h, now, look)
    }

    /// The attempt answered while its request waited in line: it leaves, and a token handed
    /// to it just then goes back.
    pub fn answered_in_line(&mut self, h: &Hedging, mut place: Place) {
        if place.try_recv().is_ok() {
            h.budget.refund();
        }
        self.phase = Phase::Done;
    }
}

#[cfg(test)]
mod tests;
