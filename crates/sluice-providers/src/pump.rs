//! The one SSE pump every streaming adapter shares: it reads the upstream's body, parses its
//! events and hands each to the adapter's translator, then gives frames out in order, an
//! error only after the frames before it.

use std::collections::VecDeque;
use std::sync::Arc;

use futures::StreamExt;
use sluice_core::{ErrorKind, GatewayError};

use crate::http::TimedBody;
use crate::sse::{SseEvent, SseParser};
use crate::{EventStream, StreamEvent};

/// What an adapter decides about its upstream's events; the pump does the reading.
pub(crate) trait Translate: Send + 'static {
    /// Handles one upstream event, appending what it produces to `out`.
    fn event(&mut self, ev: SseEvent, out: &mut VecDeque<StreamEvent>) -> Result<(), GatewayError>;

    /// Whether the upstream's stream is complete (nothing more is read).
    fn finished(&self) -> bool;

    /// The upstream closed its body before [`Translate::finished`]: returns whether that is a
    /// polite end (after appending any closing frames) rather than a truncated stream.
    fn closed(&mut self, out: &mut VecDeque<StreamEvent>) -> bool;
}

struct Pump<T> {
    body: TimedBody,
    parser: SseParser,
    translator: T,
    /// Reused between chunks so a chunk costs no allocation for its event list.
    events: Vec<SseEvent>,
    pending: VecDeque<StreamEvent>,
    name: Arc<str>,
    /// An error to report once the frames before it are out.
    error: Option<GatewayError>,
    ended: bool,
}

impl<T: Translate> Pump<T> {
    async fn next(&mut self) -> Option<Result<StreamEvent, GatewayError>> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return Some(Ok(ev));
            }
            if let Some(e) = self.error.take() {
                self.ended = true;
                return Some(Err(e));
            }
            if self.ended || self.translator.finished() {
                return None;
            }
            match self.body.next().await {
                Err(e) => self.error = Some(e),
                Ok(None) => {
                    if self.translator.closed(&mut self.pending) {
                        self.ended = true;
                    } else {
                        self.error = Some(GatewayError::new(
                            ErrorKind::UpstreamConnect,
                            format!(
                                "upstream {} closed the stream before it finished",
                                self.name
                            ),
                        ));
                    }
                }
                Ok(Some(chunk)) => {
                    let pushed = self.parser.push(&chunk, &mut self.events);
                    for ev in self.events.drain(..) {
                        if let Err(e) = self.translator.event(ev, &mut self.pending) {
                            self.error = Some(e);
                            break;
                        }
                    }
                    self.events.clear();
                    if let Err(e) = pushed
                        && self.error.is_none()
                    {
                        self.error = Some(GatewayError::new(
                            ErrorKind::UpstreamProtocol,
                            e.to_string(),
                        ));
                    }
                }
            }
        }
    }
}

/// Streams `body` through `translator` as frames for the client.
pub(crate) fn pump<T: Translate>(body: TimedBody, translator: T, name: Arc<str>) -> EventStream {
    let state = Pump {
        body,
        parser: SseParser::new(),
        translator,
        events: Vec::new(),
        pending: VecDeque::new(),
        name,
        error: None,
        ended: false,
    };
    futures::stream::unfold(state, |mut s| async move {
        let item = s.next().await?;
        Some((item, s))
    })
    .boxed()
}
