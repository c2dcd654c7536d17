//! The answer cache's step in a request's walk: serve the stored answer, or wait for an
//! identical request's that is out now, or mark the call to store its own.

use std::sync::Arc;

use bytes::Bytes;
use sluice_core::{CacheLookup, ChatRequest, GatewayError};
use tokio::time::{Instant, timeout_at};

use crate::walk::call::Call;
use crate::walk::deadline;
use sluice_cache::{AnswerCache, Directive, Key, Stored, Turn, key};

/// An answer the cache served.
#[derive(Debug)]
pub struct Served {
    /// What was stored.
    pub stored: Arc<Stored>,
    /// What to answer with: the stored JSON, or its replay as SSE.
    pub body: Bytes,
    /// Whether `body` is a stream.
    pub stream: bool,
}

/// Looks `request` (from `tenant`, in `group`) up: what the cache did, and its answer when
/// it served one. A stored answer is served; otherwise the call is marked to store its
/// answer, and an identical complete request already out is waited for (until `deadline`:
/// 504 past it) and its answer served when it stored one. Not a stream request: it would get
/// no first byte until that whole answer.
pub async fn consult(
    cache: &AnswerCache,
    call: &mut Call,
    directive: Directive,
    tenant: Option<&str>,
    group: &str,
    request: &ChatRequest,
    deadline: Option<Instant>,
) -> (CacheLookup, Result<Option<Served>, GatewayError>) {
    let key = key(tenant, group, request);
    if directive == Directive::Use
        && let Some(served) = serve(cache, &key, request.stream, request.include_usage).await
    {
        return (CacheLookup::Hit, Ok(Some(served)));
    }
    let lookup = match directive {
        Directive::Use => CacheLookup::Miss,
        Directive::Refresh | Directive::Skip => CacheLookup::Bypass,
    };
    match (directive, cache.turn(&key)) {
        (Directive::Skip, _) => {}
        (_, Turn::Lead(tx)) => call.lead(key, tx),
        (Directive::Use, Turn::Follow(mut out)) if !request.stream => {
            // Closed when the first request settles; it never sends.
            let landed = out.changed();
            match deadline {
                Some(d) => {
                    if timeout_at(d, landed).await.is_err() {
                        return (lookup, Err(deadline::exceeded(call)));
                    }
                }
                None => {
                    let _ = landed.await;
                }
            }
            if let Some(served) = serve(cache, &key, false, false).await {
                return (CacheLookup::Coalesced, Ok(Some(served)));
            }
            // The first one stored nothing (it failed, or was cut): ask the upstream.
            call.store_answer_under(key);
        }
        (_, Turn::Follow(_)) => call.store_answer_under(key),
    }
    (lookup, Ok(None))
}

/// The answer stored under `key`, as JSON or replayed as a stream; `None` when there is
/// none, or it cannot be replayed (then the request is a miss).
async fn serve(cache: &AnswerCache, key: &Key, stream: bool, usage: bool) -> Option<Served> {
    let stored = cache.get(key, Instant::now()).await?;
    match stored.body_for(stream, usage) {
        Ok(body) => Some(Served {
            stored,
            body,
            stream,
        }),
        Err(e) => {
            tracing::warn!(error = %e, "cached answer not replayable");
            None
        }
    }
}
