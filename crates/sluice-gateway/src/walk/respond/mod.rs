//! Answers as the walk hands them back: complete JSON, or an SSE stream passed through frame
//! by frame ([`stream`]), each with the [`Head`] a client is told beside it (timings in
//! `Server-Timing`: [`timing`]); the call settled when the answer ends.

mod cut;
mod stream;
mod timing;

use bytes::Bytes;
use sluice_core::{AttemptOutcome, CacheLookup, GatewayError};
use tokio::time::Instant;

pub use cut::{READ_ON_BYTES, READ_ON_FOR};
pub use stream::{ClientStream, stream};
pub use timing::{route_text, server_timing};

use crate::walk::cache::Served;
use crate::walk::call::Call;
use crate::walk::entry::{Answer, Answered, Head, Refused};

/// What the client is told beside an answer or refusal of `call`, `now`: everything the
/// record says when `full`, else (a refusal) its timings and route only.
fn head_of(call: &Call, now: Instant, stream: bool, full: bool) -> Head {
    let r = call.record();
    let mut head = Head {
        request_id: r.request_id.clone(),
        upstream: r.upstream.clone(),
        server_timing: server_timing(r, now, stream),
        cache: None,
        route: route_text(r),
        compression: None,
        progressive: None,
        age: None,
    };
    if !full {
        return head;
    }
    let semantic = r.semantic.as_ref().and_then(super::semantic::header);
    head.cache = match (r.cache, semantic) {
        (Some(CacheLookup::Semantic), Some(v)) => Some(v),
        (Some(c), _) => Some(c.label().to_string()),
        (None, _) => None,
    };
    head.compression = r.compressed;
    if !r.rounds.is_empty() {
        let insufficient = r.rounds.iter().filter(|x| x.insufficient).count();
        let sent: u64 = r
            .rounds
            .iter()
            .filter_map(|x| x.usage)
            .map(|u| u.prompt_tokens)
            .sum();
        head.progressive = Some((r.rounds.len(), insufficient, sent));
    }
    head
}

/// What the client is told beside an answer of `call`, `now`.
pub(crate) fn head(call: &Call, now: Instant, stream: bool) -> Head {
    head_of(call, now, stream, true)
}

/// Stores the complete answer `body` where the call is to: the answer cache, and by
/// meaning (or, verifying, compared with the entry's answer).
fn store(call: &mut Call, body: &Bytes, now: Instant) {
    if let Some((question, cost)) = call.store_answer(body, now)
        && let Some(sem) = call.gateway().caches.semantic.clone()
    {
        let gw = call.gateway().clone();
        if let Some(right) =
            super::semantic::settle(&gw, &sem, call.record(), question, body, cost, now)
        {
            call.verified(right);
        }
    }
}

/// A complete JSON answer; settles the call.
pub fn complete(
    mut call: Call,
    attempt: usize,
    body: Bytes,
    native: Option<Bytes>,
) -> Result<Answered, Box<Refused>> {
    let now = Instant::now();
    call.end_attempt(attempt, AttemptOutcome::Ok, now);
    store(&mut call, &body, now);
    call.sent(body.len());
    // An automatic router learns from what is wrong with its answer (cut at `length`, not
    // JSON when JSON was asked for); nothing is read for other calls.
    let wants_json = call
        .record()
        .route
        .as_ref()
        .and_then(|r| r.auto.as_ref())
        .map(|a| a.wants_json);
    if let Some(wants_json) = wants_json {
        call.flawed(crate::learning::flaw(&body, wants_json));
    }
    // The upstream's own answer when the client spoke its API; else the chat answer in the
    // client's API.
    let body = match native.map_or_else(|| call.dialect().answer(body), Ok) {
        Ok(body) => body,
        Err(e) => return Err(unwritable(call, attempt, e)),
    };
    let head = head(&call, now, false);
    let entry = call.finish(200, None);
    Ok(Answered {
        head,
        answer: Answer::Complete {
            body,
            content_type: "application/json",
        },
        entry,
    })
}

/// An answer that could not be written in the client's API: the attempt counts as failed and
/// the client gets the error.
fn unwritable(mut call: Call, attempt: usize, e: GatewayError) -> Box<Refused> {
    call.end_attempt(attempt, AttemptOutcome::Failed(e.kind), Instant::now());
    refused(call, e)
}

/// Refuses the call with `e` in the client's API and settles it with the status it got.
pub fn refused(call: Call, error: GatewayError) -> Box<Refused> {
    let head = head_of(&call, Instant::now(), false, false);
    let sent = !call.record().attempts.is_empty();
    let dialect = call.dialect();
    let entry = call.refused(&error);
    Box::new(Refused {
        error,
        dialect,
        sent,
        head,
        entry,
    })
}

/// An answer from the answer cache (its JSON, or its SSE replay); settles the call.
pub fn cached(mut call: Call, served: Served) -> Result<Answered, Box<Refused>> {
    let Served {
        stored,
        body,
        stream,
    } = served;
    let now = Instant::now();
    call.saved(stored.cost_micros);
    let content_type = if stream {
        "text/event-stream"
    } else {
        "application/json"
    };
    // Stored answers are in the internal form, whatever API stored them.
    let dialect = call.dialect();
    let body = match (dialect.reframe(), stream) {
        (Some(reframe), true) => Bytes::from(reframe.whole(&body)),
        _ => match dialect.answer(body) {
            Ok(b) => b,
            Err(e) => return Err(refused(call, e)),
        },
    };
    let mut head = head(&call, now, false);
    head.age = Some(now.saturating_duration_since(stored.stored_at).as_secs());
    let entry = call.finish(200, None);
    Ok(Answered {
        head,
        answer: Answer::Complete { body, content_type },
        entry,
    })
}
