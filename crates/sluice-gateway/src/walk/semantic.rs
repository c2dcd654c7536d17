//! The semantic cache's step in a request's walk, after the exact cache missed: a question
//! (the newest user message, everything else matched exactly) is embedded and looked up in
//! its partition; an answer to a question meaning the same is served, and otherwise the call
//! is marked to store its own answer under the question. In the verified mode a would-be hit
//! may instead be sent upstream, its answer served and compared with the entry's (structured
//! answers exactly, text by meaning), which teaches the entry its threshold. The decisions are
//! `sluice-cache::semantic`'s; this step gathers the facts and records what it did.

use std::sync::Arc;

use rand::RngExt;
use sluice_cache::Directive;
use sluice_cache::semantic::agree::{self, Agreement};
use sluice_cache::semantic::{Lookup, Pending, Question};
use sluice_core::{ChatRequest, SemanticLookup};
use tokio::time::Instant;

use super::cache::Served;
use super::call::Call;
use crate::Gateway;
use crate::caches::{Semantic, ServedHit};

/// What the semantic cache did for a request, and its answer when it served one.
pub struct Looked {
    /// What it did.
    pub what: SemanticLookup,
    /// The answer it served.
    pub served: Option<Served>,
}

/// Looks `request` up by meaning: what the cache did (`None`: nothing to record), and the
/// answer it served, if any (when none, the call stores its answer under the question,
/// unless the client said `no-store`).
pub async fn consult(
    gw: &Gateway,
    sem: &Semantic,
    call: &mut Call,
    directive: Directive,
    tenant: Option<&str>,
    group: &str,
    request: &ChatRequest,
) -> Option<Looked> {
    let mode = sem.cache.mode(group)?;
    let looked = |what: SemanticLookup, served: Option<Served>| {
        gw.observers.telemetry.semantic(group, &what);
        Some(Looked { what, served })
    };
    if directive == Directive::Skip {
        return looked(SemanticLookup::Ineligible("no-store"), None);
    }
    let question = match Question::of(tenant, group, request, sem.cache.limits()) {
        Ok(q) => q,
        Err(why) => {
            return looked(SemanticLookup::Ineligible(why.label()), None);
        }
    };
    let embedded = match sem.embedder.embed_local(&question.text) {
        Some(v) => v,
        None => {
            let id = call.record().request_id.clone();
            let v = sem.embedder.embed(&[&question.text], id.as_str()).await;
            v.and_then(|mut v| v.pop().ok_or(sluice_embed::EmbedError::Empty))
        }
    };
    let vector = match embedded {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(error = %e, "the question could not be embedded; not cached by meaning");
            return looked(SemanticLookup::Ineligible(e.label()), None);
        }
    };
    let by_meaning = |question, vector, verifies| Pending {
        question,
        vector,
        verifies,
    };
    if directive == Directive::Refresh {
        call.store_by_meaning(by_meaning(question, vector, None));
        return looked(SemanticLookup::Ineligible("no-cache"), None);
    }
    let now = Instant::now();
    let u: f64 = sem.coins.lock().random();
    let what = match sem.cache.lookup(&question, group, mode, &vector, now, u) {
        Lookup::Hit { id, similarity } => {
            let stored = sem.cache.answer(question.partition, id)?;
            match stored.body_for(request.stream, request.include_usage) {
                Ok(body) => {
                    sem.served.insert(
                        call.record().request_id.clone(),
                        ServedHit {
                            group: Arc::from(group),
                            tenant: call.record().tenant.clone(),
                            partition: question.partition,
                            entry: id,
                            similarity,
                        },
                    );
                    gw.observers
                        .telemetry
                        .semantic_micros(group, "saved", stored.cost_micros);
                    let served = Served {
                        stored,
                        body,
                        stream: request.stream,
                    };
                    let hit = SemanticLookup::Hit {
                        entry: id,
                        similarity,
                    };
                    return looked(hit, Some(served));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "semantic answer not replayable");
                    call.store_by_meaning(by_meaning(question, vector, None));
                    return None;
                }
            }
        }
        Lookup::Miss { refused, best } => SemanticLookup::Miss {
            refused: refused.map(|m| m.label()),
            best,
        },
        // The route's verification budget is spent: a miss, counted as such.
        Lookup::Unverified { id, similarity } => SemanticLookup::Unverified {
            entry: id,
            similarity,
        },
        Lookup::Verify { id, similarity, p } => {
            // Asked upstream too; its answer is served and compared with the entry's.
            call.store_by_meaning(by_meaning(question, vector, Some((id, similarity, p))));
            return looked(
                SemanticLookup::Verify {
                    entry: id,
                    similarity,
                },
                None,
            );
        }
    };
    call.store_by_meaning(by_meaning(question, vector, None));
    looked(what, None)
}

/// Whether two answers agree, their texts embedded in process when they must be compared
/// by meaning (`Texts`: when that needs the embeddings upstream).
enum Agree {
    Known(bool),
    Texts(String, String),
}

fn agree(sem: &Semantic, fresh: &[u8], cached: &[u8]) -> Agree {
    match agree::compare(fresh, cached) {
        Agreement::Known(k) => Agree::Known(k),
        Agreement::ByMeaning(a, b) => {
            match (sem.embedder.embed_local(&a), sem.embedder.embed_local(&b)) {
                (Some(Ok(x)), Some(Ok(y))) => Agree::Known(agree::close(&x, &y)),
                (Some(_), Some(_)) => Agree::Known(false),
                _ => Agree::Texts(a, b),
            }
        }
    }
}

/// Two answer texts compared through the embeddings upstream; `None` when it failed (the
/// verification then teaches nothing).
async fn agree_remote(sem: &Semantic, a: &str, b: &str, request_id: &str) -> Option<bool> {
    match sem.embedder.embed(&[a, b], request_id).await {
        Ok(v) => match v.as_slice() {
            [x, y] => Some(agree::close(x, y)),
            _ => None,
        },
        Err(e) => {
            tracing::warn!(error = %e, "a verification's answers could not be compared");
            None
        }
    }
}

/// A call's complete answer `body` (bought for `cost`) under its question: stored; or, when
/// it verified an entry, compared with the entry's answer, which learns whether it was right
/// (and, when it was not, this answer is stored beside it). Whether the entry's answer was
/// right, when that is known before the call settles.
pub fn settle(
    gw: &Gateway,
    sem: &Semantic,
    record: &sluice_core::CallRecord,
    q: Pending,
    body: &bytes::Bytes,
    cost: u64,
    now: Instant,
) -> Option<bool> {
    let group = record.model_group.clone().unwrap_or_else(|| Arc::from(""));
    if q.verifies.is_some() {
        gw.observers
            .telemetry
            .semantic_micros(&group, "verification", cost);
    }
    if let Some((id, similarity, p)) = q.verifies
        && let Some(cached) = sem.cache.answer(q.question.partition, id)
    {
        let right = match agree(sem, body, &cached.body) {
            Agree::Known(right) => right,
            Agree::Texts(a, b) => {
                // Compared through the embeddings upstream, after the answer has gone out
                // (the record cannot wait for it; the metrics and the entry learn it).
                let sem = gw.caches.semantic.clone()?;
                let (telemetry, request_id) =
                    (gw.observers.telemetry.clone(), record.request_id.clone());
                let fresh = body.clone();
                tokio::spawn(async move {
                    let Some(right) = agree_remote(&sem, &a, &b, request_id.as_str()).await else {
                        return;
                    };
                    sem.cache
                        .verified(&group, (q.question.partition, id), similarity, right, p);
                    telemetry.semantic_verified(&group, right);
                    if !right {
                        sem.cache.insert(&q.question, q.vector, fresh, cost, now);
                    }
                });
                return None;
            }
        };
        sem.cache
            .verified(&group, (q.question.partition, id), similarity, right, p);
        gw.observers.telemetry.semantic_verified(&group, right);
        if !right {
            sem.cache
                .insert(&q.question, q.vector, body.clone(), cost, now);
        }
        return Some(right);
    }
    sem.cache
        .insert(&q.question, q.vector, body.clone(), cost, now);
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
