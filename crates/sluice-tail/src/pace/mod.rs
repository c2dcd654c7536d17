//! Pacing under an upstream's rate limits: a bucket per dimension (requests, tokens per
//! minute), configured or learned from what the upstream's answers report, so that sluice
//! holds a call until the upstream can take it instead of sending it into a certain 429.
//!
//! A provider's limit is a continuously refilling bucket whose burst is unknown (OpenAI
//! enforces 60,000 RPM as 1,000 a second). Until an answer says otherwise, sluice assumes
//! the smallest sensible burst, one second's worth; each report then gives the burst as
//! `remaining + reset × rate` (the bucket refills at `rate`, and `reset` is how long until it
//! is full), and caps what sluice thinks is left by what the provider says is left.
//!
//! An upstream that announces no limit and has none configured is paced at a rate learnt
//! from its 429s ([`learn`]), once it has answered one.
//!
//! A 429 itself is decided in [`cooldown`]: how long admission pauses and hedges keep away.

#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
pub mod cooldown;
pub mod learn;

pub use cooldown::{
    Cooldowns, Cooling, DEFAULT_RETRY_AFTER, HEDGE_QUIET_AFTER_429, Pushback, after_429,
    wait_after_429,
};

use std::time::Duration;

use tokio::time::Instant;

use crate::bucket::MinuteBucket;

/// Configured limits; either may be learned from headers instead.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PaceSpec {
    /// Requests per minute.
    pub rpm: Option<u64>,
    /// Tokens per minute.
    pub tpm: Option<u64>,
}

/// A dimension of a limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dimension {
    /// Requests.
    Requests,
    /// Tokens.
    Tokens,
}

/// What one dimension of a pacer holds now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DimensionState {
    /// Units per minute.
    pub per_minute: u64,
    /// The burst it allows.
    pub burst: u64,
    /// Units it would spend now.
    pub available: u64,
}

#[derive(Debug)]
struct Dim {
    /// The operator's ceiling; reports may lower the rate below it, never raise it above.
    configured: Option<u64>,
    bucket: Option<MinuteBucket>,
}

impl Dim {
    fn new(configured: Option<u64>, now: Instant) -> Self {
        let bucket = configured
            .filter(|r| *r > 0)
            .map(|r| MinuteBucket::new(r, Some(one_second_of(r)), now));
        Self { configured, bucket }
    }

    fn wait(&mut self, now: Instant, n: u64) -> Duration {
        self.bucket
            .as_mut()
            .map_or(Duration::ZERO, |b| b.wait_for(now, n))
    }

    fn take(&mut self, now: Instant, n: u64) {
        if let Some(b) = self.bucket.as_mut() {
            b.take(now, n);
        }
    }

    fn observe(&mut self, now: Instant, limit: u64, remaining: u64, reset: Duration) {
        let rate = self.configured.map_or(limit, |c| c.min(limit));
        if rate == 0 {
            return;
        }
        let refilling = (reset.as_secs_f64() * rate as f64 / 60.0).round() as u64;
        let burst = remaining.saturating_add(refilling).clamp(1, rate);
        let bucket = self
            .bucket
            .get_or_insert_with(|| MinuteBucket::new(rate, Some(burst), now));
        bucket.reshape(now, rate, burst);
        bucket.at_most(now, remaining);
    }

    fn state(&mut self, now: Instant) -> Option<DimensionState> {
        self.bucket.as_mut().map(|b| DimensionState {
            per_minute: b.limit(),
            burst: b.capacity(),
            available: b.remaining(now),
        })
    }
}

fn one_second_of(per_minute: u64) -> u64 {
    per_minute.div_ceil(60).max(1)
}

/// An upstream's rate-limit buckets as admission reads and writes them. One process keeps a
/// [`Pacer`]; instances that share an upstream's limit keep one set of buckets between them
/// by another implementation, admission unchanged. Every call takes the instant it is about.
pub trait Pace: Send + std::fmt::Debug {
    /// The earliest instant from `now` at which a call costing `tokens` may go.
    fn ready_at(&mut self, now: Instant, tokens: u64) -> Instant;
    /// As [`Pace::ready_at`], for a call of lane `lane` (0 the first, most urgent): a pacer
    /// shared by several instances keeps part of the limit for the first lane's calls.
    fn ready_in_lane(&mut self, now: Instant, tokens: u64, lane: usize) -> Instant {
        let _ = lane;
        self.ready_at(now, tokens)
    }
    /// How many calls wait for this pacer now: a pacer shared by several instances gives
    /// each its turns in proportion to what waits at it; one of this instance alone needs
    /// nothing of it.
    fn demand(&mut self, waiting: usize) {
        let _ = waiting;
    }
    /// Counts a call costing `tokens` sent at `now`.
    fn take(&mut self, now: Instant, tokens: u64);
    /// What an answer reported of dimension `dim`: its per-minute `limit`, what is
    /// `remaining`, and how long until it is whole again (`reset`).
    fn observe(
        &mut self,
        now: Instant,
        dim: Dimension,
        limit: u64,
        remaining: u64,
        reset: Duration,
    );
    /// A 429 at `now`: nothing is left.
    fn exhausted(&mut self, now: Instant);
    /// The upstream asked for nothing to be sent before `until` (told at `now`, after
    /// [`Pace::exhausted`]): a pacer shared by several instances pauses them all; one of this
    /// instance alone leaves the pause to admission.
    fn paused(&mut self, now: Instant, until: Instant) {
        let _ = (now, until);
    }
    /// (requests, tokens) as the buckets hold them at `now`.
    fn state(&mut self, now: Instant) -> (Option<DimensionState>, Option<DimensionState>);
}

impl Pace for Pacer {
    fn ready_at(&mut self, now: Instant, tokens: u64) -> Instant {
        Pacer::ready_at(self, now, tokens)
    }

    fn take(&mut self, now: Instant, tokens: u64) {
        Pacer::take(self, now, tokens);
    }

    fn observe(
        &mut self,
        now: Instant,
        dim: Dimension,
        limit: u64,
        remaining: u64,
        reset: Duration,
    ) {
        Pacer::observe(self, now, dim, limit, remaining, reset);
    }

    fn exhausted(&mut self, now: Instant) {
        Pacer::exhausted(self, now);
    }

    fn state(&mut self, now: Instant) -> (Option<DimensionState>, Option<DimensionState>) {
        Pacer::state(self, now)
    }
}

/// The pacer of one upstream.
#[derive(Debug)]
pub struct Pacer {
    requests: Dim,
    tokens: Dim,
    /// The request rate learnt from 429s, while no limit is configured or reported.
    learner: Option<learn::Learner>,
}

impl Pacer {
    /// A pacer with `spec`'s limits (none: it paces once answers report limits, or at a rate
    /// learnt from the upstream's 429s).
    pub fn new(spec: PaceSpec, now: Instant) -> Self {
        Self {
            requests: Dim::new(spec.rpm, now),
            tokens: Dim::new(spec.tpm, now),
            learner: spec.rpm.is_none().then(|| learn::Learner::new(now)),
        }
    }

    /// Paces requests at `per_second`, learnt from 429s.
    fn pace_learnt(&mut self, now: Instant, per_second: f64) {
        let rpm = ((per_second * 60.0).round() as u64).max(1);
        let burst = one_second_of(rpm);
        match self.requests.bucket.as_mut() {
            Some(b) => b.reshape(now, rpm, burst),
            None => self.requests.bucket = Some(MinuteBucket::new(rpm, Some(burst), now)),
        }
    }

    /// The earliest instant from `now` at which a call costing `tokens` may go.
    pub fn ready_at(&mut self, now: Instant, tokens: u64) -> Instant {
        now + self
            .requests
            .wait(now, 1)
            .max(self.tokens.wait(now, tokens))
    }

    /// Counts a call costing `tokens` sent at `now`.
    pub fn take(&mut self, now: Instant, tokens: u64) {
        if let Some(l) = self.learner.as_mut() {
            // Held back by the learnt pace: its bucket had no more than this call's token.
            let held = self
                .requests
                .bucket
                .as_mut()
                .is_some_and(|b| b.remaining(now) <= 1);
            if let Some(rate) = l.sent(now, held) {
                self.pace_learnt(now, rate);
            }
        }
        self.requests.take(now, 1);
        self.tokens.take(now, tokens);
    }

    /// What an answer reported of dimension `dim`: its per-minute `limit`, what is
    /// `remaining`, and how long until it is whole again (`reset`).
    pub fn observe(
        &mut self,
        now: Instant,
        dim: Dimension,
        limit: u64,
        remaining: u64,
        reset: Duration,
    ) {
        match dim {
            Dimension::Requests => {
                // The upstream says its limit: nothing left to learn.
                self.learner = None;
                self.requests.observe(now, limit, remaining, reset);
            }
            Dimension::Tokens => self.tokens.observe(now, limit, remaining, reset),
        }
    }

    /// A 429: whatever the buckets thought, nothing is left now; an upstream that announces
    /// no limit is paced at what it accepted.
    pub fn exhausted(&mut self, now: Instant) {
        if let Some(rate) = self.learner.as_mut().and_then(|l| l.refused(now)) {
            self.pace_learnt(now, rate);
        }
        for d in [&mut self.requests, &mut self.tokens] {
            if let Some(b) = d.bucket.as_mut() {
                b.at_most(now, 0);
            }
        }
    }

    /// (requests, tokens) as the pacer holds them at `now`.
    pub fn state(&mut self, now: Instant) -> (Option<DimensionState>, Option<DimensionState>) {
        (self.requests.state(now), self.tokens.state(now))
    }
}

#[cfg(test)]
mod tests;
