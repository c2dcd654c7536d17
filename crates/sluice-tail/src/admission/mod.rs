//! Admission: a limit on requests in flight to one upstream, and a bounded queue per lane
//! (interactive, batch) for those beyond it, fair between tenants within a lane, paced under
//! the upstream's rate limits. Work waits rather than fails; when a lane's queue is full or
//! its wait too long, the caller is told when to come back, from the measured rate at which
//! the queue drains.
//!
//! The queue's whole decision is in [`state`] (pure, taking `now`); this file is the glue:
//! it reads the clock, hands permits to waiters through oneshot channels, and wakes a task
//! when a pause or the pacer lets the next waiter go.

mod fair;
mod lanes;
pub mod predict;
mod scheduler;
pub mod slow_start;
mod state;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio::time::{Instant, timeout_at};

pub use fair::FairQueue;
pub use lanes::{LaneParams, LaneSpec, default_lanes, shares_problem};
pub use scheduler::{LaneLoad, guaranteed, next_lane};

use crate::pace::{Dimension, DimensionState, Pace, PaceSpec, Pacer};
use state::{Next, State, Waiting};

/// What a request asks admission for: a slot in `lane`, on behalf of `tenant`, for a call of
/// about `tokens` (what the upstream's tokens-per-minute limit will count).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ask {
    /// Lane index.
    pub lane: usize,
    /// Who asks (fairness within the lane is between tenants).
    pub tenant: Arc<str>,
    /// Tokens the call is expected to count against the upstream's limit.
    pub tokens: u64,
    /// When the request's time runs out, if it has a deadline: a predicted wait past it
    /// refuses the request at arrival, as one past its lane's `max_wait` does.
    pub deadline: Option<Instant>,
}

impl From<usize> for Ask {
    fn from(lane: usize) -> Self {
        Self {
            lane,
            tenant: Arc::from(""),
            tokens: 0,
            deadline: None,
        }
    }
}

/// Why a request was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    /// The lane's queue was full.
    #[error("the {lane} queue is full; retry after {retry_after:?}")]
    QueueFull {
        /// Lane index.
        lane: usize,
        /// When the queue should have room.
        retry_after: Duration,
        /// The upstream's rate limit held the queue back while it filled.
        rate_limited: bool,
    },
    /// The request would wait longer than its lane allows, by the lane's measured drain
    /// rate: refused at once rather than after the wait.
    #[error(
        "would wait about {wait:?} in the {lane} queue, longer than the lane allows; retry after {retry_after:?}"
    )]
    WouldWait {
        /// Lane index.
        lane: usize,
        /// The predicted wait.
        wait: Duration,
        /// When the queue should have drained what waits now.
        retry_after: Duration,
        /// The upstream's rate limit held the queue back while it drained at that rate.
        rate_limited: bool,
    },
    /// The request waited as long as its lane allows.
    #[error("waited in the {lane} queue for the lane's limit; retry after {retry_after:?}")]
    TimedOut {
        /// Lane index.
        lane: usize,
        /// When the queue should have room.
        retry_after: Duration,
        /// The upstream's rate limit held the queue back while it waited.
        rate_limited: bool,
    },
}

impl Rejected {
    /// When to come back.
    pub fn retry_after(&self) -> Duration {
        match self {
            Self::QueueFull { retry_after, .. }
            | Self::TimedOut { retry_after, .. }
            | Self::WouldWait { retry_after, .. } => *retry_after,
        }
    }

    /// Whether the upstream's rate limit (the pacer, or a pause after a 429) held the queue
    /// back while the request waited, or while the queue that refused it filled: the wait
    /// was the provider's limit's, not sluice's own.
    pub fn rate_limited(&self) -> bool {
        match self {
            Self::QueueFull { rate_limited, .. }
            | Self::TimedOut { rate_limited, .. }
            | Self::WouldWait { rate_limited, .. } => *rate_limited,
        }
    }
}

/// A request in a queue: its permit is sent to it when its turn comes.
#[derive(Debug)]
struct Waiter {
    tx: oneshot::Sender<Permit>,
    tokens: u64,
    /// When it joined the queue.
    since: Instant,
}

impl Waiting for Waiter {
    fn tokens(&self) -> u64 {
        self.tokens
    }

    fn gone(&self) -> bool {
        self.tx.is_closed()
    }
}

struct Inner {
    state: Mutex<State<Waiter>>,
}

/// The admission of one upstream. Cheap to clone.
#[derive(Clone)]
pub struct Admission(Arc<Inner>);

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("stats", &self.stats())
            .finish()
    }
}

/// A slot in flight. Dropping it frees the slot for the next waiter.
#[derive(Debug)]
pub struct Permit {
    admission: Option<Arc<Inner>>,
    lane: usize,
    /// Requests in flight once this one was admitted, itself included (the limit's samples
    /// compare it with the limit, as Netflix's limiters do).
    pub inflight: usize,
    /// While it waited, the upstream's rate limit held the queue back (the pacer, or a
    /// pause after a 429): its wait is the provider's limit's, not sluice's own.
    pub rate_limited: bool,
    /// Whether its call had its answer (see [`Permit::answered`]).
    answered: bool,
}

impl Permit {
    /// Its call had its answer (the first byte, or a failure; `dropped`: a refusal for
    /// load): while the upstream's limit is unknown, one more call may go.
    pub fn answered(&mut self, dropped: bool) {
        if self.answered {
            return;
        }
        self.answered = true;
        if let Some(inner) = &self.admission {
            inner.state.lock().slow.answered(Instant::now(), dropped);
            grant_and_wake(inner);
        }
    }
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Admission")
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(inner) = self.admission.take() {
            inner
                .state
                .lock()
                .release(self.lane, Instant::now(), self.answered);
            grant_and_wake(&inner);
        }
    }
}

/// A snapshot, for metrics and tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdmissionStats {
    /// What the pacer holds of the requests-per-minute limit, when it knows one.
    pub requests_pace: Option<DimensionState>,
    /// What the pacer holds of the tokens-per-minute limit, when it knows one.
    pub tokens_pace: Option<DimensionState>,
    /// Tenants with someone waiting, per lane (same order as `lanes`).
    pub tenants_waiting: Vec<usize>,
    /// The current limit.
    pub limit: usize,
    /// Requests in flight.
    pub inflight: usize,
    /// (lane, in flight, waiting) per lane.
    pub lanes: Vec<(Arc<str>, usize, usize)>,
    /// Until when a 429 holds slots back, if one does.
    pub paused_until: Option<Instant>,
    /// Requests refused at arrival because their predicted wait exceeded their lane's.
    pub refused_at_arrival: u64,
    /// Requests accepted that then waited out their lane's `max_wait`: mispredictions.
    pub timed_out: u64,
}

/// Hands free slots to waiters as the state decides; returns the permits nobody took, and
/// when to try again if the pacer or a pause held the next waiter back.
fn grant(inner: &Arc<Inner>, st: &mut State<Waiter>) -> (Vec<Permit>, Option<Instant>) {
    let mut spilled = Vec::new();
    let now = Instant::now();
    loop {
        match st.next(now) {
            Next::Grant {
                lane,
                waiter,
                inflight,
            } => {
                let mut permit = permit(inner, lane, inflight);
                permit.rate_limited = st.rate_held_since(waiter.since);
                if let Err(unwanted) = waiter.tx.send(permit) {
                    spilled.push(unwanted);
                }
            }
            Next::HeldUntil(at) => return (spilled, Some(at)),
            Next::Idle => return (spilled, None),
        }
    }
}

/// Grants what can be granted now and, if the next waiter is held back until some instant,
/// makes sure a task wakes then to try again.
fn grant_and_wake(inner: &Arc<Inner>) {
    let (spilled, wake) = {
        let mut st = inner.state.lock();
        let (spilled, wake) = grant(inner, &mut st);
        let now = Instant::now();
        let wake = wake.filter(|at| st.should_wake(*at, now));
        if let Some(at) = wake {
            st.wake_at = Some(at);
        }
        (spilled, wake)
    };
    // Permits whose waiter had gone; dropping them (outside the lock) frees them.
    drop(spilled);
    if let Some(at) = wake {
        let inner = inner.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            {
                let mut st = inner.state.lock();
                if st.wake_at == Some(at) {
                    st.wake_at = None;
                }
            }
            grant_and_wake(&inner);
        });
    }
}

/// The permit of a slot the state has counted for lane `lane`.
fn permit(inner: &Arc<Inner>, lane: usize, inflight: usize) -> Permit {
    Permit {
        admission: Some(inner.clone()),
        lane,
        inflight,
        rate_limited: false,
        answered: false,
    }
}

impl Admission {
    /// An admission of `limit` slots over `lanes` (in priority order), unpaced.
    pub fn new(limit: usize, lanes: Vec<LaneSpec>) -> Self {
        Self::paced(
            limit,
            lanes,
            Pacer::new(PaceSpec::default(), Instant::now()),
        )
    }

    /// An admission of `limit` slots over `lanes`, holding calls back as `pacer` says.
    pub fn paced(limit: usize, lanes: Vec<LaneSpec>, pacer: impl Pace + 'static) -> Self {
        Self::paced_by(limit, lanes, Box::new(pacer))
    }

    /// `limit` slots over `lanes`, paced by `pacer`, whichever kind it is.
    pub fn paced_by(limit: usize, lanes: Vec<LaneSpec>, pacer: Box<dyn Pace>) -> Self {
        Self(Arc::new(Inner {
            state: Mutex::new(State::new(limit, lanes, pacer, Instant::now())),
        }))
    }

    /// The index of lane `name`.
    pub fn lane(&self, name: &str) -> Option<usize> {
        self.0
            .state
            .lock()
            .lanes
            .iter()
            .position(|l| &*l.spec.name == name)
    }

    /// Holds calls awaiting an answer to a slow start's window until [`Admission::known`]
    /// (an upstream whose limit nothing configured: see [`slow_start`]).
    pub fn slow_start(self) -> Self {
        self.0.state.lock().slow = slow_start::SlowStart::new();
        self
    }

    /// The upstream's limit is known (announced, or taught by a refusal): no slow start
    /// holds calls from now on.
    pub fn known(&self) {
        let mut st = self.0.state.lock();
        if st.slow.opening() {
            st.slow.known();
            drop(st);
            grant_and_wake(&self.0);
        }
    }

    /// Changes the limit; a higher one admits waiters at once.
    pub fn set_limit(&self, limit: usize) {
        self.0.state.lock().limit = limit.max(1);
        grant_and_wake(&self.0);
    }

    /// A 429: the pacer hears that nothing is left. Whether it paces requests from now on
    /// (then its emptied bucket is the wait: see [`crate::pace::after_429`]).
    pub fn refused(&self) -> bool {
        let mut st = self.0.state.lock();
        let now = Instant::now();
        st.refused(now)
    }

    /// Whether the pacer paces requests now (a limit configured, announced or learnt).
    pub fn paces_requests(&self) -> bool {
        self.0.state.lock().paces_requests(Instant::now())
    }

    /// Grants no slot before `until`: the upstream asked us to wait (a 429's `retry-after`).
    /// Requests keep queueing meanwhile; at `until` the queue resumes. The pacer hears of the
    /// pause (one shared by several instances pauses them all).
    pub fn pause_until(&self, until: Instant) {
        if self.0.state.lock().pause_until(Instant::now(), until) {
            grant_and_wake(&self.0);
        }
    }

    /// What an answer reported of the upstream's rate limit in `dim`.
    pub fn observe(&self, dim: Dimension, limit: u64, remaining: u64, reset: Duration) {
        self.0
            .state
            .lock()
            .pacer
            .observe(Instant::now(), dim, limit, remaining, reset);
        grant_and_wake(&self.0);
    }

    /// Whether the upstream's rate limit (the pacer, or a pause after a 429) held the queue
    /// back at any instant from `since` on: a request that joined the queue then and ran out
    /// of time in it waited for the provider's limit.
    pub fn rate_held_since(&self, since: Instant) -> bool {
        self.0.state.lock().rate_held_since(since)
    }

    /// Whether slots are held back at `now` because the upstream asked us to wait.
    pub fn is_paused(&self, now: Instant) -> bool {
        self.0.state.lock().paused_until.is_some_and(|p| now < p)
    }

    /// A slot now if one is free and the pacer allows, never a wait (hedges and other
    /// optional work), and only when the request would be next in line: nobody of its lane
    /// waits, and its lane would be chosen over the lanes whose requests do.
    pub fn try_acquire(&self, ask: impl Into<Ask>) -> Option<Permit> {
        let ask = ask.into();
        let mut st = self.0.state.lock();
        let now = Instant::now();
        st.admits_now(&ask, now).then(|| {
            let inflight = st.take(ask.lane, now, ask.tokens);
            permit(&self.0, ask.lane, inflight)
        })
    }

    /// Whether `ask` would have to wait if it asked now (routing prefers a deployment where
    /// it would not).
    pub fn would_wait(&self, ask: &Ask) -> bool {
        !self.0.state.lock().admits_now(ask, Instant::now())
    }

    /// Waits for a slot, at most the lane's `max_wait`.
    pub async fn acquire(&self, ask: impl Into<Ask>) -> Result<Permit, Rejected> {
        let ask = ask.into();
        let (rx, max_wait, lane, since) = {
            let mut st = self.0.state.lock();
            let now = Instant::now();
            if st.goes_at_once(now, ask.tokens) {
                let lane = st.lane_of(&ask);
                let inflight = st.take(lane, now, ask.tokens);
                return Ok(permit(&self.0, lane, inflight));
            }
            let (tx, rx) = oneshot::channel();
            let waiter = Waiter {
                tx,
                tokens: ask.tokens,
                since: now,
            };
            let (lane, max_wait) = st.enqueue(&ask, waiter, now)?;
            (rx, max_wait, lane, now)
        };
        // The newcomer may be first in line behind a pacer or a pause that has no task
        // waiting on it yet.
        grant_and_wake(&self.0);
        match timeout_at(Instant::now() + max_wait, rx).await {
            Ok(Ok(permit)) => Ok(permit),
            _ => {
                let mut st = self.0.state.lock();
                st.timed_out += 1;
                let retry_after = st.retry_after(Instant::now());
                let rate_limited = st.rate_held_since(since);
                Err(Rejected::TimedOut {
                    lane,
                    retry_after,
                    rate_limited,
                })
            }
        }
    }

    /// A snapshot.
    pub fn stats(&self) -> AdmissionStats {
        let mut st = self.0.state.lock();
        let now = Instant::now();
        let (requests_pace, tokens_pace) = st.pace(now);
        AdmissionStats {
            requests_pace,
            tokens_pace,
            tenants_waiting: st.lanes.iter().map(|l| l.waiting.tenants()).collect(),
            limit: st.limit,
            inflight: st.inflight,
            lanes: st.lane_stats(),
            paused_until: st.paused_until.filter(|p| *p > now),
            refused_at_arrival: st.refused_at_arrival,
            timed_out: st.timed_out,
        }
    }
}

#[cfg(test)]
mod tests;
