//! Circuit breaker: stop sending to an upstream whose calls keep failing, probe it now and
//! then, and close again once probes succeed (resilience4j's time-window breaker, with
//! probes paced in time rather than counted, so an abandoned probe cannot wedge it).
//!
//! Only the upstream's own faults count: 5xx, timeouts, lost connections. A 429 is the
//! upstream's quota, not its health (admission paces those), and a 4xx is the client's.

use std::time::Duration;

use tokio::time::Instant;

/// When to open, how long to stay open, how to probe.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BreakerPolicy {
    /// Open when at least this share of the window's calls failed...
    pub failure_rate: f64,
    /// ...and the window holds at least this many calls.
    pub min_calls: u32,
    /// The span of calls the rate is taken over.
    pub window: Duration,
    /// How long the first opening lasts; each reopening without a full recovery doubles it.
    pub open_for: Duration,
    /// The longest an opening lasts.
    pub max_open_for: Duration,
    /// While half-open, one probe call per this interval.
    pub probe_every: Duration,
    /// Successful probes in a row that close the breaker.
    pub close_after: u32,
}

impl Default for BreakerPolicy {
    fn default() -> Self {
        Self {
            failure_rate: 0.5,
            min_calls: 20,
            window: Duration::from_secs(30),
            open_for: Duration::from_secs(15),
            max_open_for: Duration::from_secs(300),
            probe_every: Duration::from_secs(1),
            close_after: 3,
        }
    }
}

/// The breaker's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BreakerState {
    /// Calls flow.
    Closed,
    /// No calls until the instant.
    Open {
        /// When probing may start.
        until: Instant,
    },
    /// One probe per interval; `successes` in a row so far.
    HalfOpen {
        /// When the next probe may go.
        next_probe: Instant,
        /// Successful probes in a row.
        successes: u32,
    },
}

impl BreakerState {
    /// `closed`, `open` or `half_open`, for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open { .. } => "open",
            Self::HalfOpen { .. } => "half_open",
        }
    }
}

/// One second of calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Bucket {
    second: u64,
    calls: u32,
    failures: u32,
}

/// A circuit breaker.
#[derive(Clone, Debug)]
pub struct Breaker {
    policy: BreakerPolicy,
    state: BreakerState,
    buckets: Vec<Bucket>,
    origin: Instant,
    /// Openings since the breaker last closed after a recovery.
    openings: u32,
}

impl Breaker {
    /// A closed breaker; its clock starts `now`.
    pub fn new(policy: BreakerPolicy, now: Instant) -> Self {
        let slots = policy.window.as_secs().max(1) as usize;
        Self {
            policy,
            state: BreakerState::Closed,
            buckets: vec![Bucket::default(); slots],
            origin: now,
            openings: 0,
        }
    }

    /// The state at `now` (an opening that has run out reads as half-open).
    pub fn state(&self, now: Instant) -> BreakerState {
        match self.state {
            BreakerState::Open { until } if now >= until => BreakerState::HalfOpen {
                next_probe: until,
                successes: 0,
            },
            s => s,
        }
    }

    /// Whether a call may go at `now` (without taking the slot).
    pub fn would_allow(&self, now: Instant) -> bool {
        match self.state(now) {
            BreakerState::Closed => true,
            BreakerState::Open { .. } => false,
            BreakerState::HalfOpen { next_probe, .. } => now >= next_probe,
        }
    }

    /// Takes the slot for a call at `now`: while half-open, the next probe waits one interval.
    /// Returns whether the call may go.
    pub fn allow(&mut self, now: Instant) -> bool {
        if !self.would_allow(now) {
            return false;
        }
        if let BreakerState::HalfOpen { successes, .. } = self.state(now) {
            self.state = BreakerState::HalfOpen {
                next_probe: now + self.policy.probe_every,
                successes,
            };
        }
        true
    }

    /// When calls may next go, if they may not now.
    pub fn reopens_at(&self, now: Instant) -> Option<Instant> {
        match self.state(now) {
            BreakerState::Closed => None,
            BreakerState::Open { until } => Some(until),
            BreakerState::HalfOpen { next_probe, .. } => (now < next_probe).then_some(next_probe),
        }
    }

    /// Records a call's outcome at `now`; returns the state after it.
    pub fn record(&mut self, now: Instant, ok: bool) -> BreakerState {
        match self.state(now) {
            BreakerState::Closed => {
                self.count(now, ok);
                let (calls, failures) = self.window_totals(now);
                let rate = f64::from(failures) / f64::from(calls.max(1));
                if calls >= self.policy.min_calls && rate >= self.policy.failure_rate {
                    self.open(now);
                }
            }
            BreakerState::HalfOpen {
                next_probe,
                successes,
            } if ok => {
                let successes = successes + 1;
                if successes >= self.policy.close_after {
                    self.close();
                } else {
                    self.state = BreakerState::HalfOpen {
                        next_probe,
                        successes,
                    };
                }
            }
            BreakerState::HalfOpen { .. } => self.open(now),
            // A call that left before the opening ends: its outcome is old news.
            BreakerState::Open { .. } => {}
        }
        self.state(now)
    }

    fn open(&mut self, now: Instant) {
        let doubling = 2u32.saturating_pow(self.openings.min(16));
        let d = self
            .policy
            .open_for
            .saturating_mul(doubling)
            .min(self.policy.max_open_for);
        self.openings += 1;
        self.state = BreakerState::Open { until: now + d };
    }

    fn close(&mut self) {
        self.state = BreakerState::Closed;
        self.openings = 0;
        for b in &mut self.buckets {
            *b = Bucket::default();
        }
    }

    fn second(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.origin).as_secs()
    }

    fn count(&mut self, now: Instant, ok: bool) {
        let second = self.second(now);
        let n = self.buckets.len();
        if let Some(b) = self.buckets.get_mut((second % n as u64) as usize) {
            if b.second != second {
                *b = Bucket {
                    second,
                    ..Bucket::default()
                };
            }
            b.calls += 1;
            if !ok {
                b.failures += 1;
            }
        }
    }

    fn window_totals(&self, now: Instant) -> (u32, u32) {
        let second = self.second(now);
        let n = self.buckets.len() as u64;
        self.buckets
            .iter()
            .filter(|b| b.calls > 0 && second.saturating_sub(b.second) < n)
            .fold((0, 0), |(c, f), b| (c + b.calls, f + b.failures))
    }
}

#[cfg(test)]
mod tests;
