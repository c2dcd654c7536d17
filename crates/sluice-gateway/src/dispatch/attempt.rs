//! One attempt at one deployment, up to its first byte, holding its admission permit and
//! telling the deployment's limiter how it went.

use bytes::Bytes;
use futures::StreamExt;
use sluice_core::{ErrorKind, GatewayError, Usage};
use sluice_providers::{EventStream, RateReport, StreamEvent, UpstreamCall, UpstreamResponse};
use sluice_tail::Verdict;
use sluice_tail::admission::Permit;
use sluice_tail::limit::Sample;
use tokio::time::Instant;

use super::Job;
use crate::routing::Deployment;

/// An attempt's result at its first byte, before it is known whether it wins.
pub(crate) enum Reply {
    /// A complete answer.
    Complete {
        body: Bytes,
        usage: Option<Usage>,
        at: Instant,
        permit: Option<Permit>,
    },
    /// A stream and its first frame.
    Stream {
        first: Bytes,
        rest: EventStream,
        usage: Option<Usage>,
        at: Instant,
        permit: Option<Permit>,
    },
}

/// Whether a failure says the upstream is overloaded (the limiter's "drop").
fn is_drop(e: &GatewayError) -> bool {
    e.is_rate_limited()
        || matches!(
            e.kind,
            ErrorKind::UpstreamTimeout | ErrorKind::UpstreamServerError
        )
}

/// Runs one attempt. A stream is held until its first frame so that a failure before any
/// byte still answers with a proper status. The time to that first byte, or the failure,
/// is fed to the deployment's limiter and breaker; an attempt dropped before either (it lost
/// a race, or the client left) says nothing about the upstream and feeds nothing.
pub(crate) async fn first_byte(
    d: Deployment,
    job: Job,
    permit: Option<Permit>,
) -> Result<Reply, GatewayError> {
    let started = Instant::now();
    let inflight = permit.as_ref().map_or(1, |p| p.inflight);
    let streamed = job.request.stream;
    let report = RateReport::default();
    let result = reach(&d, job, report.clone()).await;
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
    }
    let (frame, at) = result?;
    Ok(match frame {
        Reached::Complete { body, usage } => Reply::Complete {
            body,
            usage,
            at,
            permit,
        },
        Reached::Stream { first, rest, usage } => Reply::Stream {
            first,
            rest,
            usage,
            at,
            permit,
        },
    })
}

enum Reached {
    Complete {
        body: Bytes,
        usage: Option<Usage>,
    },
    Stream {
        first: Bytes,
        rest: EventStream,
        usage: Option<Usage>,
    },
}

async fn reach(
    d: &Deployment,
    job: Job,
    rate_report: RateReport,
) -> Result<(Reached, Instant), GatewayError> {
    let call = UpstreamCall {
        request: job.request,
        model: d.model.clone(),
        request_id: job.id,
        deadline: job.deadline,
        rate_report,
    };
    match d.provider.call(call).await? {
        UpstreamResponse::Complete(c) => Ok((
            Reached::Complete {
                body: c.body,
                usage: c.usage,
            },
            c.first_byte,
        )),
        UpstreamResponse::Stream(mut s) => {
            let mut usage = None;
            loop {
                match s.next().await {
                    Some(Ok(StreamEvent::Frame(first))) => {
                        return Ok((
                            Reached::Stream {
                                first,
                                rest: s,
                                usage,
                            },
                            Instant::now(),
                        ));
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
