//! The simulator as an in-process [`Provider`]: the gateway dispatches to it exactly as to an
//! HTTP upstream, so tail tests run the real stack in virtual time.

use std::collections::VecDeque;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use http::{HeaderMap, HeaderName, HeaderValue};
use sluice_core::{ErrorKind, GatewayError, UpstreamReply};
use sluice_providers::{
    Completion, Provider, StreamEvent, UpstreamCall, UpstreamResponse, ratelimit,
};
use tokio::time::{Instant, sleep};

use crate::incoming::incoming;
use crate::limits::{Api, RateState};
use crate::script::{self, Render, Step};
use crate::upstream::{Busy, Fault, Plan, SimUpstream};

/// Leaves what the answer's rate-limit headers would say where the gateway reads them, by
/// way of the same header parser an HTTP upstream's answers go through.
fn report(call: &UpstreamCall, state: &RateState) {
    let mut headers = HeaderMap::new();
    for (k, v) in state.headers(Api::Openai) {
        if let (Ok(k), Ok(v)) = (HeaderName::try_from(k), HeaderValue::try_from(v)) {
            headers.insert(k, v);
        }
    }
    call.rate_report
        .set(ratelimit::parse(&headers, std::time::SystemTime::now()));
}

/// A simulated upstream, dispatched to in-process. It speaks OpenAI chat completions.
#[derive(Clone, Debug)]
pub struct SimProvider(pub Arc<SimUpstream>);

impl Provider for SimProvider {
    fn call(
        &self,
        call: UpstreamCall,
    ) -> BoxFuture<'static, Result<UpstreamResponse, GatewayError>> {
        let up = self.0.clone();
        async move {
            let body = call.request.to_map();
            let inc = incoming(&body, call.request_id.as_str());
            let plan = up.plan(&inc, Instant::now());
            let name = up.name().clone();
            match plan {
                Plan::RateLimited(state) => {
                    report(&call, &state);
                    let headers = state.headers(Api::Openai);
                    let retry_after = headers
                        .iter()
                        .find(|(k, _)| k == "retry-after")
                        .map(|(_, v)| v.clone());
                    Err(GatewayError::rejected(UpstreamReply {
                        status: 429,
                        body: script::error_body(
                            Api::Openai,
                            429,
                            "Rate limit reached for requests",
                        ),
                        content_type: Some("application/json".into()),
                        retry_after,
                    }))
                }
                Plan::Fail(fault, after) => {
                    sleep(after).await;
                    Err(match fault {
                        Fault::Error500 | Fault::Error503 => {
                            let status = if fault == Fault::Error500 { 500 } else { 503 };
                            GatewayError::new(
                                ErrorKind::UpstreamServerError,
                                format!("upstream {name} answered {status}"),
                            )
                        }
                        Fault::Reset => GatewayError::new(
                            ErrorKind::UpstreamConnect,
                            format!("upstream {name} connection failed: connection reset"),
                        ),
                    })
                }
                Plan::Answer(p) => {
                    report(&call, &p.rate);
                    let busy = up.admit().await;
                    let render = Render {
                        api: Api::Openai,
                        model: call.model.to_string(),
                        stream: call.request.stream,
                        include_usage: call.request.include_usage,
                        shape: crate::structured::shape_of(&body),
                    };
                    let steps: VecDeque<Step> = script::answer(&p, &render).into();
                    if call.request.stream {
                        Ok(UpstreamResponse::Stream(play(steps, busy)))
                    } else {
                        complete(steps).await.map(UpstreamResponse::Complete)
                    }
                }
            }
        }
        .boxed()
    }
}

async fn complete(steps: VecDeque<Step>) -> Result<Completion, GatewayError> {
    let mut body = None;
    let mut usage = None;
    for s in steps {
        match s {
            Step::Wait(d) => sleep(d).await,
            Step::Frame(b) => body = Some(b),
            Step::Usage(u) => usage = Some(u),
        }
    }
    let body =
        body.ok_or_else(|| GatewayError::new(ErrorKind::UpstreamProtocol, "empty answer"))?;
    Ok(Completion {
        body,
        usage,
        first_byte: Instant::now(),
        native: None,
    })
}

/// Plays the steps as a stream; the capacity slot is held until the stream ends or is dropped.
fn play(steps: VecDeque<Step>, busy: Busy) -> sluice_providers::EventStream {
    futures::stream::unfold((steps, busy), |(mut steps, busy)| async move {
        loop {
            match steps.pop_front()? {
                Step::Wait(d) => sleep(d).await,
                Step::Frame(b) => return Some((Ok(StreamEvent::Frame(b)), (steps, busy))),
                Step::Usage(u) => return Some((Ok(StreamEvent::Usage(u)), (steps, busy))),
            }
        }
    })
    .boxed()
}
