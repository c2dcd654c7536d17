//! Circuit breaker: stop sending to an upstream whose calls keep failing or crawling, probe
//! it now and then, and close again once probes succeed (resilience4j's time-window breaker
//! with its failure-rate and slow-call-rate thresholds, plus Envoy's ejection after
//! consecutive failures; probes are paced in time rather than counted, so an abandoned probe
//! cannot wedge it).
//!
//! Only the upstream's own faults count: 5xx, timeouts, lost connections. A 429 is the
//! upstream's quota, not its health (admission paces those), and a 4xx is the client's. A
//! call is slow when its first byte took `slow_call` or longer.

use std::time::Duration;

use tokio::time::Instant;

/// When to open, how long to stay open, how to probe: `breaker = { ... }` of a
/// `[models.GROUP]`, read as it is written (every field optional, unknown fields refused).
#[derive(Clone, Copy, Debug, PartialEq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BreakerPolicy {
    /// Open when at least this share of the window's calls failed...
    pub failure_rate: f64,
    /// ...and the window holds at least this many calls.
    pub min_calls: u32,
    /// The span of calls the rate is taken over.
    #[serde(with = "humantime_serde")]
    pub window: Duration,
    /// How long the first opening lasts; each reopening without a full recovery doubles it.
    #[serde(with = "humantime_serde")]
    pub open_for: Duration,
    /// The longest an opening lasts.
    #[serde(with = "humantime_serde")]
    pub max_open_for: Duration,
    /// While half-open, one probe call per this interval.
    #[serde(with = "humantime_serde")]
    pub probe_every: Duration,
    /// Successful probes in a row that close the breaker.
    pub close_after: u32,
    /// A call whose first byte took this long or longer is slow...
    #[serde(with = "humantime_serde")]
    pub slow_call: Duration,
    /// ...and the breaker opens when at least this share of the window's calls were slow
    /// (with `min_calls`; 1: only when all were).
    pub slow_call_rate: f64,
    /// Opens after this many failures in a row, whatever the window says (0: never).
    pub consecutive_failures: u32,
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
            slow_call: Duration::from_secs(30),
            slow_call_rate: 1.0,
            consecutive_failures: 5,
        }
    }
}

impl BreakerPolicy {
    /// What is wrong with it, if anything: (field, message).
    pub fn problems(&self) -> Vec<crate::Problem> {
        let mut out = Vec::new();
        let rate = |r: f64| r > 0.0 && r <= 1.0;
        if !rate(self.failure_rate) {
            out.push(("failure_rate", "must be above 0 and at most 1".into()));
        }
        if self.min_calls == 0 {
            out.push(("min_calls", "must be at least 1".into()));
        }
        if self.window < Duration::from_secs(1) {
            out.push(("window", "must be at least 1s".into()));
        }
        if self.close_after == 0 {
            out.push(("close_after", "must be at least 1".into()));
        }
        if !rate(self.slow_call_rate) {
            out.push(("slow_call_rate", "must be above 0 and at most 1".into()));
        }
        if self.slow_call.is_zero() {
            out.push(("slow_call", "must be longer than zero".into()));
        }
        out
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
    slow: u32,
}

/// What the breaker has seen, for metrics and the admin API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BreakerSnapshot {
    /// The state now.
    pub state: BreakerState,
    /// Calls in the window.
    pub calls: u32,
    /// Of those, failures.
    pub failures: u32,
    /// Of those, slow ones.
    pub slow: u32,
    /// Failures in a row just now.
    pub streak: u32,
    /// Times it opened (reopenings included) since it was built.
    pub opened: u64,
    /// Times it closed again.
    pub closed: u64,
}

/// How a call went, as the breaker judges it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The upstream answered (a failure is a 5xx, a timeout or a lost connection).
    pub ok: bool,
    /// Time to its first byte, or to its failure.
    pub took: Duration,
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
    /// Failures in a row.
    streak: u32,
    opened: u64,
    closed: u64,
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
            streak: 0,
            opened: 0,
            closed: 0,
        }
    }

    /// The state and counts at `now`.
    pub fn snapshot(&self, now: Instant) -> BreakerSnapshot {
        let t = self.window_totals(now);
        BreakerSnapshot {
            state: self.state(now),
            calls: t.calls,
            failures: t.failures,
            slow: t.slow,
            streak: self.streak,
            opened: self.opened,
            closed: self.closed,
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

    /// Records a call's outcome at `now`; returns the state after it. While closed, it opens
    /// on the window's failure or slow-call rate, or on a streak of failures; while
    /// half-open, a failed or slow probe reopens it.
    pub fn record(&mut self, now: Instant, v: Verdict) -> BreakerState {
        let slow = v.took >= self.policy.slow_call;
        self.streak = if v.ok { 0 } else { self.streak + 1 };
        match self.state(now) {
            BreakerState::Closed => {
                self.count(now, v.ok, slow);
                let t = self.window_totals(now);
                let share = |n: u32| f64::from(n) / f64::from(t.calls.max(1));
                let p = &self.policy;
                let by_rate = t.calls >= p.min_calls
                    && (share(t.failures) >= p.failure_rate || share(t.slow) >= p.slow_call_rate);
                let by_streak = p.consecutive_failures > 0 && self.streak >= p.consecutive_failures;
                if by_rate || by_streak {
                    self.open(now);
                }
            }
            BreakerState::HalfOpen {
                next_probe,
                successes,
            } if v.ok && !slow => {
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
        self.opened += 1;
        self.state = BreakerState::Open { until: now + d };
    }

    fn close(&mut self) {
        self.state = BreakerState::Closed;
        self.openings = 0;
        self.streak = 0;
        self.closed += 1;
        for b in &mut self.buckets {
            *b = Bucket::default();
        }
    }

    fn second(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.origin).as_secs()
    }

    fn count(&mut self, now: Instant, ok: bool, slow: bool) {
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
            b.failures += u32::from(!ok);
            b.slow += u32::from(slow);
        }
    }

    fn window_totals(&self, now: Instant) -> Bucket {
        let second = self.second(now);
        let n = self.buckets.len() as u64;
        self.buckets
            .iter()
            .filter(|b| b.calls > 0 && second.saturating_sub(b.second) < n)
            .fold(Bucket::default(), |t, b| Bucket {
                second,
                calls: t.calls + b.calls,
                failures: t.failures + b.failures,
                slow: t.slow + b.slow,
            })
    }
}

#[cfg(test)]
mod tests;
