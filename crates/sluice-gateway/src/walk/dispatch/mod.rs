//! Dispatch: admission to the deployment (a slot under its concurrency limit, waiting in the
//! request's lane), one try (hedged when the group hedges), and retries of a failed try
//! (another deployment at once, or the same after its `retry-after` or a short backoff),
//! within the lane's patience, the request's deadline and the group's retry budget.

mod attempt;
mod race;

use std::sync::Arc;

use bytes::Bytes;
use sluice_core::{AttemptKind, ChatRequest, ErrorKind, GatewayError, Phase, RequestId, Usage};
use sluice_providers::EventStream;
use sluice_routing::{Deployment, ModelGroup};
use sluice_tail::admission::{Ask, Permit, Rejected};
use sluice_tail::deadline::MEDIAN_MIN_SAMPLES;
use sluice_tail::retry::{Decision, Facts, Failure, Target};
use sluice_telemetry::WindowKey;
use tokio::time::{Duration, Instant, sleep};

use crate::Gateway;
use crate::walk::cache::Served;
use crate::walk::call::Call;

/// What a request's walk produced, on its way out: an answer from the cache, or the winning
/// attempt's at its first byte, with the admission slot it holds until the answer ends. The
/// one result type from the attempt to the response.
pub enum Answer {
    /// From the answer cache: no upstream was asked.
    Cached(Served),
    /// A complete answer.
    Complete {
        /// The attempt's index in the record.
        attempt: usize,
        /// OpenAI JSON.
        body: Bytes,
        /// What the upstream reported it used.
        usage: Option<Usage>,
        /// When its first byte arrived.
        at: Instant,
        /// The slot, released when the answer has been written.
        permit: Option<Permit>,
        /// The upstream's own answer, for a client that spoke its API.
        native: Option<Bytes>,
    },
    /// A stream whose first frame has arrived.
    Stream {
        /// The attempt's index in the record.
        attempt: usize,
        /// The first frame (the upstream's own event when `native`).
        first: Bytes,
        /// The client gets the upstream's own events (`StreamEvent::Native`), not the
        /// frames.
        native: bool,
        /// Everything after it.
        rest: EventStream,
        /// Usage reported before the first frame, if any.
        usage: Option<Usage>,
        /// When the first frame arrived.
        at: Instant,
        /// The slot, released when the stream ends.
        permit: Option<Permit>,
    },
}

/// How long a request may take, admission and retries included, when its lane is unknown.
const DEFAULT_PATIENCE: Duration = Duration::from_secs(60);

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
    /// Its trace, when it is traced.
    pub trace: Option<Arc<sluice_core::TraceIds>>,
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
    call.mark(|m| &mut m.queued);
    let job = Job {
        request,
        id: call.record().request_id.clone(),
        deadline: call.record().timings.deadline,
        ask,
        trace: call.record().trace.clone(),
    };
    let patience = gw.lanes.get(lane).map_or(DEFAULT_PATIENCE, |l| l.max_wait);
    let patient_until = call.record().timings.received + patience;
    let give_up = job.deadline.map_or(patient_until, |d| d.min(patient_until));
    if let Some(r) = &group.retrying {
        r.deposit();
    }
    let mut target = primary;
    let mut kind = AttemptKind::Primary;
    let mut tries = 1;
    loop {
        let permit = match call.withdrawn() {
            // Nothing of it was sent yet: its caller may still withdraw it while it waits.
            Some(token) => tokio::select! {
                biased;
                () = token.cancelled() => return Err(withdrawn()),
                permit = admit(gw, call, target, &job) => permit?,
            },
            None => admit(gw, call, target, &job).await?,
        };
        let err = match race::try_once(gw, call, group, target, &job, kind, permit).await {
            Ok(answer) => return Ok(answer),
            Err(e) => e,
        };
        let (next, wait) = match retry(gw, group, target, &err, tries, give_up, &job) {
            (next, Decision::Go(wait)) => (next, wait),
            (_, Decision::Denied) => {
                call.retry_denied();
                return Err(err);
            }
            (_, Decision::No) => return Err(err),
        };
        sleep(wait).await;
        target = next;
        kind = AttemptKind::Retry;
        tries += 1;
    }
}

/// `d`'s median time to first byte for the job's kind of answer, once its window knows it.
pub(crate) fn median_ttfb(
    gw: &Gateway,
    group: &ModelGroup,
    d: &Deployment,
    job: &Job,
) -> Option<Duration> {
    job.deadline?;
    gw.observers.telemetry.windows().quantile(
        &window_key(group, d, job.request.stream),
        Phase::Ttfb,
        Instant::now(),
        0.5,
        MEDIAN_MIN_SAMPLES,
    )
}

/// The latency window of `d` in `group` for answers streamed or not.
pub(crate) fn window_key(group: &ModelGroup, d: &Deployment, stream: bool) -> WindowKey {
    WindowKey {
        group: group.name.clone(),
        upstream: d.name.clone(),
        stream,
    }
}

/// The refusal of a request its caller withdrew before it was sent.
fn withdrawn() -> GatewayError {
    GatewayError::new(
        ErrorKind::Withdrawn,
        "withdrawn by its caller before it was sent",
    )
}

/// A slot at `d` in the job's lane, waiting if needed; `None` when `d` has no limiter. The
/// call notes whether the upstream's rate limit held it back, admitted or refused.
async fn admit(
    gw: &Gateway,
    call: &mut Call,
    d: &Deployment,
    job: &Job,
) -> Result<Option<Permit>, GatewayError> {
    let Some(limiter) = &d.limiter else {
        return Ok(None);
    };
    call.queues_at(limiter);
    let got = limiter.acquire(job.ask.clone()).await;
    call.left_queue();
    let rate_limited = match &got {
        Ok(permit) => permit.rate_limited,
        Err(r) => r.rate_limited(),
    };
    if rate_limited {
        call.rate_waited();
    }
    if got.is_err() && limiter.upstream_slower() {
        call.slow_held();
    }
    got.map(Some).map_err(|r| refusal(gw, d, job, r))
}

/// The 503 of a request `d`'s admission refused, saying why and when to come back.
fn refusal(gw: &Gateway, d: &Deployment, job: &Job, r: Rejected) -> GatewayError {
    let lane_name = gw.lanes.get(job.ask.lane).map_or("default", |l| &*l.name);
    let why = match r {
        Rejected::QueueFull { .. } => "is full".to_string(),
        Rejected::TimedOut { .. } => "held this request as long as the lane allows".to_string(),
        Rejected::WouldWait { wait, .. } => format!(
            "would hold this request about {} s, longer than the lane allows",
            wait.as_secs().max(1)
        ),
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
}

/// The retry decision for `err` (see `sluice_tail::retry::Retrying::decide`) and where it
/// would go: routing finds the target (another deployment that is healthy and not cooling
/// down, else the one that failed), and the target's breaker is claimed when it goes.
fn retry<'a>(
    gw: &Gateway,
    group: &'a ModelGroup,
    failed: &'a Deployment,
    err: &GatewayError,
    tries: u32,
    give_up: Instant,
    job: &Job,
) -> (&'a Deployment, Decision) {
    let Some(retrying) = group.retrying.as_ref() else {
        return (failed, Decision::No);
    };
    let now = Instant::now();
    let next = gw
        .routes
        .pick_other(group, failed, &job.id, |d| {
            d.healthy(now) && !gw.is_cooling(&d.name, now)
        })
        .unwrap_or(failed);
    let facts = Facts {
        failure: Failure {
            rate_limited: err.is_rate_limited(),
            retryable: err.kind.retryable(),
            retry_after: err.upstream.as_deref().and_then(|r| r.retry_after()),
            paced: failed.limiter.as_ref().is_some_and(|l| l.paces_requests()),
        },
        tries,
        target: Target {
            other: next.name != failed.name,
            healthy: next.healthy(now),
            median: median_ttfb(gw, group, next, job),
            paced: next.limiter.as_ref().is_some_and(|l| l.paces_requests()),
        },
        give_up,
        deadline: job.deadline,
        jitter: gw.routes.unit(&job.id, u64::from(tries)),
    };
    let decision = retrying.decide(now, &facts);
    if let Decision::Go(wait) = decision {
        next.claim(now + wait);
    }
    (next, decision)
}
