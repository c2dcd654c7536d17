//! The admission queue's whole decision, as state and functions of `now`: whether a request
//! goes at once, which lane's waiter is next when a slot frees, when a paused or paced queue
//! can grant again, and when a refused caller should come back. No clock, no channels: the
//! waiters are anything that knows its cost and whether its caller is still there.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::fair::FairQueue;
use super::scheduler::{LaneLoad, next_lane};
use super::{Ask, LaneSpec, Rejected};
use crate::pace::{DimensionState, Pace};

/// A request waiting in a lane.
pub(crate) trait Waiting {
    /// Tokens its call is expected to count against the upstream's limit.
    fn tokens(&self) -> u64;
    /// Whether its caller has gone (a deadline, a client that left).
    fn gone(&self) -> bool;
}

/// Events counted over the last ten seconds (requests finished, calls granted).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Recent {
    buckets: [u32; 10],
    head_second: u64,
    origin: Instant,
}

impl Recent {
    pub(crate) fn new(now: Instant) -> Self {
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

    /// The second `now` falls in, counted from the origin.
    pub(crate) fn second_of(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.origin).as_secs()
    }

    pub(crate) fn count(&mut self, now: Instant) {
        let s = self.advance(now);
        self.buckets[(s % 10) as usize] += 1;
    }

    fn total(&mut self, now: Instant) -> u32 {
        self.advance(now);
        self.buckets.iter().sum()
    }

    pub(crate) fn per_second(&mut self, now: Instant) -> f64 {
        f64::from(self.total(now)) / 10.0
    }
}

pub(crate) struct Lane<W> {
    pub(crate) spec: LaneSpec,
    pub(crate) inflight: usize,
    pub(crate) waiting: FairQueue<W>,
    /// Calls granted lately.
    granted: Recent,
    /// How fast its queue drains while it is backlogged.
    pub(crate) backlog: super::predict::Backlog,
}

impl<W: Waiting> Lane<W> {
    /// The waiter whose turn it is, dropping those in front of it who gave up (a deadline,
    /// a client gone): pruned as they come up, not by a scan of the whole queue per grant.
    fn next_waiter(&mut self) -> Option<&W> {
        while self.waiting.peek().is_some_and(Waiting::gone) {
            self.waiting.pop();
        }
        self.waiting.peek()
    }
}

/// What the queue does next when it may grant.
#[derive(Debug)]
pub(crate) enum Next<W> {
    /// This lane's waiter has the slot (already counted); `inflight` includes it.
    Grant {
        lane: usize,
        waiter: W,
        inflight: usize,
    },
    /// The next waiter is held back (paused or paced) until then.
    HeldUntil(Instant),
    /// Nothing to grant: no free slot, or nobody waits.
    Idle,
}

pub(crate) struct State<W> {
    pub(crate) limit: usize,
    pub(crate) inflight: usize,
    pub(crate) lanes: Vec<Lane<W>>,
    drained: Recent,
    /// No slot is granted before this (the upstream asked us to wait).
    pub(crate) paused_until: Option<Instant>,
    /// Requests refused at arrival by their predicted wait, and requests accepted that
    /// then waited out their lane's `max_wait` (mispredictions).
    pub(crate) refused_at_arrival: u64,
    pub(crate) timed_out: u64,
    /// Holds calls back until the upstream's rate limits can take them.
    pub(crate) pacer: Box<dyn Pace>,
    /// When a task will next wake to grant slots (a pause or the pacer ends then).
    pub(crate) wake_at: Option<Instant>,
    /// The last instant the next waiter was held back by the upstream's rate limit (the
    /// pacer or a 429's pause), not by the concurrency limit.
    pub(crate) rate_held: Option<Instant>,
    /// Calls awaiting an answer while the upstream's limit is unknown.
    pub(crate) slow: super::slow_start::SlowStart,
}

impl<W: Waiting> State<W> {
    /// `limit` slots over `lanes`, paced by `pacer`, counting from `now`.
    pub(crate) fn new(
        limit: usize,
        lanes: Vec<LaneSpec>,
        pacer: Box<dyn Pace>,
        now: Instant,
    ) -> Self {
        Self {
            limit: limit.max(1),
            inflight: 0,
            lanes: lanes
                .into_iter()
                .map(|spec| Lane {
                    spec,
                    inflight: 0,
                    waiting: FairQueue::default(),
                    granted: Recent::new(now),
                    backlog: super::predict::Backlog::default(),
                })
                .collect(),
            drained: Recent::new(now),
            paused_until: None,
            refused_at_arrival: 0,
            timed_out: 0,
            pacer,
            wake_at: None,
            rate_held: None,
            slow: super::slow_start::SlowStart::open(),
        }
    }

    /// Whether a slot is free at `now` and no pause holds calls back.
    pub(crate) fn open(&self, now: Instant) -> bool {
        self.paused_until.is_none_or(|p| now >= p) && self.inflight < self.limit
    }

    /// Whether the slow start lets one more call go. It ends once the pacer paces requests
    /// (a limit announced, or one learnt from 429s, here or by another instance), or once
    /// its window has grown to the concurrency limit (the upstream took that many calls at
    /// once without a refusal: the window no longer holds anything back).
    fn slow_allows(&mut self, now: Instant) -> bool {
        if self.slow.opening()
            && (self.slow.window() >= self.limit || self.pacer.state(now).0.is_some())
        {
            self.slow.known();
        }
        self.slow.allows(now)
    }

    /// When a call of `tokens` could go, if the slot is there: `now`, or later when paused or
    /// paced.
    pub(crate) fn ready_at(&mut self, now: Instant, tokens: u64) -> Instant {
        let paced = self.pacer.ready_at(now, tokens);
        self.paused_until.map_or(paced, |p| paced.max(p))
    }

    pub(crate) fn waiting(&self) -> usize {
        self.lanes.iter().map(|l| l.waiting.len()).sum()
    }

    /// Whether a request of `tokens` goes straight through at `now`: a slot is free, the
    /// pacer lets it out, and nobody waits ahead of it.
    pub(crate) fn goes_at_once(&mut self, now: Instant, tokens: u64) -> bool {
        self.open(now)
            && self.waiting() == 0
            && self.ready_at(now, tokens) <= now
            && self.slow_allows(now)
    }

    /// Whether `ask` would get a slot at `now` without waiting: one is free, the pacer lets
    /// a call of its cost out, nobody of its lane waits, and its lane would be chosen over
    /// the lanes whose requests do. During a slow start a free slot is enough: calls wait for
    /// its window, which opens with the next answers, so routing keeps a call where it was
    /// headed (where its prompt's prefix went, say) and a hedge, rare and optional, is not
    /// held to it.
    pub(crate) fn admits_now(&mut self, ask: &Ask, now: Instant) -> bool {
        if !self.open(now) || self.ready_at(now, ask.tokens) > now {
            return false;
        }
        if self.slow.opening() {
            // Calls wait for the window, not for a slot.
            return true;
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

    /// The next grant at `now`: best lane first, each lane's tenants in turn, as far as the
    /// pacer allows. A granted slot is counted before it is returned.
    pub(crate) fn next(&mut self, now: Instant) -> Next<W> {
        while self.inflight < self.limit {
            let Some(i) = next_lane(self.limit, &self.loads(now)) else {
                break;
            };
            let Some(lane) = self.lanes.get_mut(i) else {
                break;
            };
            let Some(tokens) = lane.next_waiter().map(Waiting::tokens) else {
                // The lane held only requests that had gone: weigh the lanes again.
                continue;
            };
            if !self.slow_allows(now) {
                // An answer will wake the queue.
                break;
            }
            let (i, tokens) = match self.paced(now, i, tokens) {
                Ok(go) => go,
                Err(ready) => {
                    self.rate_held = Some(now);
                    return Next::HeldUntil(ready);
                }
            };
            let Some(waiter) = self.lanes.get_mut(i).and_then(|l| {
                let w = l.waiting.pop();
                l.backlog.granted(l.waiting.is_empty());
                w
            }) else {
                break;
            };
            let inflight = self.take(i, now, tokens);
            return Next::Grant {
                lane: i,
                waiter,
                inflight,
            };
        }
        Next::Idle
    }

    /// Whether the pacer lets lane `i`'s next call of `tokens` go at `now`; when it holds it,
    /// whether an earlier lane's next call may go instead (a pacer may keep part of a limit
    /// for the first lane, so a held later lane never holds the lanes before it). The lane
    /// and tokens that go, or the earliest instant anything may.
    fn paced(&mut self, now: Instant, i: usize, tokens: u64) -> Result<(usize, u64), Instant> {
        let paused = self.paused_until.filter(|p| *p > now);
        let waiting = self.waiting();
        self.pacer.demand(waiting);
        let mut ready = self.pacer.ready_in_lane(now, tokens, i);
        if ready <= now {
            return paused.map_or(Ok((i, tokens)), Err);
        }
        if paused.is_none() {
            for j in 0..i {
                let Some(t) = self
                    .lanes
                    .get_mut(j)
                    .and_then(|l| l.next_waiter().map(Waiting::tokens))
                else {
                    continue;
                };
                let at = self.pacer.ready_in_lane(now, t, j);
                if at <= now {
                    return Ok((j, t));
                }
                ready = ready.min(at);
            }
        }
        Err(paused.map_or(ready, |p| ready.max(p)))
    }

    /// Counts a slot taken by lane `i` at `now` for a call of `tokens`; returns the calls in
    /// flight, this one included.
    pub(crate) fn take(&mut self, i: usize, now: Instant, tokens: u64) -> usize {
        self.pacer.take(now, tokens);
        self.slow.sent(now);
        self.inflight += 1;
        if let Some(l) = self.lanes.get_mut(i) {
            l.inflight += 1;
            l.granted.count(now);
        }
        self.inflight
    }

    /// Frees a slot of lane `i` at `now` (`answered`: its call had its answer).
    pub(crate) fn release(&mut self, i: usize, now: Instant, answered: bool) {
        if !answered {
            self.slow.gone();
        }
        self.inflight = self.inflight.saturating_sub(1);
        if let Some(l) = self.lanes.get_mut(i) {
            l.inflight = l.inflight.saturating_sub(1);
        }
        self.drained.count(now);
    }

    /// Whether the upstream's rate limit held the queue back at any instant from `since` on.
    pub(crate) fn rate_held_since(&self, since: Instant) -> bool {
        self.rate_held.is_some_and(|h| h >= since)
    }

    /// Queues `waiter` for `ask` in its lane (the last lane for an unknown one), or says why
    /// not and when to come back. Returns the lane and how long it may wait.
    pub(crate) fn enqueue(
        &mut self,
        ask: &Ask,
        waiter: W,
        now: Instant,
    ) -> Result<(usize, Duration), Rejected> {
        let lane = self.lane_of(ask);
        let retry_after = self.retry_after(now);
        let rate_held = self.rate_held;
        let Some(l) = self.lanes.get_mut(lane) else {
            return Err(Rejected::QueueFull {
                lane,
                retry_after,
                rate_limited: false,
            });
        };
        // The rate limit held this lane's queue back since it began to wait: its drain rate,
        // and so a refusal now, is the provider's limit's.
        let rate_limited = rate_held.is_some_and(|h| l.backlog.since().is_some_and(|s| h >= s));
        if l.waiting.len() >= l.spec.max_queue {
            // Full, perhaps of requests that have gone: count only those still waiting.
            l.waiting.retain(|w| !w.gone());
        }
        if l.waiting.len() >= l.spec.max_queue {
            return Err(Rejected::QueueFull {
                lane,
                retry_after,
                rate_limited,
            });
        }
        // It may wait its lane's `max_wait`, or what is left of its deadline if that is less.
        let may_wait = ask.deadline.map_or(l.spec.max_wait, |d| {
            l.spec.max_wait.min(d.saturating_duration_since(now))
        });
        if l.backlog.refuses(l.waiting.len(), now, may_wait).is_some() {
            // Those ahead may have gone: count only those still waiting.
            l.waiting.retain(|w| !w.gone());
            if l.waiting.is_empty() {
                l.backlog.cleared();
            } else if let Some(wait) = l.backlog.refuses(l.waiting.len(), now, may_wait) {
                self.refused_at_arrival += 1;
                return Err(Rejected::WouldWait {
                    lane,
                    wait,
                    rate_limited,
                    retry_after: Duration::from_secs_f64(
                        wait.as_secs_f64().clamp(1.0, 300.0).ceil(),
                    ),
                });
            }
        }
        l.waiting.push(&ask.tenant, waiter);
        l.backlog.queued(now);
        Ok((lane, l.spec.max_wait))
    }

    /// The lane `ask` is counted in (an unknown one in the last).
    pub(crate) fn lane_of(&self, ask: &Ask) -> usize {
        ask.lane.min(self.lanes.len().saturating_sub(1))
    }

    /// A 429 at `now`: the pacer hears that nothing is left. Whether it paces requests
    /// from now on (a limit configured, announced, or learnt from this refusal).
    pub(crate) fn refused(&mut self, now: Instant) -> bool {
        self.pacer.exhausted(now);
        self.paces_requests(now)
    }

    /// Whether the pacer paces requests at `now`.
    pub(crate) fn paces_requests(&mut self, now: Instant) -> bool {
        self.pacer.state(now).0.is_some()
    }

    /// Grants no slot before `until` (a later pause wins); the pacer hears of the pause.
    /// Whether the pause changed.
    pub(crate) fn pause_until(&mut self, now: Instant, until: Instant) -> bool {
        self.pacer.paused(now, until);
        if self.paused_until.is_some_and(|p| p >= until) {
            return false;
        }
        self.paused_until = Some(until);
        true
    }

    /// Whether a task should wake at `at` to grant again: none is due sooner (one due at or
    /// before `now` has already run).
    pub(crate) fn should_wake(&self, at: Instant, now: Instant) -> bool {
        self.wake_at.is_none_or(|w| w > at || w <= now)
    }

    /// When the queue will have drained what waits now: waiting ÷ drain rate, 1 s to 5 min.
    pub(crate) fn retry_after(&mut self, now: Instant) -> Duration {
        let waiting = self.waiting();
        let rate = self.drained.per_second(now);
        let secs = if rate > 0.0 {
            (waiting as f64 + 1.0) / rate
        } else {
            1.0
        };
        Duration::from_secs_f64(secs.clamp(1.0, 300.0).ceil())
    }

    /// What the pacer holds of each dimension at `now`.
    pub(crate) fn pace(
        &mut self,
        now: Instant,
    ) -> (Option<DimensionState>, Option<DimensionState>) {
        self.pacer.state(now)
    }

    /// (lane, in flight, still waiting) per lane.
    pub(crate) fn lane_stats(&self) -> Vec<(Arc<str>, usize, usize)> {
        self.lanes
            .iter()
            .map(|l| {
                (
                    l.spec.name.clone(),
                    l.inflight,
                    l.waiting.iter().filter(|w| !w.gone()).count(),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
