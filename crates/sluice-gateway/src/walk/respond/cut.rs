//! A stream the client cut: the upstream's answer read on to its usage in a detached task,
//! bounded in time and bytes, so the call is billed for what the upstream produced; past
//! either bound, or when the upstream ends without usage, it is billed by an estimate from
//! the bytes it produced, flagged as estimated (never at the prompt alone, never at zero).

use std::time::Duration;

use futures::StreamExt;
use sluice_core::AttemptOutcome;
use sluice_core::record::CLIENT_CLOSED;
use sluice_providers::{EventStream, StreamEvent};
use sluice_tail::admission::Permit;
use tokio::time::Instant;

use crate::walk::call::Call;

/// How long a cut stream is read on for its usage at most (and never past the request's
/// deadline, where sluice would have cut it anyway).
pub const READ_ON_FOR: Duration = Duration::from_secs(30);

/// How many bytes of a cut stream are read on at most.
pub const READ_ON_BYTES: usize = 4 << 20;

/// How reading on ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    /// The upstream's answer ended (its usage read, if it sent one).
    Complete,
    /// A bound was reached first; what was read is estimated.
    Bounded,
    /// The upstream failed.
    Failed(sluice_core::ErrorKind),
}

/// Reads `rest` of `call`'s attempt `attempt` on after its client left, holding its
/// admission slot (the upstream still works on it) until the end or a bound; then settles
/// the call as cut by the client (499) with what the upstream reported or produced.
pub async fn read_on(
    mut call: Call,
    attempt: usize,
    mut rest: EventStream,
    permit: Option<Permit>,
) {
    let bound = Instant::now() + READ_ON_FOR;
    let until = call
        .record()
        .timings
        .deadline
        .map_or(bound, |d| d.min(bound));
    let mut read = 0usize;
    let ended = loop {
        match tokio::time::timeout_at(until, rest.next()).await {
            Err(_) => break Ended::Bounded,
            Ok(None) => break Ended::Complete,
            Ok(Some(Ok(StreamEvent::Usage(u)))) => call.used(u),
            Ok(Some(Ok(StreamEvent::Frame(b)))) => {
                read += b.len();
                call.sent(b.len());
                if read > READ_ON_BYTES {
                    break Ended::Bounded;
                }
            }
            // The client spoke the upstream's API; its frames count the bytes.
            Ok(Some(Ok(StreamEvent::Native(_)))) => {}
            Ok(Some(Err(e))) => break Ended::Failed(e.kind),
        }
    };
    drop(rest);
    drop(permit);
    let outcome = match ended {
        Ended::Complete => AttemptOutcome::Ok,
        Ended::Bounded => AttemptOutcome::Cancelled,
        Ended::Failed(kind) => AttemptOutcome::Failed(kind),
    };
    tracing::debug!(
        request_id = call.record().request_id.as_str(),
        ?ended,
        read,
        usage = call.record().usage.is_some(),
        "a stream the client cut was read on"
    );
    call.end_attempt(attempt, outcome, Instant::now());
    call.finish(CLIENT_CLOSED, None);
}
