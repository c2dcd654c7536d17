//! The walk of a chat-completions request, written once, top to bottom.
//!
//! Each step is one module of this folder; this file only orders them and says why each sits
//! where it does.

pub mod auth;
pub mod auto;
pub mod billing;
pub mod cache;
pub mod call;
pub mod context;
pub mod deadline;
pub mod dispatch;
pub mod entry;
pub mod http;
pub mod ingress;
pub mod metering;
pub mod prefixes;
pub mod rescue;
pub mod respond;
pub mod route;
pub mod semantic;
pub mod trace;

use std::sync::Arc;

use sluice_core::{CacheLookup, ErrorKind, GatewayError};
use sluice_routing::fallback::{self, Reason};
use sluice_tail::admission::Ask;
use tokio::time::{Instant, timeout_at};

use crate::Gateway;
use crate::walk::call::{Call, Identified, Routed, Shaping};
use auth::Identity;
use cache::Served;
use dispatch::Answer;
use entry::{Answered, Asks, Caller, Refused, Request};
use sluice_context::count::Count;
use sluice_core::ChatRequest;

pub use entry::Walker;

/// What a request refused while draining is told to wait before trying again.
const DRAINING_RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// Walks `request` for `caller` (see [`Walker::run`]).
async fn answer(
    gw: Arc<Gateway>,
    caller: Caller,
    request: Request,
) -> Result<Answered, Box<Refused>> {
    let now = Instant::now();
    let Request {
        id,
        dialect,
        body,
        asks,
    } = request;
    // The record opens first so that every request, even one rejected in ingress, is counted.
    let mut call = Call::open(gw.clone(), id, now, dialect);
    // A traced call takes the client's trace (or starts one) before anything can fail.
    if let Some(tracer) = &gw.observers.traces {
        let (parent, state) = &asks.trace;
        call.traced(trace::begin(tracer, parent.as_deref(), state.as_deref()));
    }
    if matches!(caller, Caller::Known { .. }) {
        call.hand_back();
    }
    if let Some(token) = &asks.withdrawn {
        call.withdrawable(token.clone());
    }
    match walk(&gw, &mut call, &asks, body, caller).await {
        Ok(Answer::Cached(served)) => respond::cached(call, served),
        Ok(Answer::Complete {
            attempt,
            body,
            permit,
            native,
            ..
        }) => {
            let answered = respond::complete(call, attempt, body, native);
            // The slot is free once the answer is written out.
            drop(permit);
            answered
        }
        Ok(Answer::Stream {
            attempt,
            first,
            rest,
            permit,
            native,
            ..
        }) => Ok(respond::stream(call, attempt, first, rest, permit, native)),
        Err(e) => Err(respond::refused(call, e)),
    }
}

async fn walk(
    gw: &Gateway,
    call: &mut Call,
    asks: &Asks,
    body: entry::Body,
    caller: Caller,
) -> Result<Answer, GatewayError> {
    // 0. A gateway shutting down takes no new work: 503 with Retry-After, so the client (or
    //    its balancer) retries on another instance. First, so draining costs nothing more.
    if gw.is_draining() {
        return Err(draining());
    }

    // 1. Ingress: read the body under its limit and parse it. First, because every later step
    //    needs a valid request, and a bad one must cost nothing upstream.
    //    A client of another API is checked by that API's rules and met in the internal form.
    let bytes = ingress::read_body(body, gw.max_body_bytes, gw.body_stall).await?;
    let request = Arc::new(ingress::parse(
        bytes,
        call.dialect(),
        &asks.forwarded,
        asks.url_model.as_deref(),
    )?);
    call.parsed(request.stream);
    call.mark(|m| &mut m.parsed);

    // 2. Caller, lane and time budget: read before routing so bad headers cost nothing. The
    //    caller is its API key's tenant (401 without a valid key when keys are required);
    //    admission uses the lane (the key's or tenant's default when the request names none)
    //    and takes the lane's tenants in turn; everything after uses the deadline.
    //    A known caller (a batch item) comes with its lane.
    let (caller, mut ask, asked) = identify(gw, call, asks, caller, &request)?;
    let tenant = caller.tenant.clone();

    // 3. Route: the model group the client named, or the one the rules of the task route it
    //    named (`auto`) choose for what the request says of itself (its task, tenant, key,
    //    prompt size, tools, images, response format, script); its key must allow the name.
    //    An automatic router (`[routers.*]`) chooses among its candidates by what it has
    //    learnt of each for the task, and hands the rest on as fallbacks.
    let (group, others) = routed(gw, call, &request, asks, &caller, asked)?;

    // 4. Deadline: the client's budget, else the group's default, counted from arrival. It
    //    bounds everything below (waiting for an identical request's answer, queueing, every
    //    attempt, backoffs) and, for a stream, the stream itself (see `respond`).
    let budget = asked.or(group.timeout);
    let deadline = budget.map(|b| call.record().timings.received + b);
    call.deadline(deadline);
    ask.deadline = deadline;

    //    Normalisation (when its group asks for it): tools in a stable order, volatile
    //    system-prompt lines moved to the end, so requests share a cached prefix; before
    //    the caches, which then key the prompt as it is sent.
    //    Only a conversation is shaped: embeddings' inputs go as they came.
    let converses = call.dialect().converses();
    let (request, normalised) = if converses {
        context::normalise(gw, &group.name, &request)
    } else {
        (request, None)
    };
    if let Some((tools, lines)) = normalised {
        call.normalised(tools, lines);
    }

    // 5. The answer cache: the same request from the same tenant is answered from it, before
    //    a deployment is picked or anything is reserved, so a hit needs no upstream (not
    //    even a healthy one) and spends no credits or quota. A miss is marked for storing
    //    its answer once it has ended well; while it is out, an identical request waits for
    //    that answer instead of buying it again (not a stream: it would wait for the whole
    //    answer before its first byte).
    if let Some(served) = look_up(
        gw,
        call,
        asks,
        tenant.as_deref(),
        &group.name,
        &request,
        deadline,
    )
    .await?
    {
        return Ok(Answer::Cached(served));
    }

    // 6-8, for the group and then, when it cannot take the request, for each of its
    //    fallbacks in order, within the same deadline: the request goes to a fallback when
    //    its prompt fits no deployment's context window (decided before any upstream call),
    //    every deployment is unavailable, the tenant's quota or credits refuse it at this
    //    group's price, or the upstream says the prompt is too long. The first group's error
    //    is the answer when every group failed.
    //    The prefix watch (one request in every 1 / share): does this request share its tools and system
    //    prompt with its tenant and group's recent ones, and if not, why not.
    if let Some(w) = gw.shaping.prefixes.as_ref().filter(|_| converses) {
        prefixes::observe(gw, w, tenant.as_deref(), &group.name, &request);
    }
    //    Compression or progressive loading (when the group asks for either): a request over
    //    its token budget keeps only the passages of its document most relevant to its
    //    question; a long document goes a round of passages at a time while the answer says
    //    they did not suffice. After the caches (a hit needs neither) and before the context
    //    window is checked (a document too long for it may fit once shaped).
    let (shaped, shaping) = if converses {
        context::shape(gw, tenant.as_deref(), group, &request)
    } else {
        let plain = context::Shaped {
            request: request.clone(),
            rounds: None,
        };
        (plain, Shaping::default())
    };
    call.shaped(shaping);
    let fallbacks = route::fallbacks(gw, group, others, &caller);
    let taken = take_or_fall_back(gw, call, group, fallbacks, &shaped, &ask, tenant.as_ref());
    match deadline {
        Some(deadline) => match timeout_at(deadline, taken).await {
            Ok(answer) => answer,
            Err(_) => Err(deadline::exceeded(call)),
        },
        None => taken.await,
    }
}

/// Step 3: the group the request goes to first and the others to fall back to, noted on the
/// record (the group a refused request named, too).
fn routed<'g>(
    gw: &'g Gateway,
    call: &mut Call,
    request: &ChatRequest,
    asks: &Asks,
    caller: &Identity,
    asked: Option<std::time::Duration>,
) -> Result<
    (
        &'g sluice_routing::ModelGroup,
        Vec<&'g sluice_routing::ModelGroup>,
    ),
    GatewayError,
> {
    let size = route::PromptSize::of(request);
    let chosen = match route::choose(gw, call, request, &asks.task, caller, &size, asked) {
        Ok(chosen) => {
            call.routed(chosen.routed);
            (chosen.group, chosen.others)
        }
        Err(refused) => {
            if let Some(group) = refused.group {
                call.routed(Routed { group, route: None });
            }
            return Err(refused.error);
        }
    };
    call.mark(|m| &mut m.routed);
    Ok(chosen)
}

/// What a request arriving while the gateway drains is told.
fn draining() -> GatewayError {
    GatewayError::new(
        ErrorKind::ShuttingDown,
        "this gateway is shutting down; retry on another instance",
    )
    .with_retry_after(DRAINING_RETRY_AFTER)
}

/// Step 2: the caller (its key's tenant, or the one it names), its lane and its own time
/// budget, noted on the record; what admission will be asked for.
fn identify(
    gw: &Gateway,
    call: &mut Call,
    asks: &Asks,
    caller: Caller,
    request: &ChatRequest,
) -> Result<(Identity, Ask, Option<std::time::Duration>), GatewayError> {
    let (caller, default_lane) = match caller {
        Caller::Known { identity, lane } => (identity, lane),
        Caller::Presented { key, tenant } => {
            let caller = auth::identify_presented(gw, key.as_deref(), || tenant)?;
            let lane = caller.default_lane(gw);
            (caller, lane)
        }
    };
    let tenant = caller.tenant.clone();
    let mut who = Identified {
        api_key: caller.key.as_ref().map(|k| Arc::from(k.spec.name.as_str())),
        ..Identified::default()
    };
    let checked = ingress::lane(asks.lane.as_deref(), &gw.lanes, default_lane).and_then(|lane| {
        who.lane = gw.lanes.get(lane).map(|l| l.name.clone());
        Ok((lane, asks.timeout.clone()?))
    });
    let (lane, asked) = match checked {
        Ok(checked) => checked,
        Err(e) => {
            call.identified(who);
            return Err(e);
        }
    };
    who.class = tenant.as_deref().and_then(|t| gw.tenants.class_of(t));
    who.tenant = tenant.clone();
    who.prompt_estimate = request.prompt_estimate();
    let ask = Ask {
        lane,
        tenant: tenant.clone().unwrap_or_else(|| Arc::from("")),
        tokens: request.token_estimate(),
        // Set once the route is known (its group's timeout is the default deadline).
        deadline: None,
    };
    call.identified(who);
    call.mark(|m| &mut m.identified);
    Ok((caller, ask, asked))
}

/// Step 5: the answer cache, then the semantic cache; the answer when either served one.
async fn look_up(
    gw: &Gateway,
    call: &mut Call,
    asks: &Asks,
    tenant: Option<&str>,
    group: &str,
    request: &Arc<ChatRequest>,
    deadline: Option<Instant>,
) -> Result<Option<Served>, GatewayError> {
    let converses = call.dialect().converses();
    if let Some(cache) = &gw.caches.exact {
        let (lookup, served) =
            cache::consult(cache, call, asks.cache, tenant, group, request, deadline).await;
        call.looked_up(lookup);
        if let Some(served) = served? {
            return Ok(Some(served));
        }
    }
    //    Then the semantic cache (when on): an answer to a question that means the same, from
    //    the same tenant with everything but the newest user message identical.
    if let Some(sem) = gw.caches.semantic.as_ref().filter(|_| converses)
        && let Some(looked) =
            semantic::consult(gw, sem, call, asks.cache, tenant, group, request).await
    {
        call.looked_up_by_meaning(looked.what);
        if let Some(served) = looked.served {
            call.looked_up(CacheLookup::Semantic);
            return Ok(Some(served));
        }
    }
    call.mark(|m| &mut m.looked_up);
    Ok(None)
}

/// Steps 6 to 8 at `group`, then at each of its fallbacks in order while the failure gives
/// a reason to fall back; the first group's error when every group failed.
async fn take_or_fall_back<'g>(
    gw: &'g Gateway,
    call: &mut Call,
    group: &'g sluice_routing::ModelGroup,
    fallbacks: Vec<&'g sluice_routing::ModelGroup>,
    shaped: &context::Shaped,
    ask: &Ask,
    tenant: Option<&Arc<str>>,
) -> Result<Answer, GatewayError> {
    let size = route::PromptSize::of(&shaped.request);
    let mut group = group;
    let mut next = fallbacks.into_iter();
    let mut first_err: Option<GatewayError> = None;
    loop {
        let (err, reason) = match take(gw, call, group, shaped, ask, tenant, &size).await {
            Ok(answer) => return Ok(answer),
            Err(failed) => failed,
        };
        let to = reason.and_then(|_| next.next());
        match (to, reason) {
            (Some(to), Some(reason)) => {
                call.release_hold();
                route::record_fallback(call, group, to, reason);
                first_err.get_or_insert(err);
                group = to;
            }
            _ => return Err(first_err.unwrap_or(err)),
        }
    }
}

/// Steps 6 to 8 at one group: the context window, one deployment, the reservation, the
/// dispatch. A failure comes with the fallback reason it gives, if any.
async fn take(
    gw: &Gateway,
    call: &mut Call,
    group: &sluice_routing::ModelGroup,
    shaped: &context::Shaped,
    ask: &Ask,
    tenant: Option<&Arc<str>>,
    size: &route::PromptSize<'_>,
) -> Result<Answer, (GatewayError, Option<Reason>)> {
    let (request, rounds) = (&shaped.request, shaped.rounds.as_ref());
    let failed = |e: GatewayError| {
        let reason = fallback::reason_for(&e);
        (e, reason)
    };
    // A prompt longer than every deployment's window goes no further (no upstream call).
    route::fits(gw, group, request, size).map_err(|e| (e, Some(Reason::ContextWindow)))?;

    // 6. Then one deployment, among those that may take it now: where the prompt's prefix
    //    went last when the group routes by prefix affinity (the provider's prompt cache
    //    likely holds it), else by weight. Before dispatch, because everything after works on
    //    a concrete upstream.
    let prefixes = group.prefixes(request);
    let (deployment, by_prefix) = gw
        .routes
        .pick_available(group, &call.record().request_id, ask, prefixes.as_ref())
        .map_err(failed)?;
    if prefixes.is_some() {
        call.picked(by_prefix);
    }

    // 7. Credits and quotas: the call's worst case is reserved for its tenant, on the routed
    //    deployment's price, and settled when the call ends. After routing, because the price
    //    is the model's; before dispatch, because nothing may be spent that is not covered.
    //    Progressive loading reserves for the whole document its rounds may send.
    let whole = rounds.map_or(&**request, |r| r.original());
    let held = metering::reserve(&gw.tenants, tenant, deployment, whole)
        .await
        .map_err(failed)?;
    call.hold(held);

    // 8. Dispatch: admission (a slot under the deployment's concurrency limit, waiting in the
    //    lane's queue), then attempts up to the first byte so an early failure still gets a
    //    proper status; a slow attempt is hedged, a failed one retried, when the group says so
    //    and the deadline leaves time. Last, because all of it works on the routed deployment
    //    and its latency window.
    let answer = dispatch::dispatch(gw, call, group, deployment, request.clone(), ask.clone())
        .await
        .map_err(failed)?;

    // 9. Progressive loading's later rounds, while the answer says the passages sent did not
    //    suffice: to the same deployment, within the same deadline, billed to the same call.
    match rounds {
        Some(r) => {
            let first = (gw.shaping.counter.prompt(request), answer);
            context::more(gw, call, group, deployment, r.clone(), first, ask)
                .await
                .map_err(failed)
        }
        None => Ok(answer),
    }
}
