//! Admission: a limit on requests in flight to one upstream, and a bounded queue per lane
//! (interactive, batch) for those beyond it, fair between tenants within a lane, paced under
//! the upstream's rate limits. Work waits rather than fails; when a lane's queue is full or
//! its wait too long, the caller is told when to come back, from the measured rate at which
//! the queue drains.

mod fair;
mod scheduler;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio::time::{Instant, timeout_at};

pub use fair::FairQueue;
pub use scheduler::{LaneLoad, guaranteed, next_lane};

use crate::pace::{Dimension, DimensionState, PaceSpec, Pacer};

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
}

impl From<usize> for Ask {
    fn from(lane: usize) -> Self {
        Self {
            lane,
            tenant: Arc::from(""),
            tokens: 0,
        }
    }
}

/// One lane's rules.
#[derive(Clone, Debug, PartialEq)]
pub struct LaneSpec {
    /// Name, as clients send it in `x-sluice-lane`.
    pub name: Arc<str>,
    /// Guaranteed share of the limit under contention.
    pub share: f64,
    /// Requests that may wait.
    pub max_queue: usize,
    /// How long one may wait.
    pub max_wait: Duration,
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
    },
    /// The request waited as long as its lane allows.
    #[error("waited in the {lane} queue for the lane's limit; retry after {retry_after:?}")]
    TimedOut {
        /// Lane index.
        lane: usize,
        /// When the queue should have room.
        retry_after: Duration,
    },
}

impl Rejected {
    /// When to come back.
    pub fn retry_after(&self) -> Duration {
        match self {
            Self::QueueFull { retry_after, .. } | Self::TimedOut { retry_after, .. } => {
                *retry_after
            }
        }
    }
}

/// Events counted over the last ten seconds (requests finished, calls granted).
#[derive(Debug)]
struct Recent {
    buckets: [u32; 10],
    head_second: u64,
    origin: Instant,
}

impl Recent {
    fn new(now: Instant) -> Self {
        Self {
            buckets: [0; 10],
            head_second: 0,
            origin: now,
        }
    }

    fn advance(&mut self, now: Instant) -> u64 {
        let second = now.saturating_duration_since(self.origin).as_secs();
        let gap = second.saturating_sub(self.head_second);
        for k in 1..=gap.min(10) {
            self.buckets[((self.head_second + k) % 10) as usize] = 0;
        }
        self.head_second = self.head_second.max(second);
        second
    }

    fn count(&mut self, now: Instant) {
        let s = self.advance(now);
        self.buckets[(s % 10) as usize] += 1;
    }

    fn total(&mut self, now: Instant) -> u32 {
        self.advance(now);
        self.buckets.iter().sum()
    }

    fn per_second(&mut self, now: Instant) -> f64 {
        f64::from(self.total(now)) / 10.0
    }
}

/// A request in a queue.
#[derive(Debug)]
struct Waiter {
    tx: oneshot::Sender<Permit>,
    tokens: u64,
}

struct Lane {
    spec: LaneSpec,
    inflight: usize,
    waiting: FairQueue<Waiter>,
    /// Calls granted lately.
    granted: Recent,
}

impl Lane {
    /// The waiter whose turn it is, dropping those in front of it who gave up (a deadline,
    /// a client gone): pruned as they come up, not by a scan of the whole queue per grant.
    fn next_waiter(&mut self) -> Option<&Waiter> {
        while self.waiting.peek().is_some_and(|w| w.tx.is_closed()) {
            self.waiting.pop();
        }
        self.waiting.peek()
    }
}

struct State {
    limit: usize,
    inflight: usize,
    lanes: Vec<Lane>,
    drained: Recent,
    /// No slot is granted before this (the upstream asked us to wait).
    paused_until: Option<Instant>,
    /// Holds calls back until the upstream's rate limits can take them.
    pacer: Pacer,
    /// When a task will next wake to grant slots (a pause or the pacer ends then).
    wake_at: Option<Instant>,
}

impl State {
    fn open(&self, now: Instant) -> bool {
        self.paused_until.is_none_or(|p| now >= p) && self.inflight < self.limit
    }

    /// When a call of `tokens` could go, if the slot is there: `now`, or later when paused or
    /// paced.
    fn ready_at(&mut self, now: Instant, tokens: u64) -> Instant {
        let paced = self.pacer.ready_at(now, tokens);
        self.paused_until.map_or(paced, |p| paced.max(p))
    }

    fn waiting(&self) -> usize {
        self.lanes.iter().map(|l| l.waiting.len()).sum()
    }

    /// Whether `ask` would get a slot at `now` without waiting: one is free, the pacer lets
    /// a call of its cost out, nobody of its lane waits, and its lane would be chosen over
    /// the lanes whose requests do.
    fn admits_now(&mut self, ask: &Ask, now: Instant) -> bool {
        if !self.open(now) || self.ready_at(now, ask.tokens) > now {
            return false;
        }
        let mut loads = self.loads(now);
        match loads.get_mut(ask.lane) {
            Some(own) if own.waiting == 0 => {
                own.waiting = 1;
                next_lane(self.limit, &loads) == Some(ask.lane)
            }
            _ => false,
        }
    }

    /// What the scheduler weighs, per lane.
    fn loads(&mut self, now: Instant) -> Vec<LaneLoad> {
        let granted: Vec<u32> = self
            .lanes
            .iter_mut()
            .map(|l| l.granted.total(now))
            .collect();
        let all = f64::from(granted.iter().sum::<u32>().max(1));
        self.lanes
            .iter()
            .zip(granted)
            .map(|(l, g)| LaneLoad {
                share: l.spec.share,
                inflight: l.inflight,
                waiting: l.waiting.len(),
                recent: f64::from(g) / all,
            })
            .collect()
    }
}

struct Inner {
    state: Mutex<State>,
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
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Admission")
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(inner) = self.admission.take() {
            {
                let mut st = inner.state.lock();
                st.inflight = st.inflight.saturating_sub(1);
                if let Some(l) = st.lanes.get_mut(self.lane) {
                    l.inflight = l.inflight.saturating_sub(1);
                }
                st.drained.count(Instant::now());
            }
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
}

/// Hands free slots to waiters, best lane first, each lane's tenants in turn, as far as the
/// pacer allows; returns the permits nobody took, and when to try again if the pacer or a
/// pause held the next waiter back.
fn grant(inner: &Arc<Inner>, st: &mut State) -> (Vec<Permit>, Option<Instant>) {
    let mut spilled = Vec::new();
    let now = Instant::now();
    while st.inflight < st.limit {
        let Some(i) = next_lane(st.limit, &st.loads(now)) else {
            break;
        };
        let Some(lane) = st.lanes.get_mut(i) else {
            break;
        };
        let Some(tokens) = lane.next_waiter().map(|w| w.tokens) else {
            // The lane held only requests that had gone: weigh the lanes again.
            continue;
        };
        let ready = st.ready_at(now, tokens);
        if ready > now {
            return (spilled, Some(ready));
        }
        let Some(w) = st.lanes.get_mut(i).and_then(|l| l.waiting.pop()) else {
            break;
        };
        let permit = take(inner, st, i, now, w.tokens);
        if let Err(unwanted) = w.tx.send(permit) {
            spilled.push(unwanted);
        }
    }
    (spilled, None)
}

/// Grants what can be granted now and, if the next waiter is held back until some instant,
/// makes sure a task wakes then to try again.
fn grant_and_wake(inner: &Arc<Inner>) {
    let (spilled, wake) = {
        let mut st = inner.state.lock();
        let (spilled, wake) = grant(inner, &mut st);
        let wake = wake.filter(|at| st.wake_at.is_none_or(|w| w > *at || w <= Instant::now()));
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

/// Counts a slot taken by lane `i` at `now` for a call of `tokens`, and makes its permit.
fn take(inner: &Arc<Inner>, st: &mut State, i: usize, now: Instant, tokens: u64) -> Permit {
    st.pacer.take(now, tokens);
    st.inflight += 1;
    if let Some(l) = st.lanes.get_mut(i) {
        l.inflight += 1;
        l.granted.count(now);
    }
    Permit {
        admission: Some(inner.clone()),
        lane: i,
        inflight: st.inflight,
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
    pub fn paced(limit: usize, lanes: Vec<LaneSpec>, pacer: Pacer) -> Self {
        let lanes = lanes
            .into_iter()
            .map(|spec| Lane {
                spec,
                inflight: 0,
                waiting: FairQueue::default(),
                granted: Recent::new(Instant::now()),
            })
            .collect();
        Self(Arc::new(Inner {
            state: Mutex::new(State {
                limit: limit.max(1),
                inflight: 0,
                lanes,
                drained: Recent::new(Instant::now()),
                paused_until: None,
                pacer,
                wake_at: None,
            }),
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

    /// Changes the limit; a higher one admits waiters at once.
    pub fn set_limit(&self, limit: usize) {
        self.0.state.lock().limit = limit.max(1);
        grant_and_wake(&self.0);
    }

    /// Grants no slot before `until`: the upstream asked us to wait (a 429's `retry-after`).
    /// Requests keep queueing meanwhile; at `until` the queue resumes. The pacer hears that
    /// nothing is left.
    pub fn pause_until(&self, until: Instant) {
        {
            let mut st = self.0.state.lock();
            st.pacer.exhausted(Instant::now());
            if st.paused_until.is_some_and(|p| p >= until) {
                return;
            }
            st.paused_until = Some(until);
        }
        grant_and_wake(&self.0);
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
        st.admits_now(&ask, now)
            .then(|| take(&self.0, &mut st, ask.lane, now, ask.tokens))
    }

    /// Whether `ask` would have to wait if it asked now (routing prefers a deployment where
    /// it would not).
    pub fn would_wait(&self, ask: &Ask) -> bool {
        !self.0.state.lock().admits_now(ask, Instant::now())
    }

    /// Waits for a slot, at most the lane's `max_wait`.
    pub async fn acquire(&self, ask: impl Into<Ask>) -> Result<Permit, Rejected> {
        let ask = ask.into();
        let (rx, max_wait, lane) = {
            let mut st = self.0.state.lock();
            let lane = ask.lane.min(st.lanes.len().saturating_sub(1));
            let now = Instant::now();
            if st.open(now) && st.waiting() == 0 && st.ready_at(now, ask.tokens) <= now {
                return Ok(take(&self.0, &mut st, lane, now, ask.tokens));
            }
            let retry_after = retry_after(&mut st, now);
            let Some(l) = st.lanes.get_mut(lane) else {
                return Err(Rejected::QueueFull { lane, retry_after });
            };
            if l.waiting.len() >= l.spec.max_queue {
                // Full, perhaps of requests that have gone: count only those still waiting.
                l.waiting.retain(|w| !w.tx.is_closed());
            }
            if l.waiting.len() >= l.spec.max_queue {
                return Err(Rejected::QueueFull { lane, retry_after });
            }
            let (tx, rx) = oneshot::channel();
            l.waiting.push(
                &ask.tenant,
                Waiter {
                    tx,
                    tokens: ask.tokens,
                },
            );
            (rx, l.spec.max_wait, lane)
        };
        // The newcomer may be first in line behind a pacer or a pause that has no task
        // waiting on it yet.
        grant_and_wake(&self.0);
        match timeout_at(Instant::now() + max_wait, rx).await {
            Ok(Ok(permit)) => Ok(permit),
            _ => {
                let retry_after = retry_after(&mut self.0.state.lock(), Instant::now());
                Err(Rejected::TimedOut { lane, retry_after })
            }
        }
    }

    /// A snapshot.
    pub fn stats(&self) -> AdmissionStats {
        let mut st = self.0.state.lock();
        let now = Instant::now();
        let (requests_pace, tokens_pace) = st.pacer.state(now);
        AdmissionStats {
            requests_pace,
            tokens_pace,
            tenants_waiting: st.lanes.iter().map(|l| l.waiting.tenants()).collect(),
            limit: st.limit,
            inflight: st.inflight,
            lanes: st
                .lanes
                .iter()
                .map(|l| {
                    (
                        l.spec.name.clone(),
                        l.inflight,
                        l.waiting.iter().filter(|w| !w.tx.is_closed()).count(),
                    )
                })
                .collect(),
            paused_until: st.paused_until.filter(|p| *p > now),
        }
    }
}

/// When the queue will have drained what waits now: waiting ÷ drain rate, 1 s to 5 min.
fn retry_after(st: &mut State, now: Instant) -> Duration {
    let waiting = st.waiting();
    let rate = st.drained.per_second(now);
    let secs = if rate > 0.0 {
        (waiting as f64 + 1.0) / rate
    } else {
        1.0
    };
    Duration::from_secs_f64(secs.clamp(1.0, 300.0).ceil())
}

#[cfg(test)]
mod tests;
