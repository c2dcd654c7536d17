//! Dispatch: admission to the deployment (a slot under its concurrency limit, waiting in the
//! request's lane), one try (hedged when the group hedges), and retries of a failed try
//! (another deployment at once, or the same after its `retry-after` or a short backoff),
//! within the lane's patience and the group's retry budget.

mod attempt;
mod race;

use std::sync::Arc;

use bytes::Bytes;
use sluice_core::{AttemptKind, ChatRequest, ErrorKind, GatewayError, RequestId};
use sluice_providers::EventStream;
use sluice_tail::admission::{Permit, Rejected};
use tokio::time::{Duration, Instant, sleep};

use crate::Gateway;
use crate::call::Call;
use crate::routing::{Deployment, ModelGroup};

/// What the winning attempt produced once its first byte arrived, with the admission slot it
/// holds until the answer ends.
pub enum Answer {
    /// A complete answer.
    Complete {
        /// The attempt's index in the record.
        attempt: usize,
        /// OpenAI JSON.
        body: Bytes,
        /// The slot, released when the answer has been written.
        permit: Option<Permit>,
    },
    /// A stream whose first frame has arrived.
    Stream {
        /// The attempt's index in the record.
        attempt: usize,
        /// The first frame.
        first: Bytes,
        /// Everything after it.
        rest: EventStream,
        /// The slot, released when the stream ends.
        permit: Option<Permit>,
    },
}

/// How long a request may take, admission and retries included, when its lane is unknown.
const DEFAULT_PATIENCE: Duration = Duration::from_secs(60);

/// Attempts at most, 429 retries included (those are paced by the upstream, so neither the
/// retry budget nor `max_attempts` bounds them; the lane's patience does, and this keeps a
/// call record bounded).
const MAX_PACED_ATTEMPTS: u32 = 50;

/// Sends `request`, first to `primary`, in `lane`.
pub async fn dispatch(
    gw: &Gateway,
    call: &mut Call,
    group: &ModelGroup,
    primary: &Deployment,
    request: Arc<ChatRequest>,
    lane: usize,
) -> Result<Answer, GatewayError> {
    let id = call.record().request_id.clone();
    let patience = gw.lanes.get(lane).map_or(DEFAULT_PATIENCE, |l| l.max_wait);
    let deadline = call.record().timings.received + patience;
    if let Some(r) = &group.retrying {
        r.budget.lock().deposit();
    }
    let mut target = primary;
    let mut kind = AttemptKind::Primary;
    let mut tries = 1;
    loop {
        let permit = admit(gw, target, lane).await?;
        let err = match race::try_once(gw, call, group, target, &request, lane, kind, permit).await
        {
            Ok(answer) => return Ok(answer),
            Err(e) => e,
        };
        let Some((next, wait)) = plan_retry(gw, group, target, &err, tries, deadline, &id) else {
            return Err(err);
        };
        sleep(wait).await;
        target = next;
        kind = AttemptKind::Retry;
        tries += 1;
    }
}

/// A slot at `d` in `lane`, waiting if needed; `None` when the group sets no limit.
async fn admit(gw: &Gateway, d: &Deployment, lane: usize) -> Result<Option<Permit>, GatewayError> {
    let Some(limiter) = &d.limiter else {
        return Ok(None);
    };
    limiter.acquire(lane).await.map(Some).map_err(|r| {
        let lane_name = gw.lanes.get(lane).map_or("default", |l| &*l.name);
        let why = match r {
            Rejected::QueueFull { .. } => "is full",
            Rejected::TimedOut { .. } => "held this request as long as the lane allows",
        };
        let secs = r.retry_after().as_secs();
        GatewayError::new(
            ErrorKind::Overloaded,
            format!(
                "sluice's {lane_name} queue for {} {why}; retry after {secs} s",
                d.name
            ),
        )
        .with_retry_after(r.retry_after())
    })
}

/// Where and when to try again after `err`, if at all: another deployment that is healthy
/// (breaker closed) and not cooling down takes the retry at once; otherwise the same one, after its 429's
/// `retry-after` or a short jittered backoff. No retry when the error is the client's or the
/// wait would outlast the lane's patience. Other failures also stop at the group's
/// `max_attempts` and when its retry budget is empty; a 429 does not, because it is retried
/// at the pace the upstream asked for, which adds no load (backpressure, not a storm).
fn plan_retry<'a>(
    gw: &Gateway,
    group: &'a ModelGroup,
    failed: &'a Deployment,
    err: &GatewayError,
    tries: u32,
    deadline: Instant,
    id: &RequestId,
) -> Option<(&'a Deployment, Duration)> {
    let retrying = group.retrying.as_ref()?;
    let paced = err.is_rate_limited();
    if !(paced || err.kind.retryable()) {
        return None;
    }
    let max_tries = if paced {
        MAX_PACED_ATTEMPTS
    } else {
        retrying.policy.max_attempts
    };
    if tries >= max_tries {
        return None;
    }
    let now = Instant::now();
    let next = gw
        .routes
        .pick_other(group, failed, id, |d| {
            d.healthy(now) && !gw.is_cooling(&d.name, now)
        })
        .unwrap_or(failed);
    if !next.healthy(now) {
        // Its breaker just opened, and nobody else can take the call.
        return None;
    }
    let wait = if next.name != failed.name {
        Duration::ZERO
    } else if paced {
        let asked = err.upstream.as_deref().and_then(|r| r.retry_after());
        asked.unwrap_or(crate::gateway::DEFAULT_RETRY_AFTER)
    } else {
        retrying
            .policy
            .backoff(tries, gw.routes.unit(id, u64::from(tries)))
    };
    if now + wait > deadline || (!paced && !retrying.budget.lock().try_spend()) {
        return None;
    }
    next.claim(now + wait);
    Some((next, wait))
}
