//! Admission: a limit on requests in flight to one upstream, and a bounded queue per lane
//! (interactive, batch) for those beyond it. Work waits rather than fails; when a lane's
//! queue is full or its wait too long, the caller is told when to come back, from the
//! measured rate at which the queue drains.

mod scheduler;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio::time::{Instant, timeout_at};

pub use scheduler::{LaneLoad, guaranteed, next_lane};

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

/// How many requests finished per second over the last ten seconds.
#[derive(Debug)]
struct DrainRate {
    buckets: [u32; 10],
    head_second: u64,
    origin: Instant,
}

impl DrainRate {
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

    fn per_second(&mut self, now: Instant) -> f64 {
        self.advance(now);
        f64::from(self.buckets.iter().sum::<u32>()) / 10.0
    }
}

struct Lane {
    spec: LaneSpec,
    inflight: usize,
    waiting: VecDeque<oneshot::Sender<Permit>>,
}

struct State {
    limit: usize,
    inflight: usize,
    lanes: Vec<Lane>,
    drained: DrainRate,
    /// No slot is granted before this (the upstream asked us to wait).
    paused_until: Option<Instant>,
}

impl State {
    fn open(&self, now: Instant) -> bool {
        self.paused_until.is_none_or(|p| now >= p) && self.inflight < self.limit
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
            let spilled = {
                let mut st = inner.state.lock();
                st.inflight = st.inflight.saturating_sub(1);
                if let Some(l) = st.lanes.get_mut(self.lane) {
                    l.inflight = l.inflight.saturating_sub(1);
                }
                st.drained.count(Instant::now());
                grant(&inner, &mut st)
            };
            // Permits whose waiter had gone; dropping them (outside the lock) frees them.
            drop(spilled);
        }
    }
}

/// A snapshot, for metrics and tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdmissionStats {
    /// The current limit.
    pub limit: usize,
    /// Requests in flight.
    pub inflight: usize,
    /// (lane, in flight, waiting) per lane.
    pub lanes: Vec<(Arc<str>, usize, usize)>,
    /// Until when a 429 holds slots back, if one does.
    pub paused_until: Option<Instant>,
}

/// Hands free slots to waiters, best lane first; returns the permits nobody took.
fn grant(inner: &Arc<Inner>, st: &mut State) -> Vec<Permit> {
    let mut spilled = Vec::new();
    let now = Instant::now();
    while st.open(now) {
        let loads: Vec<LaneLoad> = st
            .lanes
            .iter()
            .map(|l| LaneLoad {
                share: l.spec.share,
                inflight: l.inflight,
                waiting: l.waiting.len(),
            })
            .collect();
        let Some(i) = next_lane(st.limit, &loads) else {
            break;
        };
        let Some(tx) = st.lanes.get_mut(i).and_then(|l| l.waiting.pop_front()) else {
            break;
        };
        let permit = take(inner, st, i);
        if let Err(unwanted) = tx.send(permit) {
            spilled.push(unwanted);
        }
    }
    spilled
}

/// Counts a slot taken by lane `i` and makes its permit.
fn take(inner: &Arc<Inner>, st: &mut State, i: usize) -> Permit {
    st.inflight += 1;
    if let Some(l) = st.lanes.get_mut(i) {
        l.inflight += 1;
    }
    Permit {
        admission: Some(inner.clone()),
        lane: i,
        inflight: st.inflight,
    }
}

impl Admission {
    /// An admission of `limit` slots over `lanes` (in priority order).
    pub fn new(limit: usize, lanes: Vec<LaneSpec>) -> Self {
        let lanes = lanes
            .into_iter()
            .map(|spec| Lane {
                spec,
                inflight: 0,
                waiting: VecDeque::new(),
            })
            .collect();
        Self(Arc::new(Inner {
            state: Mutex::new(State {
                limit: limit.max(1),
                inflight: 0,
                lanes,
                drained: DrainRate::new(Instant::now()),
                paused_until: None,
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
        let spilled = {
            let mut st = self.0.state.lock();
            st.limit = limit.max(1);
            grant(&self.0, &mut st)
        };
        drop(spilled);
    }

    /// Grants no slot before `until`: the upstream asked us to wait (a 429's `retry-after`).
    /// Requests keep queueing meanwhile; at `until` the queue resumes.
    pub fn pause_until(&self, until: Instant) {
        {
            let mut st = self.0.state.lock();
            if st.paused_until.is_some_and(|p| p >= until) {
                return;
            }
            st.paused_until = Some(until);
        }
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(until).await;
            let spilled = {
                let mut st = me.0.state.lock();
                grant(&me.0, &mut st)
            };
            drop(spilled);
        });
    }

    /// Whether slots are held back at `now` because the upstream asked us to wait.
    pub fn is_paused(&self, now: Instant) -> bool {
        self.0.state.lock().paused_until.is_some_and(|p| now < p)
    }

    /// A slot now if one is free, never a wait (hedges and other optional work). Free slots
    /// and waiters never coexist outside a pause (a freed slot goes straight to a waiter), so
    /// this cannot jump the queue.
    pub fn try_acquire(&self, lane: usize) -> Option<Permit> {
        let mut st = self.0.state.lock();
        if st.open(Instant::now()) && lane < st.lanes.len() {
            Some(take(&self.0, &mut st, lane))
        } else {
            None
        }
    }

    /// Waits for a slot in `lane`, at most the lane's `max_wait`.
    pub async fn acquire(&self, lane: usize) -> Result<Permit, Rejected> {
        let (rx, max_wait) = {
            let mut st = self.0.state.lock();
            let lane = lane.min(st.lanes.len().saturating_sub(1));
            let waiting = st.lanes.iter().any(|l| !l.waiting.is_empty());
            let now = Instant::now();
            if st.open(now) && !waiting {
                return Ok(take(&self.0, &mut st, lane));
            }
            let retry_after = retry_after(&mut st, now);
            let Some(l) = st.lanes.get_mut(lane) else {
                return Err(Rejected::QueueFull { lane, retry_after });
            };
            l.waiting.retain(|tx| !tx.is_closed());
            if l.waiting.len() >= l.spec.max_queue {
                return Err(Rejected::QueueFull { lane, retry_after });
            }
            let (tx, rx) = oneshot::channel();
            l.waiting.push_back(tx);
            (rx, l.spec.max_wait)
        };
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
        let st = self.0.state.lock();
        AdmissionStats {
            limit: st.limit,
            inflight: st.inflight,
            lanes: st
                .lanes
                .iter()
                .map(|l| {
                    (
                        l.spec.name.clone(),
                        l.inflight,
                        l.waiting.iter().filter(|t| !t.is_closed()).count(),
                    )
                })
                .collect(),
            paused_until: st.paused_until.filter(|p| *p > Instant::now()),
        }
    }
}

/// When the queue will have drained what waits now: waiting ÷ drain rate, 1 s to 5 min.
fn retry_after(st: &mut State, now: Instant) -> Duration {
    let waiting: usize = st.lanes.iter().map(|l| l.waiting.len()).sum();
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
