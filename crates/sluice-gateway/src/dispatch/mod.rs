//! Dispatch: admission to the deployment (a slot under its concurrency limit, waiting in the
//! request's lane), one try (hedged when the group hedges), and retries of a failed try
//! (another deployment at once, or the same after its `retry-after` or a short backoff),
//! within the lane's patience, the request's deadline and the group's retry budget.

mod attempt;
mod race;

use std::sync::Arc;

use bytes::Bytes;
use sluice_core::{AttemptKind, ChatRequest, ErrorKind, GatewayError, Phase, RequestId};
use sluice_providers::EventStream;
use sluice_tail::admission::{Ask, Permit, Rejected};
use sluice_telemetry::WindowKey;
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

/// Samples an upstream's window needs before its median decides whether a late attempt
/// (a retry or hedge near the deadline) is still worth sending.
const MEDIAN_MIN_SAMPLES: u64 = 20;

/// What every attempt of one request shares.
#[derive(Clone, Debug)]
pub(crate) struct Job {
    /// The client's request.
    pub request: Arc<ChatRequest>,
    /// Its id (routing, simulation and backoff jitter derive from it).
    pub id: RequestId,
    /// When its deadline runs out, if it has one.
    pub deadline: Option<Instant>,
    /// What each attempt asks admission for: its lane, its tenant, its cost in tokens.
    pub ask: Ask,
}

/// Sends `request`, first to `primary`, asking admission for `ask`, until the call's deadline
/// if there is one (the caller enforces it; here it only decides which retries and hedges
/// are still worth it).
pub async fn dispatch(
    gw: &Gateway,
    call: &mut Call,
    group: &ModelGroup,
    primary: &Deployment,
    request: Arc<ChatRequest>,
    ask: Ask,
) -> Result<Answer, GatewayError> {
    let lane = ask.lane;
    let job = Job {
        request,
        id: call.record().request_id.clone(),
        deadline: call.record().timings.deadline,
        ask,
    };
    let patience = gw.lanes.get(lane).map_or(DEFAULT_PATIENCE, |l| l.max_wait);
    let patient_until = call.record().timings.received + patience;
    let give_up = job.deadline.map_or(patient_until, |d| d.min(patient_until));
    if let Some(r) = &group.retrying {
        r.budget.lock().deposit();
    }
    let mut target = primary;
    let mut kind = AttemptKind::Primary;
    let mut tries = 1;
    loop {
        let permit = admit(gw, target, &job).await?;
        let err = match race::try_once(gw, call, group, target, &job, kind, permit).await {
            Ok(answer) => return Ok(answer),
            Err(e) => e,
        };
        let retry = plan_retry(gw, group, target, &err, tries, give_up, &job);
        let (next, wait) = match retry {
            Retry::Go(next, wait) => (next, wait),
            Retry::Denied => {
                call.record_mut().retry_denied = true;
                return Err(err);
            }
            Retry::No => return Err(err),
        };
        sleep(wait).await;
        target = next;
        kind = AttemptKind::Retry;
        tries += 1;
    }
}

/// Whether an attempt at `d` leaving at `at` could still answer before the deadline: true
/// without a deadline or while `d`'s median time to first byte is unknown; else whether
/// that median fits in what is left.
pub(crate) fn worth_trying(
    gw: &Gateway,
    group: &ModelGroup,
    d: &Deployment,
    job: &Job,
    at: Instant,
) -> bool {
    let Some(deadline) = job.deadline else {
        return true;
    };
    let key = WindowKey {
        group: group.name.clone(),
        upstream: d.name.clone(),
        stream: job.request.stream,
    };
    let median =
        gw.telemetry
            .windows()
            .quantile(&key, Phase::Ttfb, Instant::now(), 0.5, MEDIAN_MIN_SAMPLES);
    let left = deadline.saturating_duration_since(at);
    median.is_none_or(|m| m <= left)
}

/// A slot at `d` in the job's lane, waiting if needed; `None` when `d` has no limiter.
async fn admit(gw: &Gateway, d: &Deployment, job: &Job) -> Result<Option<Permit>, GatewayError> {
    let Some(limiter) = &d.limiter else {
        return Ok(None);
    };
    limiter
        .acquire(job.ask.clone())
        .await
        .map(Some)
        .map_err(|r| {
            let lane_name = gw.lanes.get(job.ask.lane).map_or("default", |l| &*l.name);
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

/// Whether a failed try is tried again.
enum Retry<'a> {
    /// At this deployment, after this wait.
    Go(&'a Deployment, Duration),
    /// It was worth retrying, but the retry budget is spent.
    Denied,
    /// Not worth retrying (or not allowed: the client's error, out of attempts or time).
    No,
}

/// Where and when to try again after `err`, if at all: another deployment that is healthy
/// (breaker closed) and not cooling down takes the retry at once; otherwise the same one,
/// after its 429's `retry-after` or a short jittered backoff. No retry when the error is the
/// client's, the wait would outlast `give_up` (the lane's patience or the request's
/// deadline), or what the deadline leaves is shorter than the target's median first byte.
/// Other failures also stop at the group's `max_attempts` and when its retry budget is
/// empty; a 429 does not, because it is retried at the pace the upstream asked for, which
/// adds no load (backpressure, not a storm).
fn plan_retry<'a>(
    gw: &Gateway,
    group: &'a ModelGroup,
    failed: &'a Deployment,
    err: &GatewayError,
    tries: u32,
    give_up: Instant,
    job: &Job,
) -> Retry<'a> {
    let Some(retrying) = group.retrying.as_ref() else {
        return Retry::No;
    };
    let paced = err.is_rate_limited();
    if !(paced || err.kind.retryable()) {
        return Retry::No;
    }
    let max_tries = if paced {
        MAX_PACED_ATTEMPTS
    } else {
        retrying.policy.max_attempts
    };
    if tries >= max_tries {
        return Retry::No;
    }
    let now = Instant::now();
    let next = gw
        .routes
        .pick_other(group, failed, &job.id, |d| {
            d.healthy(now) && !gw.is_cooling(&d.name, now)
        })
        .unwrap_or(failed);
    if !next.healthy(now) {
        // Its breaker just opened, and nobody else can take the call.
        return Retry::No;
    }
    let wait = if next.name != failed.name {
        Duration::ZERO
    } else if paced {
        let asked = err.upstream.as_deref().and_then(|r| r.retry_after());
        asked.unwrap_or(crate::gateway::DEFAULT_RETRY_AFTER)
    } else {
        retrying
            .policy
            .backoff(tries, gw.routes.unit(&job.id, u64::from(tries)))
    };
    if now + wait > give_up || !worth_trying(gw, group, next, job, now + wait) {
        return Retry::No;
    }
    if !paced && !retrying.budget.lock().try_spend(now) {
        return Retry::Denied;
    }
    next.claim(now + wait);
    Retry::Go(next, wait)
}
