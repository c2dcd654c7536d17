//! One try at a deployment, hedged when the group hedges and the try is slow: after the
//! upstream's observed quantile, a second attempt goes to another deployment; the first good
//! first byte wins and the other attempt is dropped, which closes its connection and stops
//! the upstream's work.

use sluice_core::{AttemptKind, AttemptOutcome, GatewayError, Phase};
use sluice_routing::{Deployment, ModelGroup};
use sluice_tail::admission::Permit;
use sluice_tail::hedge::{
    BodyQuantile, Candidate, DEADLINE_TTFB_QUANTILE, DelayRule, LAST_USEFUL_QUANTILE, When,
    latest_start, may_take,
};
use std::pin::pin;
use tokio::time::{Instant, sleep_until};

use super::attempt::first_byte;
use super::{Answer, Job, median_ttfb, window_key};
use crate::Gateway;
use crate::walk::call::Call;

/// Tries `target` once (`kind` says why), holding `permit`; hedges if the group does.
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
    let Some(hedging) = group.hedging.as_ref() else {
        return conclude(gw, call, p, target, first.await);
    };
    // Every attempt earns the budget its share of a hedge.
    hedging.budget.deposit(started);
    // `biased` in every select below: on a tie (in virtual time, the answer and a timer at
    // the same instant) the answer wins, the same way on every run; an unbiased select picks
    // a branch at random.
    let (hedge_at, until) = loop {
        let now = Instant::now();
        let observed = observed_quantile(gw, group, target, job.request.stream);
        let ttfb = |q| hedge_ttfb(gw, group, target, job, now, q);
        let latest = latest_start(job.deadline, ttfb(DEADLINE_TTFB_QUANTILE));
        match hedging.policy.when_by(started, now, observed, latest) {
            (When::HedgeAt(at), rule) => {
                call.record_mut().hedge_rule = rule.map(DelayRule::label);
                break (at, latest_start(job.deadline, ttfb(LAST_USEFUL_QUANTILE)));
            }
            (When::Recheck(at), _) => tokio::select! {
                biased;
                r = &mut first => return conclude(gw, call, p, target, r),
                () = sleep_until(at) => {}
            },
        }
    };
    tokio::select! {
        biased;
        r = &mut first => return conclude(gw, call, p, target, r),
        () = sleep_until(hedge_at) => {}
    }
    // The attempt is slower than the group's hedging quantile: hedge to another deployment
    // that can take it now, if the budget allows: its breaker closed, and with a limiter a
    // free slot (a hedge never queues, and the limiter holds slots back while a 429 pause
    // lasts); without one, no 429 in the last quiet period (the hedge would spend quota the
    // upstream's next ordinary request needs). And only if its median first byte fits in
    // what is left of the request's deadline.
    //
    // With no token in the budget, the request waits in line for the next one while its
    // attempt goes on: if it is truly stuck it will still be waiting when a token comes. With
    // a deadline, only while a hedge could still land in it (the line serves whoever has
    // the most time left).
    let where_to = |now: Instant| {
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
        gw.routes.pick_other(group, target, &job.id, can_take)
    };
    let mut now = Instant::now();
    let wanted = where_to(now).is_some();
    let mut token = wanted && hedging.budget.try_spend(now);
    if wanted && !token {
        let mut place = hedging.budget.wait(now, until);
        loop {
            // Tokens come with requests, and (the floor) with time: wake for the latter too.
            let floor = hedging.budget.whole_token_at(Instant::now());
            tokio::select! {
                biased;
                r = &mut first => {
                    // A token handed over as the answer came goes back.
                    if place.try_recv().is_ok() {
                        hedging.budget.refund();
                    }
                    call.record_mut().hedge_denied = true;
                    return conclude(gw, call, p, target, r);
                }
                got = &mut place => {
                    token = got.is_ok();
                    break;
                }
                () = sleep_until(floor.unwrap_or(started)), if floor.is_some() => {
                    hedging.budget.tick(Instant::now());
                }
            }
        }
        now = Instant::now();
    }
    // A token in hand: the target and its slot, checked again (time has passed).
    let slot = where_to(now)
        .filter(|_| token)
        .and_then(|d| match &d.limiter {
            None => Some((d, None)),
            Some(l) => l
                .try_acquire(job.ask.clone())
                .map(|permit| (d, Some(permit))),
        });
    let Some((other, hedge_permit)) = slot else {
        if token {
            hedging.budget.refund();
        }
        call.record_mut().hedge_denied = true;
        return conclude(gw, call, p, target, first.await);
    };
    other.claim(now);
    let h = call.begin_attempt(other, now, AttemptKind::Hedge);
    let second = pin!(first_byte(other.clone(), job.clone(), h, hedge_permit));
    race(gw, call, (p, target, first), (h, other, second)).await
}

/// The upstream's observed hedging quantile of time to first byte (of answers delivered the
/// same way: streamed or complete) over the body of its window (a cluster of stalls left
/// out), once the window has enough samples.
fn observed_quantile(
    gw: &Gateway,
    group: &ModelGroup,
    target: &Deployment,
    stream: bool,
) -> Option<BodyQuantile> {
    let p = &group.hedging.as_ref()?.policy;
    gw.telemetry.windows().body_quantile(
        &window_key(group, target, stream),
        Phase::Ttfb,
        Instant::now(),
        p.quantile,
        p.min_samples,
    )
}

/// How long a hedge is expected to take to its first byte, for a request with a deadline:
/// the likely hedge target's body at quantile `q`, else (its window thin) the primary's own.
fn hedge_ttfb(
    gw: &Gateway,
    group: &ModelGroup,
    primary: &Deployment,
    job: &Job,
    now: Instant,
    q: f64,
) -> Option<std::time::Duration> {
    job.deadline?;
    let min_samples = group.hedging.as_ref()?.policy.min_samples;
    let window = |d: &Deployment| {
        gw.telemetry
            .windows()
            .body_quantile(
                &window_key(group, d, job.request.stream),
                Phase::Ttfb,
                now,
                q,
                min_samples,
            )
            .map(|b| b.value)
    };
    gw.routes
        .pick_other(group, primary, &job.id, |d| d.healthy(now))
        .and_then(window)
        .or_else(|| window(primary))
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
        call.record_mut().upstream_429s += 1;
    }
    gw.attempt_failed(d, e, now);
    call.end_attempt(i, AttemptOutcome::Failed(e.kind), now);
}

/// Makes the attempt that produced `answer` the call's answer.
fn win(call: &mut Call, answer: Answer) -> Answer {
    match &answer {
        Answer::Complete {
            attempt, usage, at, ..
        } => {
            call.first_byte(*attempt, *at);
            call.record_mut().usage = *usage;
        }
        Answer::Stream {
            attempt, usage, at, ..
        } => {
            call.first_byte(*attempt, *at);
            if usage.is_some() {
                call.record_mut().usage = *usage;
            }
        }
        Answer::Cached(_) => {}
    }
    answer
}
