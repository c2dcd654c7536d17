//! What a finished call cost, and the ledger row it leaves.
//!
//! A call's cost is its answer's usage at its model's price, plus every other attempt the
//! upstream worked on: a hedge or primary that lost the race, an attempt cancelled when the
//! client left, one that timed out. Providers bill such an attempt for the prompt they read,
//! so each is priced as the call's prompt (estimated) at its own model's input price. An
//! attempt the upstream refused (429, 5xx, no connection, its own 4xx) costs nothing.

use std::time::UNIX_EPOCH;

use std::sync::Arc;

use sluice_core::record::CLIENT_CLOSED;
use sluice_core::{AttemptOutcome, CacheLookup, CallRecord, ErrorKind, Usage};
use sluice_economy::Price;
use sluice_ledger::{CacheOutcome, Entry, Tokens};

/// What an attempt's deployment charges, as the walk held it when the attempt began.
#[derive(Clone, Debug)]
pub struct Priced {
    /// The model the upstream knows.
    pub model: Arc<str>,
    /// Its price, when it has one.
    pub price: Option<Price>,
}

/// The call's costs in micro-units: its answer's (when priced and reported) and the extra
/// its other attempts ran up; `unpriced` when an upstream with no price worked on it (an
/// answer, or an attempt it bills for), so that the total is not known.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Costs {
    pub answer: Option<u64>,
    pub extra: u64,
    pub unpriced: bool,
}

impl Costs {
    /// Everything, when anything is priced.
    pub fn total(&self) -> Option<u64> {
        match (self.answer, self.extra) {
            (None, 0) => None,
            (a, e) => Some(a.unwrap_or(0) + e),
        }
    }
}

/// Whether the upstream worked on (and bills for) an attempt that ended so.
fn upstream_worked(outcome: AttemptOutcome) -> bool {
    match outcome {
        AttemptOutcome::Lost | AttemptOutcome::Cancelled => true,
        AttemptOutcome::Failed(kind) => matches!(
            kind,
            ErrorKind::UpstreamTimeout | ErrorKind::DeadlineExceeded | ErrorKind::UpstreamProtocol
        ),
        AttemptOutcome::Pending | AttemptOutcome::Ok => false,
    }
}

/// The costs of a finished `record`. The attempt that answered is priced by its usage;
/// every other attempt the upstream worked on by the prompt alone, as extra, except that a
/// call nothing answered owns its first attempt's cost (the hedges and retries after it are
/// the extra).
/// `usage` is what the answer used, `priced` holds each attempt's price, `answered` the
/// attempt whose answer the client got (without one, the first attempt stands for the call).
pub(crate) fn costs(
    record: &CallRecord,
    usage: Option<&Usage>,
    priced: &[Priced],
    answered: Option<usize>,
) -> Costs {
    let price = |i: usize| priced.get(i).and_then(|p| p.price.as_ref());
    let answered_by = usage.filter(|_| record.upstream.is_some());
    let mut unpriced = answered_by.is_some() && price(answered.unwrap_or(0)).is_none();
    let mut answer = answered_by.and_then(|u| price(answered.unwrap_or(0)).map(|p| p.cost(u).0));
    // The attempt priced as the answer: the one that ended well, else the one whose answer
    // the client was getting when it left (billed by its usage or estimate, not again).
    let answered = record
        .attempts
        .iter()
        .position(|a| a.outcome == AttemptOutcome::Ok)
        .or(answered.filter(|_| answer.is_some()));
    let prompt_only = Usage {
        prompt_tokens: record.prompt_estimate,
        ..Usage::default()
    };
    let mut extra = 0;
    for (i, a) in record.attempts.iter().enumerate() {
        if Some(i) == answered || !upstream_worked(a.outcome) {
            continue;
        }
        let Some(cost) = price(i).map(|p| p.cost(&prompt_only).0) else {
            unpriced = true;
            continue;
        };
        if i == 0 && answered.is_none() && answer.is_none() {
            answer = Some(cost);
        } else {
            extra += cost;
        }
    }
    Costs {
        answer,
        extra,
        unpriced,
    }
}

/// What settling a finished call changes, decided from its record and what each attempt's
/// deployment charges, before anything is applied: the usage to settle by, what it cost,
/// what the provider's prompt cache saved and what its writes cost beyond the input price,
/// and what the tenant's reservation is settled at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Settlement {
    /// The usage the call is settled by: the upstream's report, or (an answer without one)
    /// an estimate from the prompt and the bytes sent, marked as such.
    pub usage: Option<Usage>,
    /// The usage is that estimate.
    pub estimated: bool,
    /// What it cost.
    pub costs: Costs,
    /// What the provider's prompt cache saved and what its writes cost beyond the input
    /// price, for an answer from a priced deployment.
    pub prompt_cache: Option<(u64, u64)>,
    /// The tokens and money the tenant's reservation is settled at.
    pub reservation: (u64, u64),
}

/// What a finished `record` settles to: `status` is what the client got, `priced` each
/// attempt's deployment's charges, `answered` the attempt whose answer the client got, and
/// `sent_bytes` what the upstream produced (an answer that reports no usage, or one the
/// client left before its usage came, is estimated from it: a token for every four bytes,
/// its JSON included, on the high side; never zero).
pub(crate) fn settlement(
    record: &CallRecord,
    status: u16,
    priced: &[Priced],
    answered: Option<usize>,
    sent_bytes: u64,
) -> Settlement {
    // A client that left mid-answer: the upstream produced its answer all the same.
    let answered_client = status < 400 || status == CLIENT_CLOSED;
    let estimate =
        (answered_client && answered.is_some() && record.usage.is_none()).then(|| Usage {
            prompt_tokens: record.prompt_estimate,
            completion_tokens: sent_bytes.div_ceil(4),
            ..Usage::default()
        });
    let usage = estimate.or(record.usage);
    let costs = costs(record, usage.as_ref(), priced, answered);
    let answering = answered.and_then(|i| priced.get(i)?.price.as_ref());
    let prompt_cache = usage
        .as_ref()
        .zip(answering)
        .map(|(u, price)| price.cache_read_and_write(u));
    let reservation = (
        usage.map_or(0, |u| u.total_tokens()),
        costs.total().unwrap_or(0),
    );
    Settlement {
        usage,
        estimated: estimate.is_some(),
        costs,
        prompt_cache,
        reservation,
    }
}

/// The ledger row of a finished `record`, whose answering deployment charged `answered`.
pub(crate) fn entry(record: &CallRecord, answered: Option<&Priced>) -> Entry {
    let usage = record.usage.unwrap_or_default();
    let answered = answered.filter(|_| record.upstream.is_some());
    let hit = record.cache.is_some_and(CacheLookup::served);
    let saved = if hit {
        i64::try_from(record.cache_saved_micros).ok()
    } else {
        record.usage.as_ref().and_then(|u| {
            let p = answered?.price.as_ref()?;
            i64::try_from(p.cache_saving(u)).ok()
        })
    };
    // What the provider bills for the answer, in its own currency, when that is not the
    // billing one.
    let native = answered
        .filter(|_| !hit)
        .and_then(|p| p.price.as_ref()?.published)
        .zip(record.usage.as_ref())
        .map(|(published, u)| (published.currency, published.cost(u).0));
    let t = &record.timings;
    let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let count = |kind| {
        let n = record.attempts.iter().filter(|a| a.kind == kind).count();
        u32::try_from(n).unwrap_or(u32::MAX)
    };
    Entry {
        request_id: record.request_id.shared(),
        at_ms: t
            .received_wall
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        tenant: record.tenant.clone(),
        api_key: record.api_key.clone(),
        model_group: record.model_group.clone(),
        upstream: record.upstream.clone(),
        model: answered.map(|p| p.model.clone()),
        status: record.status,
        error: record.error.map(|e| e.code().into()),
        stream: record.stream,
        tokens: Tokens {
            prompt: usage.prompt_tokens,
            cached: usage.cached_tokens,
            cache_write: usage.cache_write_tokens,
            completion: usage.completion_tokens,
            reasoning: usage.reasoning_tokens,
        },
        // Unknown when an unpriced upstream worked on it; a call no upstream worked on (a
        // cache hit, a refusal) cost nothing.
        cost_micros: (!record.unpriced).then(|| record.cost_micros.unwrap_or(0)),
        saved_micros: saved.unwrap_or(0),
        extra_micros: record.extra_cost_micros,
        cache: if record.cache == Some(sluice_core::CacheLookup::Semantic) {
            CacheOutcome::Semantic
        } else if matches!(
            record.semantic,
            Some(sluice_core::SemanticLookup::Verify { .. })
        ) {
            CacheOutcome::SemanticVerify
        } else if hit {
            CacheOutcome::Exact
        } else if usage.cached_tokens > 0 {
            CacheOutcome::Provider
        } else {
            CacheOutcome::Miss
        },
        ttfb_ms: t
            .first_byte
            .map(|f| ms(f.saturating_duration_since(t.received))),
        total_ms: t.total().map_or(0, ms),
        attempts: u32::try_from(record.attempts.len()).unwrap_or(u32::MAX),
        hedges: count(sluice_core::AttemptKind::Hedge),
        retries: count(sluice_core::AttemptKind::Retry),
        // Set by the batch runner for an item's call.
        batch_item: None,
        currency: native.map(|(c, _)| Arc::from(c.as_str())),
        native_micros: native.map(|(_, m)| m),
        // Set by the call when its hold was kept in the ledger's database.
        hold: None,
        settled_in_ledger: false,
    }
}

#[cfg(test)]
mod tests;
