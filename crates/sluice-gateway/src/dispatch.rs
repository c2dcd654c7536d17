//! Dispatch: one attempt at one deployment, up to the upstream's first byte.

use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use sluice_core::{AttemptOutcome, ChatRequest, ErrorKind, GatewayError};
use sluice_providers::{EventStream, StreamEvent, UpstreamCall, UpstreamResponse};
use tokio::time::Instant;

use crate::call::Call;
use crate::routing::Deployment;

/// What an attempt produced once its first byte arrived.
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

/// Sends `request` to `deployment` and waits for its first byte. A stream is held until its
/// first frame so that a failure before any byte still answers with a proper HTTP status.
pub async fn attempt(
    call: &mut Call,
    deployment: &Deployment,
    request: Arc<ChatRequest>,
) -> Result<Answer, GatewayError> {
    let i = call.begin_attempt(deployment.name.clone(), Instant::now());
    let upstream_call = UpstreamCall {
        request,
        model: deployment.model.clone(),
        request_id: call.record().request_id.clone(),
    };
    let result = match deployment.provider.call(upstream_call).await {
        Err(e) => Err(e),
        Ok(UpstreamResponse::Complete(c)) => {
            call.first_byte(i, c.first_byte);
            call.record_mut().usage = c.usage;
            Ok(Answer::Complete {
                attempt: i,
                body: c.body,
            })
        }
        Ok(UpstreamResponse::Stream(s)) => first_frame(call, i, s).await,
    };
    if let Err(e) = &result {
        call.end_attempt(i, AttemptOutcome::Failed(e.kind), Instant::now());
    }
    result
}

async fn first_frame(
    call: &mut Call,
    i: usize,
    mut s: EventStream,
) -> Result<Answer, GatewayError> {
    loop {
        match s.next().await {
            Some(Ok(StreamEvent::Frame(first))) => {
                call.first_byte(i, Instant::now());
                return Ok(Answer::Stream {
                    attempt: i,
                    first,
                    rest: s,
                });
            }
            Some(Ok(StreamEvent::Usage(u))) => call.record_mut().usage = Some(u),
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
