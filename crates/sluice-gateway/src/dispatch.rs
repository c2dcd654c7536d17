//! Dispatch: attempts at upstreams, up to the first byte of the one that answers. With
//! hedging on, a second attempt goes to another deployment once the first has waited longer
//! than its upstream's observed quantile; the first good first byte wins and the other
//! attempt is dropped, which closes its connection and stops the upstream's work.

use std::pin::pin;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use sluice_core::{AttemptOutcome, ChatRequest, ErrorKind, GatewayError, Phase, RequestId, Usage};
use sluice_providers::{EventStream, StreamEvent, UpstreamCall, UpstreamResponse};
use sluice_telemetry::WindowKey;
use tokio::time::{Duration, Instant, sleep};

use crate::Gateway;
use crate::call::Call;
use crate::routing::{Deployment, ModelGroup};

/// What the winning attempt produced once its first byte arrived.
pub enum Answer {
    /// A complete answer.
    Complete {
        /// The attempt's index in the record.
        attempt: usize,
        /// OpenAI JSON.
        body: Bytes,
    },
    /// A stream whose first frame has arrived.
    Stream {
        /// The attempt's index in the record.
        attempt: usize,
        /// The first frame.
        first: Bytes,
        /// Everything after it.
        rest: EventStream,
    },
}

/// One attempt's result at its first byte, before it is known whether it wins.
enum Reply {
    Complete {
        body: Bytes,
        usage: Option<Usage>,
        at: Instant,
    },
    Stream {
        first: Bytes,
        rest: EventStream,
        usage: Option<Usage>,
        at: Instant,
    },
}

/// Sends `request` to `primary`, hedging to another deployment of `group` when the group
/// hedges and the primary is slow.
pub async fn dispatch(
    gw: &Gateway,
    call: &mut Call,
    group: &ModelGroup,
    primary: &Deployment,
    request: Arc<ChatRequest>,
) -> Result<Answer, GatewayError> {
    let id = call.record().request_id.clone();
    let p = call.begin_attempt(primary.name.clone(), Instant::now(), false);
    let mut first = pin!(first_byte(primary.clone(), request.clone(), id.clone()));
    let Some(delay) = hedge_delay(gw, group, primary, request.stream) else {
        let r = first.await;
        return conclude(gw, call, p, r);
    };
    // `biased`: on a tie (in virtual time, the answer and the timer at the same instant) the
    // answer wins, the same way on every run; an unbiased select picks a branch at random.
    tokio::select! {
        biased;
        r = &mut first => return conclude(gw, call, p, r),
        () = sleep(delay) => {}
    }
    // The primary is slower than the group's hedging quantile: hedge to another deployment
    // that is not cooling down after a 429, if the budget allows.
    let now = Instant::now();
    let target = gw
        .routes
        .pick_other(group, primary, &id, |d| !gw.is_cooling(&d.name, now));
    let allowed = target.is_some()
        && group
            .hedging
            .as_ref()
            .is_some_and(|h| h.budget.lock().try_spend());
    let (true, Some(other)) = (allowed, target) else {
        call.record_mut().hedge_denied = true;
        let r = first.await;
        return conclude(gw, call, p, r);
    };
    let h = call.begin_attempt(other.name.clone(), now, true);
    let second = pin!(first_byte(other.clone(), request, id));
    race(gw, call, (p, first), (h, second)).await
}

/// The hedge delay for a request to `primary` now, if the group hedges and the upstream's
/// window (of answers delivered the same way: streamed or complete) has enough samples.
/// Every request counts towards the hedging budget.
fn hedge_delay(
    gw: &Gateway,
    group: &ModelGroup,
    primary: &Deployment,
    stream: bool,
) -> Option<Duration> {
    let hedging = group.hedging.as_ref()?;
    hedging.budget.lock().deposit();
    let key = WindowKey {
        group: group.name.clone(),
        upstream: primary.name.clone(),
        stream,
    };
    let p = &hedging.policy;
    let observed = gw.telemetry.windows().quantile(
        &key,
        Phase::Ttfb,
        Instant::now(),
        p.quantile,
        p.min_samples,
    );
    p.delay(observed)
}

/// Races two attempts to the first good first byte. A failure of one waits for the other;
/// when both fail, the first attempt's error is answered.
async fn race<A, B>(
    gw: &Gateway,
    call: &mut Call,
    (p, mut first): (usize, A),
    (h, mut second): (usize, B),
) -> Result<Answer, GatewayError>
where
    A: Future<Output = Result<Reply, GatewayError>> + Unpin,
    B: Future<Output = Result<Reply, GatewayError>> + Unpin,
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
                    return Ok(win(call, p, reply));
                }
                Err(e) => {
                    fail(gw, call, p, &e);
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
                    return Ok(win(call, h, reply));
                }
                Err(e) => {
                    fail(gw, call, h, &e);
                    if let Some(pe) = first_failed.take() {
                        return Err(pe);
                    }
                    second_failed = true;
                }
            },
        }
    }
}

/// The outcome of a call with a single attempt.
fn conclude(
    gw: &Gateway,
    call: &mut Call,
    i: usize,
    r: Result<Reply, GatewayError>,
) -> Result<Answer, GatewayError> {
    match r {
        Ok(reply) => Ok(win(call, i, reply)),
        Err(e) => {
            fail(gw, call, i, &e);
            Err(e)
        }
    }
}

/// Ends attempt `i` as failed, and lets the gateway learn from it (a 429 starts a cool-down).
fn fail(gw: &Gateway, call: &mut Call, i: usize, e: &GatewayError) {
    let now = Instant::now();
    if let Some(a) = call.record().attempts.get(i) {
        gw.attempt_failed(&a.upstream.clone(), e, now);
    }
    call.end_attempt(i, AttemptOutcome::Failed(e.kind), now);
}

/// Makes attempt `i` the call's answer.
fn win(call: &mut Call, i: usize, reply: Reply) -> Answer {
    match reply {
        Reply::Complete { body, usage, at } => {
            call.first_byte(i, at);
            call.record_mut().usage = usage;
            Answer::Complete { attempt: i, body }
        }
        Reply::Stream {
            first,
            rest,
            usage,
            at,
        } => {
            call.first_byte(i, at);
            if usage.is_some() {
                call.record_mut().usage = usage;
            }
            Answer::Stream {
                attempt: i,
                first,
                rest,
            }
        }
    }
}

/// One attempt, up to its first byte. A stream is held until its first frame so that a
/// failure before any byte still answers with a proper HTTP status.
async fn first_byte(
    d: Deployment,
    request: Arc<ChatRequest>,
    request_id: RequestId,
) -> Result<Reply, GatewayError> {
    let call = UpstreamCall {
        request,
        model: d.model.clone(),
        request_id,
    };
    match d.provider.call(call).await? {
        UpstreamResponse::Complete(c) => Ok(Reply::Complete {
            body: c.body,
            usage: c.usage,
            at: c.first_byte,
        }),
        UpstreamResponse::Stream(mut s) => {
            let mut usage = None;
            loop {
                match s.next().await {
                    Some(Ok(StreamEvent::Frame(first))) => {
                        return Ok(Reply::Stream {
                            first,
                            rest: s,
                            usage,
                            at: Instant::now(),
                        });
                    }
                    Some(Ok(StreamEvent::Usage(u))) => usage = Some(u),
                    Some(Err(e)) => return Err(e),
                    None => {
                        return Err(GatewayError::new(
                            ErrorKind::UpstreamProtocol,
                            "upstream ended the stream before sending anything",
                        ));
                    }
                }
            }
        }
    }
}
