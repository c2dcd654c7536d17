//! One try at a deployment, hedged when the group hedges the request's lane and the try is
//! slow: after the upstream's observed quantile, a second attempt goes to another
//! deployment; the first good first byte wins and the other attempt is dropped, which closes
//! its connection and stops the upstream's work.

use sluice_core::{AttemptKind, AttemptOutcome, GatewayError, Phase};
use sluice_routing::{Deployment, ModelGroup};
use sluice_tail::admission::Permit;
use sluice_tail::hedge::{BodyQuantile, Candidate, DelayRule, Hedge, Look, Next, Window, may_take};
use std::pin::pin;
use tokio::time::{Instant, sleep_until};

use super::attempt::first_byte;
use super::{Answer, Job, median_ttfb, window_key};
use crate::Gateway;
use crate::walk::call::Call;

/// Tries `target` once (`kind` says why), holding `permit`; hedges if the group does. Every
/// decision of the hedge is `sluice_tail::hedge::Hedge`'s: this waits for what each step
/// says (an instant, a place in line) or for the attempt's answer, and sends the hedge.
pub(crate) async fn try_once(
    gw: &Gateway,
    call: &mut Call,
    group: &ModelGroup,
    target: &Deployment,
    job: &Job,
    kind: AttemptKind,
    permit: Option<Permit>,
) -> Result<Answer, GatewayError> {
    let started = Instant::now();
    let p = call.begin_attempt(target, started, kind);
    let mut first = pin!(first_byte(target.clone(), job.clone(), p, permit));
    // Only the lanes the policy hedges (a batch call is never hedged by default).
    let Some(hedging) = group
        .hedging
        .as_ref()
        .filter(|h| h.policy.lanes.covers(job.ask.lane))
    else {
        return conclude(gw, call, p, target, first.await);
    };
    let look = Seen {
        gw,
        group,
        primary: target,
        job,
    };
    let mut hedge = Hedge::new(hedging, started, job.deadline);
    // `biased` in every select below: on a tie (in virtual time, the answer and a timer at
    // the same instant) the answer wins, the same way on every run; an unbiased select picks
    // a branch at random.
    let mut next = hedge.step(hedging, Instant::now(), &look);
    let (other, hedge_permit) = loop {
        // What set the hedge's time, as soon as a step has set it.
        call.hedge_rule(hedge.rule().map(DelayRule::label));
        next = match next {
            Next::Wait(at) => {
                tokio::select! {
                    biased;
                    r = &mut first => return conclude(gw, call, p, target, r),
                    () = sleep_until(at) => {}
                }
                hedge.step(hedging, Instant::now(), &look)
            }
            Next::Line(mut place) => loop {
                let floor = hedge.floor(hedging, Instant::now());
                tokio::select! {
                    biased;
                    r = &mut first => {
                        hedge.answered_in_line(hedging, place);
                        call.hedge_denied();
                        return conclude(gw, call, p, target, r);
                    }
                    got = &mut place => {
                        break hedge.served(hedging, Instant::now(), got.is_ok(), &look);
                    }
                    () = sleep_until(floor.unwrap_or(started)), if floor.is_some() => {
                        hedge.tick(hedging, Instant::now());
                    }
                }
            },
            Next::Send(to) => break to,
            Next::GiveUp { denied } => {
                if denied {
                    call.hedge_denied();
                }
                return conclude(gw, call, p, target, first.await);
            }
        };
    };
    let now = Instant::now();
    other.claim(now);
    let h = call.begin_attempt(other, now, AttemptKind::Hedge);
    let second = pin!(first_byte(other.clone(), job.clone(), h, hedge_permit));
    race(gw, call, (p, target, first), (h, other, second)).await
}

/// What a hedge's steps read of the gateway: the latency windows of the primary and of the
/// likely target, and where a hedge could go now (healthy; with a limiter a free slot
/// outside a 429 pause, without one no 429 in the last quiet period; its median first byte
/// inside the request's deadline).
struct Seen<'a> {
    gw: &'a Gateway,
    group: &'a ModelGroup,
    primary: &'a Deployment,
    job: &'a Job,
}

impl<'a> Seen<'a> {
    /// The deployment a hedge would go to at `now`, if any.
    fn where_to(&self, now: Instant) -> Option<&'a Deployment> {
        let (gw, group, job) = (self.gw, self.group, self.job);
        let can_take = |d: &Deployment| {
            let c = Candidate {
                healthy: d.healthy(now),
                held_back: match &d.limiter {
                    Some(l) => l.is_paused(now),
                    None => gw.is_cooling(&d.name, now),
                },
                median: median_ttfb(gw, group, d, job),
            };
            may_take(now, job.deadline, &c)
        };
        let elsewhere = group
            .hedging
            .as_ref()
            .is_some_and(|h| h.policy.elsewhere_only);
        gw.routes
            .pick_other(group, self.primary, &job.id, can_take)
            .filter(|d| !elsewhere || d.name != self.primary.name)
    }

    /// `d`'s window body at quantile `q` (answers delivered as this one's: streamed or not).
    fn body(&self, d: &Deployment, q: f64, min_samples: u64) -> Option<BodyQuantile> {
        self.gw.observers.telemetry.windows().body_quantile(
            &window_key(self.group, d, self.job.request.stream),
            Phase::Ttfb,
            Instant::now(),
            q,
            min_samples,
        )
    }
}

impl<'a> Look for Seen<'a> {
    type Target = (&'a Deployment, Option<Permit>);

    fn observed(&self) -> Option<BodyQuantile> {
        let p = &self.group.hedging.as_ref()?.policy;
        self.body(self.primary, p.quantile, p.min_samples)
    }

    fn ttfb(&self, window: Window, q: f64) -> Option<std::time::Duration> {
        let min_samples = self.group.hedging.as_ref()?.policy.min_samples;
        let d = match window {
            Window::Primary => self.primary,
            Window::Target => {
                let now = Instant::now();
                self.gw
                    .routes
                    .pick_other(self.group, self.primary, &self.job.id, |d| d.healthy(now))?
            }
        };
        self.body(d, q, min_samples).map(|b| b.value)
    }

    fn could_go(&self, now: Instant) -> bool {
        self.where_to(now).is_some()
    }

    fn claim(&self, now: Instant) -> Option<Self::Target> {
        let d = self.where_to(now)?;
        match &d.limiter {
            None => Some((d, None)),
            Some(l) => l.try_acquire(self.job.ask.clone()).map(|p| (d, Some(p))),
        }
    }
}

/// Races two attempts to the first good first byte. A failure of one waits for the other;
/// when both fail, the first attempt's error is answered.
async fn race<A, B>(
    gw: &Gateway,
    call: &mut Call,
    (p, pd, mut first): (usize, &Deployment, A),
    (h, hd, mut second): (usize, &Deployment, B),
) -> Result<Answer, GatewayError>
where
    A: Future<Output = Result<Answer, GatewayError>> + Unpin,
    B: Future<Output = Result<Answer, GatewayError>> + Unpin,
{
    let mut first_failed: Option<GatewayError> = None;
    let mut second_failed = false;
    loop {
        tokio::select! {
            biased;
            r = &mut first, if first_failed.is_none() => match r {
                Ok(reply) => {
                    if !second_failed {
                        call.end_attempt(h, AttemptOutcome::Lost, Instant::now());
                    }
                    return Ok(win(call, reply));
                }
                Err(e) => {
                    fail(gw, call, p, pd, &e);
                    if second_failed {
                        return Err(e);
                    }
                    first_failed = Some(e);
                }
            },
            r = &mut second, if !second_failed => match r {
                Ok(reply) => {
                    if first_failed.is_none() {
                        call.end_attempt(p, AttemptOutcome::Lost, Instant::now());
                    }
                    return Ok(win(call, reply));
                }
                Err(e) => {
                    fail(gw, call, h, hd, &e);
                    if let Some(pe) = first_failed.take() {
                        return Err(pe);
                    }
                    second_failed = true;
                }
            },
        }
    }
}

/// The outcome of a try without a hedge.
fn conclude(
    gw: &Gateway,
    call: &mut Call,
    i: usize,
    d: &Deployment,
    r: Result<Answer, GatewayError>,
) -> Result<Answer, GatewayError> {
    match r {
        Ok(reply) => Ok(win(call, reply)),
        Err(e) => {
            fail(gw, call, i, d, &e);
            Err(e)
        }
    }
}

/// Ends attempt `i` (at `d`) as failed, and lets the gateway learn from it (a 429 pauses the
/// deployment's admission and keeps hedges away).
fn fail(gw: &Gateway, call: &mut Call, i: usize, d: &Deployment, e: &GatewayError) {
    let now = Instant::now();
    if e.is_rate_limited() {
        call.upstream_429();
    }
    gw.attempt_failed(d, e, now);
    call.end_attempt(i, AttemptOutcome::Failed(e.kind), now);
}

/// Makes the attempt that produced `answer` the call's answer.
fn win(call: &mut Call, answer: Answer) -> Answer {
    match &answer {
        Answer::Complete {
            attempt,
            usage,
            at,
            body,
            ..
        } => {
            call.first_byte(*attempt, *at);
            call.set_usage(*usage);
            call.described(body);
        }
        Answer::Stream {
            attempt,
            usage,
            at,
            first,
            native,
            ..
        } => {
            call.first_byte(*attempt, *at);
            if !native {
                call.chunk_described(first);
            }
            if let Some(u) = usage {
                call.used(*u);
            }
        }
        Answer::Cached(_) => {}
    }
    answer
}
