//! The semantic cache's step in a request's walk, after the exact cache missed: a question
//! (the newest user message, everything else matched exactly) is embedded and looked up in
//! its partition; an answer to a question meaning the same is served, and otherwise the call
//! is marked to store its own answer under the question. The decisions are
//! `sluice-cache::semantic`'s; this step gathers the facts and records what it did.

use std::sync::Arc;

use http::HeaderMap;
use sluice_cache::Directive;
use sluice_cache::semantic::{Lookup, Question, SemanticCache};
use sluice_core::{CacheLookup, ChatRequest, SemanticLookup};
use sluice_embed::Embedder;
use tokio::time::Instant;

use super::cache::Served;
use super::call::Call;
use crate::Gateway;

/// The semantic cache and the embedder that turns questions into vectors.
#[derive(Debug)]
pub struct Semantic {
    /// The entries and their policy.
    pub cache: SemanticCache,
    /// The embedder.
    pub embedder: Arc<Embedder>,
}

/// Looks `request` up by meaning; a served answer, or `None` (the call then stores its
/// answer under the question, unless the client said `no-store`).
pub fn consult(
    gw: &Gateway,
    sem: &Semantic,
    call: &mut Call,
    headers: &HeaderMap,
    tenant: Option<&str>,
    group: &str,
    request: &ChatRequest,
) -> Option<Served> {
    let record = |call: &mut Call, what: SemanticLookup| {
        gw.telemetry.semantic(group, &what);
        call.record_mut().semantic = Some(what);
    };
    let directive = Directive::of(headers);
    if directive == Directive::Skip {
        record(call, SemanticLookup::Ineligible("no-store"));
        return None;
    }
    let question = match Question::of(tenant, group, request, sem.cache.ceiling()) {
        Ok(q) => q,
        Err(why) => {
            record(call, SemanticLookup::Ineligible(why.label()));
            return None;
        }
    };
    let vector = match sem.embedder.embed(&question.text) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(error = %e, "the question could not be embedded; not cached by meaning");
            record(call, SemanticLookup::Ineligible("no_embedding"));
            return None;
        }
    };
    if directive == Directive::Refresh {
        record(call, SemanticLookup::Ineligible("no-cache"));
        call.store_by_meaning(question, vector);
        return None;
    }
    let now = Instant::now();
    match sem.cache.lookup(&question, &vector, now, 0.0) {
        Lookup::Hit { id, similarity } => {
            let stored = sem.cache.answer(question.partition, id)?;
            match stored.body_for(request.stream, request.include_usage) {
                Ok(body) => {
                    record(
                        call,
                        SemanticLookup::Hit {
                            entry: id,
                            similarity,
                        },
                    );
                    call.record_mut().cache = Some(CacheLookup::Semantic);
                    return Some(Served {
                        stored,
                        body,
                        stream: request.stream,
                    });
                }
                Err(e) => tracing::warn!(error = %e, "semantic answer not replayable"),
            }
        }
        Lookup::Miss { refused, best } => record(
            call,
            SemanticLookup::Miss {
                refused: refused.map(|m| m.label()),
                best,
            },
        ),
        // The verified mode's glue is not built yet: such an index is never configured.
        Lookup::Verify { .. } => {}
    }
    call.store_by_meaning(question, vector);
    None
}

/// The `x-sluice-cache` value of a semantic hit: which entry, at what similarity.
pub fn header(what: &SemanticLookup) -> Option<String> {
    match what {
        SemanticLookup::Hit { entry, similarity } => Some(format!(
            "semantic; entry={entry}; similarity={similarity:.3}"
        )),
        _ => None,
    }
}
