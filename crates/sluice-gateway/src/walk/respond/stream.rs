//! A streamed answer: frames passed on as they come, in the client's API, the call settled
//! when the stream ends, fails or runs out of its deadline; when the client leaves first,
//! the upstream's answer is read on for its usage ([`super::cut`]).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use sluice_cache::assemble::Assembler;
use sluice_core::{AttemptOutcome, GatewayError};
use sluice_ingress::Reframe;
use sluice_providers::alarm::Alarm;
use sluice_providers::{EventStream, StreamEvent, openai};
use sluice_tail::admission::Permit;
use tokio::time::Instant;

use super::{head, store};
use crate::walk::call::Call;
use crate::walk::deadline;
use crate::walk::entry::{Answer, AnswerStream, Answered};

/// An SSE answer that starts with `first` and forwards the rest of `rest` as it arrives,
/// holding its admission slot (`permit`) until the stream ends.
pub fn stream(
    mut call: Call,
    attempt: usize,
    first: Bytes,
    rest: EventStream,
    permit: Option<Permit>,
    native: bool,
) -> Answered {
    let now = Instant::now();
    let head = head(&call, now, true);
    let deadline = call.record().timings.deadline.map(Alarm::at);
    let mut assembly = call.stores_answer().then(Assembler::default);
    if let Some(a) = assembly.as_mut()
        && !native
    {
        a.frame(&first);
    }
    call.sent(first.len());
    let mut reframe = call.dialect().reframe();
    let first = match reframe.as_mut() {
        Some(r) if !native => Bytes::from(r.feed(&first)),
        _ => first,
    };
    let body = ClientStream {
        reframe,
        native,
        first: Some(first),
        rest,
        call: Some(call),
        attempt,
        permit,
        deadline,
        assembly,
        handed: None,
    };
    Answered {
        head,
        answer: Answer::Stream(AnswerStream(Box::new(body))),
        entry: None,
    }
}

/// The body of a streamed answer. Frames go out as they come; usage is kept for the record;
/// an upstream failure mid-stream, or the request's deadline running out, is sent as an
/// error event (never a silent truncation). If the client leaves, dropping this reads the
/// upstream's answer on to its usage in a detached task, and settles the call from there.
pub struct ClientStream {
    first: Option<Bytes>,
    rest: EventStream,
    call: Option<Call>,
    attempt: usize,
    /// Released when the stream ends (or the client leaves and this is dropped).
    permit: Option<Permit>,
    /// Fires when the request's deadline runs out.
    deadline: Option<Alarm>,
    /// The answer assembled for the answer cache, when it is to be stored.
    assembly: Option<Assembler>,
    /// The client's API's events written from the chat frames, when it speaks another.
    reframe: Option<Reframe>,
    /// The client gets the upstream's own events; the frames only feed the answer cache.
    native: bool,
    /// The call's ledger row once it settled, for a caller it is handed back to.
    pub(crate) handed: Option<sluice_ledger::Entry>,
}

impl ClientStream {
    /// Ends the answer with `e`: the slot freed, the attempt and the call settled, and the
    /// error event to send last.
    fn end_with(&mut self, e: &GatewayError) -> Bytes {
        self.permit = None;
        if let Some(mut call) = self.call.take() {
            call.end_attempt(self.attempt, AttemptOutcome::Failed(e.kind), Instant::now());
            self.handed = call.finish(200, Some(e.kind));
        }
        match self.reframe.as_mut() {
            Some(r) => Bytes::from(r.fail(e)),
            None => openai::error_frame(e),
        }
    }

    /// A frame in the client's API: itself, or the events it completes (maybe none yet);
    /// nothing when the client reads the upstream's own events.
    fn out(&mut self, frame: Bytes) -> Option<Bytes> {
        match self.reframe.as_mut() {
            _ if self.native => None,
            None => Some(frame),
            Some(r) => Some(r.feed(&frame))
                .filter(|b| !b.is_empty())
                .map(Bytes::from),
        }
    }
}

impl Stream for ClientStream {
    type Item = Bytes;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(first) = this.first.take().filter(|f| !f.is_empty()) {
            return Poll::Ready(Some(first));
        }
        loop {
            if this.call.is_none() {
                return Poll::Ready(None);
            }
            // The deadline first: an answer that is still streaming when it runs out is cut
            // there, even if more frames are ready.
            if let Some(d) = this.deadline.as_mut()
                && d.poll_fired(cx)
            {
                let e = match this.call.as_mut() {
                    Some(call) => deadline::exceeded(call),
                    None => return Poll::Ready(None),
                };
                return Poll::Ready(Some(this.end_with(&e)));
            }
            match this.rest.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(StreamEvent::Frame(b)))) => {
                    if let Some(a) = this.assembly.as_mut() {
                        a.frame(&b);
                    }
                    if let Some(call) = this.call.as_mut() {
                        call.chunk_described(&b);
                    }
                    if !this.native
                        && let Some(call) = this.call.as_mut()
                    {
                        call.sent(b.len());
                    }
                    if let Some(out) = this.out(b) {
                        return Poll::Ready(Some(out));
                    }
                }
                Poll::Ready(Some(Ok(StreamEvent::Native(b)))) => {
                    if this.native
                        && let Some(call) = this.call.as_mut()
                    {
                        call.sent(b.len());
                        return Poll::Ready(Some(b));
                    }
                }
                Poll::Ready(Some(Ok(StreamEvent::Usage(u)))) => {
                    if let Some(a) = this.assembly.as_mut() {
                        a.usage(u);
                    }
                    if let Some(call) = this.call.as_mut() {
                        call.used(u);
                    }
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(this.end_with(&e))),
                Poll::Ready(None) => {
                    this.permit = None;
                    if let Some(mut call) = this.call.take() {
                        let now = Instant::now();
                        call.end_attempt(this.attempt, AttemptOutcome::Ok, now);
                        if let Some(answer) = this.assembly.take().and_then(Assembler::finish) {
                            store(&mut call, &answer, now);
                        }
                        this.handed = call.finish(200, None);
                    }
                    // The client's API closes its message (or says the answer was cut).
                    let tail = match this.reframe.as_mut() {
                        Some(r) if !this.native => Some(r.finish()),
                        _ => None,
                    };
                    return Poll::Ready(tail.filter(|t| !t.is_empty()).map(Bytes::from));
                }
            }
        }
    }
}

impl Drop for ClientStream {
    fn drop(&mut self) {
        let Some(call) = self.call.take() else {
            return;
        };
        // A call whose row goes back to its caller is dropped with it (a runner shutting
        // down sends it again), and outside a runtime nothing can read on: both settle now.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if call.hands_back() {
            return;
        }
        let rest = std::mem::replace(&mut self.rest, futures::stream::empty().boxed());
        runtime.spawn(super::cut::read_on(
            call,
            self.attempt,
            rest,
            self.permit.take(),
        ));
    }
}
