//! One attempt at one deployment, up to its first byte, holding its admission permit and
//! telling the deployment's limiter how it went.

use futures::StreamExt;
use sluice_core::{ErrorKind, GatewayError};
use sluice_providers::{RateReport, StreamEvent, UpstreamCall, UpstreamResponse};
use sluice_tail::Verdict;
use sluice_tail::admission::Permit;
use sluice_tail::limit::Sample;
use tokio::time::Instant;

use super::{Answer, Job};
use sluice_routing::Deployment;

/// Whether a failure says the upstream is overloaded (the limiter's "drop").
fn is_drop(e: &GatewayError) -> bool {
    e.is_overload()
}

/// Runs one attempt. A stream is held until its first frame so that a failure before any
/// byte still answers with a proper status. The time to that first byte, or the failure,
/// is fed to the deployment's limiter and breaker; an attempt dropped before either (it lost
/// a race, or the client left) says nothing about the upstream and feeds nothing.
pub(crate) async fn first_byte(
    d: Deployment,
    job: Job,
    attempt: usize,
    mut permit: Option<Permit>,
) -> Result<Answer, GatewayError> {
    let started = Instant::now();
    let inflight = permit.as_ref().map_or(1, |p| p.inflight);
    let streamed = job.request.stream;
    let report = RateReport::default();
    let result = reach(&d, job, report.clone(), attempt).await;
    // The breaker hears of the upstream's own faults and successes, and how long they took,
    // not of 429s or 4xx.
    let now = Instant::now();
    let took = now.saturating_duration_since(started);
    let health = match &result {
        Ok(_) => Some(Verdict { ok: true, took }),
        Err(e) if e.kind.is_upstream_fault() => Some(Verdict { ok: false, took }),
        Err(_) => None,
    };
    d.record_health(now, health);
    if let Some(limiter) = &d.limiter {
        // What the upstream said of its rate limits paces what follows, whatever the outcome.
        if let Some(limits) = report.take() {
            limiter.observe(&limits);
        }
        let now = Instant::now();
        let sample = Sample {
            rtt: now.saturating_duration_since(started),
            inflight,
            dropped: result.as_ref().err().is_some_and(is_drop),
            class: usize::from(!streamed),
        };
        let says_something = result.is_ok() || sample.dropped;
        if says_something {
            limiter.sample(now, sample);
        }
        if let Some(p) = permit.as_mut() {
            p.answered(sample.dropped);
        }
    }
    let mut answer = result?;
    if let Answer::Complete { permit: slot, .. } | Answer::Stream { permit: slot, .. } = &mut answer
    {
        *slot = permit;
    }
    Ok(answer)
}

/// The attempt's answer at its first byte (without its permit yet).
async fn reach(
    d: &Deployment,
    job: Job,
    rate_report: RateReport,
    attempt: usize,
) -> Result<Answer, GatewayError> {
    let call = UpstreamCall {
        request: job.request,
        model: d.model.clone(),
        request_id: job.id,
        deadline: job.deadline,
        rate_report,
        trace: job
            .trace
            .as_deref()
            .and_then(|t| crate::walk::trace::upstream(t, attempt)),
    };
    match d.provider.call(call).await? {
        UpstreamResponse::Complete(c) => Ok(Answer::Complete {
            attempt,
            body: c.body,
            usage: c.usage,
            at: c.first_byte,
            permit: None,
            native: c.native,
        }),
        UpstreamResponse::Stream(mut s) => {
            let mut usage = None;
            loop {
                match s.next().await {
                    Some(Ok(StreamEvent::Frame(first))) => {
                        return Ok(Answer::Stream {
                            attempt,
                            first,
                            native: false,
                            rest: s,
                            usage,
                            at: Instant::now(),
                            permit: None,
                        });
                    }
                    // An upstream that passes its own events on sends them ahead of the
                    // frames: the client of its API reads those.
                    Some(Ok(StreamEvent::Native(first))) => {
                        return Ok(Answer::Stream {
                            attempt,
                            first,
                            native: true,
                            rest: s,
                            usage,
                            at: Instant::now(),
                            permit: None,
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
