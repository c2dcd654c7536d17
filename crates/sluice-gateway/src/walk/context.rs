//! The prompt's own shaping, carried out: normalisation, compression and progressive loading
//! decide in `sluice-context`; this step applies their decisions to the request, the call's
//! record and the metrics, and makes progressive loading's follow-up calls.

use std::sync::Arc;

use bytes::Bytes;
use sluice_context::compress::{self, Outcome};
use sluice_context::count::Count;
use sluice_context::progressive::Rounds;
use sluice_core::{ChatRequest, GatewayError, Round, Usage};
use sluice_routing::{Deployment, ModelGroup};
use sluice_tail::admission::Ask;

use crate::Gateway;
use crate::walk::call::{Call, Shaping};
use crate::walk::dispatch::{self, Answer};

/// `request` normalised as its group asks (tools in a stable order, volatile system lines
/// moved to the end), with what changed (whether the tools were reordered, and how many
/// lines moved); as it came when the group does not, nothing changed, or it failed (logged
/// and counted).
pub fn normalise(
    gw: &Gateway,
    group: &Arc<str>,
    request: &Arc<ChatRequest>,
) -> (Arc<ChatRequest>, Option<(bool, u32)>) {
    let Some(n) = gw.shaping.shapes.get(group).and_then(|s| s.normalise) else {
        return (Arc::clone(request), None);
    };
    match sluice_context::normalise::normalise(request, n) {
        Ok(Some(done)) => {
            let moved = u32::try_from(done.lines_moved).unwrap_or(u32::MAX);
            (Arc::new(done.request), Some((done.tools, moved)))
        }
        Ok(None) => (Arc::clone(request), None),
        Err(e) => {
            tracing::warn!(error = %e, "normalisation failed; the request goes as it came");
            gw.observers.telemetry.normalise_failed(group);
            (Arc::clone(request), None)
        }
    }
}

/// A request as it goes upstream, with its rounds when it is loaded progressively.
pub struct Shaped {
    /// What goes upstream (the first round's request, when there are rounds).
    pub request: Arc<ChatRequest>,
    /// Progressive loading's state.
    pub rounds: Option<Rounds>,
}

/// What goes upstream for `request` in `group`: its first round when the group loads long
/// documents progressively and this is one (complete answers only), else the request
/// compressed when the group compresses and it is over its budget, else the request as it
/// came; with what shaping did, for the record. `tenant`: the caller's.
pub fn shape(
    gw: &Gateway,
    tenant: Option<&str>,
    group: &ModelGroup,
    request: &Arc<ChatRequest>,
) -> (Shaped, Shaping) {
    let mut notes = Shaping::default();
    let keyed = cache_key(gw, tenant, group, request, &mut notes);
    let (request, rounds) = shape_parts(gw, group, &keyed, &mut notes);
    (Shaped { request, rounds }, notes)
}

/// `request` with a `prompt_cache_key` derived from its tenant and stable prefix, when its
/// group derives them and the client sent none (never overriding the client's); after the
/// answer cache, whose key it must not split.
fn cache_key(
    gw: &Gateway,
    tenant: Option<&str>,
    group: &ModelGroup,
    request: &Arc<ChatRequest>,
    notes: &mut Shaping,
) -> Arc<ChatRequest> {
    let Some(keys) = gw.shaping.cache_keys.get(&group.name) else {
        return Arc::clone(request);
    };
    if request.field("prompt_cache_key").is_some() {
        return Arc::clone(request);
    }
    let Some(sample) = sluice_context::churn::Sample::of(request) else {
        return Arc::clone(request);
    };
    let key = keys.lock().key(
        tokio::time::Instant::now(),
        tenant.unwrap_or(""),
        sample.text(),
    );
    let text = serde_json::Value::from(key.as_str()).to_string();
    match request.with_field("prompt_cache_key", text.as_bytes()) {
        Ok(keyed) => {
            notes.prompt_cache_key = Some(Arc::from(key));
            Arc::new(keyed)
        }
        Err(e) => {
            tracing::warn!(error = %e, "adding prompt_cache_key failed; the request goes without");
            gw.observers.telemetry.normalise_failed(&group.name);
            Arc::clone(request)
        }
    }
}

fn shape_parts(
    gw: &Gateway,
    group: &ModelGroup,
    request: &Arc<ChatRequest>,
    notes: &mut Shaping,
) -> (Arc<ChatRequest>, Option<Rounds>) {
    let Some(shaping) = gw.shaping.shapes.get(&group.name) else {
        return (Arc::clone(request), None);
    };
    if let Some(p) = &shaping.progressive {
        if request.stream {
            gw.observers
                .telemetry
                .context_shaped(&group.name, "progressive", "stream", None);
        } else if let Some((rounds, first)) = Rounds::start(
            request,
            p,
            Arc::new(gw.shaping.counter.clone()),
            resend_share(group),
        ) {
            return (Arc::new(first), Some(rounds));
        }
    }
    let Some(c) = shaping.compress else {
        return (Arc::clone(request), None);
    };
    let budget = c.budget.or_else(|| {
        let window = group.smallest_window()?;
        Some(window.saturating_sub(request.max_tokens().unwrap_or(0)))
    });
    let Some(budget) = budget else {
        gw.observers
            .telemetry
            .context_shaped(&group.name, "compress", "no_budget", None);
        return (Arc::clone(request), None);
    };
    match compress::compress(request, budget, &gw.shaping.counter) {
        Outcome::Under => (Arc::clone(request), None),
        Outcome::Compressed(done) => {
            notes.compressed = Some((done.before, done.after));
            gw.observers.telemetry.context_shaped(
                &group.name,
                "compress",
                "compressed",
                Some((done.before, done.after)),
            );
            (Arc::new(done.request), None)
        }
        Outcome::Skipped(why) => {
            tracing::debug!(why = why.as_str(), "over its budget, not compressed");
            gw.observers
                .telemetry
                .context_shaped(&group.name, "compress", why.as_str(), None);
            (Arc::clone(request), None)
        }
    }
}

/// What a prompt token sent again costs as a share of one sent the first time: the dearest
/// such share among `group`'s deployments (a deployment's cached input price over its input
/// price); 1 when any is unpriced: nothing is assumed of a cache not known.
fn resend_share(group: &ModelGroup) -> f64 {
    group
        .deployments
        .iter()
        .map(|d| match d.price.as_ref() {
            Some(p) if p.input.0 > 0 => p.cached_input.0 as f64 / p.input.0 as f64,
            _ => 1.0,
        })
        .reduce(f64::max)
        .unwrap_or(1.0)
}

/// Progressive loading's follow-up calls after `answer`, the first round's: while the answer
/// says the passages did not suffice and rounds are left, the next passages go to the same
/// deployment within the same deadline. The client gets the last answer with the usage of
/// every round (in the body, as in the ledger and the header), and so is its bill. `first`
/// holds the first round's prompt tokens as the gateway's tokenizer counts them; so are the
/// later rounds' and the whole document's, for `sluice_context_tokens_total`.
pub async fn more(
    gw: &Gateway,
    call: &mut Call,
    group: &ModelGroup,
    deployment: &Deployment,
    mut rounds: Rounds,
    first: (u64, Answer),
    ask: &Ask,
) -> Result<Answer, GatewayError> {
    let mut total = Usage::default();
    let mut sent = 0;
    let (mut last, mut answer) = first;
    loop {
        let Answer::Complete {
            attempt,
            body,
            usage,
            at,
            permit,
            native,
        } = answer
        else {
            return Ok(answer);
        };
        sent += last;
        let insufficient = rounds.insufficient(&body);
        // No usage reported: this round is billed from its estimate, never at zero.
        let used = usage.unwrap_or_else(|| Usage {
            prompt_tokens: last,
            completion_tokens: (body.len() as u64).div_ceil(4),
            ..Usage::default()
        });
        total = total.plus(&used);
        let round = Round {
            usage,
            insufficient,
        };
        call.round(round, total, usage.is_none());
        let Some(next) = rounds.next(&body) else {
            let outcome = if insufficient {
                "insufficient"
            } else {
                "answered"
            };
            let whole = gw.shaping.counter.prompt(rounds.original());
            gw.observers.telemetry.context_shaped(
                &group.name,
                "progressive",
                outcome,
                Some((whole, sent)),
            );
            gw.observers
                .telemetry
                .context_rounds(&group.name, u64::from(rounds.round()));
            // One round: the upstream's body already says its usage, and its own API's body
            // may go as it came. Several: sluice wrote the answer, in the client's API.
            let (body, native) = match rounds.round() {
                0 | 1 => (body, native),
                _ => (with_usage(body, &total), None),
            };
            return Ok(Answer::Complete {
                attempt,
                body,
                usage: Some(total),
                at,
                permit,
                native,
            });
        };
        // The slot is given back before the next round queues for one.
        drop(permit);
        last = gw.shaping.counter.prompt(&next);
        answer =
            dispatch::dispatch(gw, call, group, deployment, Arc::new(next), ask.clone()).await?;
    }
}

/// A chat completion's `body` with its `usage` replaced by `total`. A body that is not a
/// JSON object (it passed the upstream reader, so this is a bug) goes as it came, logged.
fn with_usage(body: Bytes, total: &Usage) -> Bytes {
    let mut v: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            tracing::error!(error = %e, "a progressive answer's body is not JSON; its usage is the last round's");
            return body;
        }
    };
    let Some(object) = v.as_object_mut() else {
        tracing::error!(
            "a progressive answer's body is not an object; its usage is the last round's"
        );
        return body;
    };
    object.insert(
        "usage".into(),
        sluice_providers::usage::to_openai_json(total),
    );
    match serde_json::to_vec(&v) {
        Ok(out) => Bytes::from(out),
        Err(e) => {
            tracing::error!(error = %e, "a progressive answer could not be written");
            body
        }
    }
}
