//! Reviews sent through the gateway's own walk, as the caller who asked for the analysis,
//! each billed to that caller's tenant in the ledger as any call is. A review the gateway
//! refused unsent (its own overload, the tenant's rate quota for now) waits its
//! `Retry-After` and is sent again while the document's deadline allows: accepted work is
//! slowed, not dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::Value;
use sluice_analysis::{ReviewCall, ReviewFailed, Reviewed, Reviewer};
use sluice_core::{ErrorKind, RequestId};
use tokio::time::Instant;

use crate::walk::auth::Identity;
use crate::walk::entry::{Answered, Asks, Caller, Refused, Request, Walker};

/// The least a refused review waits before it is sent again.
const AGAIN_AFTER: Duration = Duration::from_secs(1);

/// Sends reviews through the walk as `caller`, in lane `lane`.
pub struct WalkReviewer {
    walker: Walker,
    caller: Identity,
    lane: usize,
    /// The ledger key of the batch item whose reviews these are: each review's row carries
    /// `KEY/CLAUSE` and is committed before the review counts, so that an item sent again
    /// after a crash bills each of its reviews once.
    item: Option<String>,
    /// Set when a review could not end as it should: the gateway is shutting down, or a
    /// review's row could not be committed. The item must not end; it is sent again.
    interrupted: Arc<AtomicBool>,
}

impl WalkReviewer {
    /// A reviewer for `caller`'s documents, its calls in `lane`.
    pub fn new(walker: Walker, caller: Identity, lane: usize) -> Self {
        Self {
            walker,
            caller,
            lane,
            item: None,
            interrupted: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Its reviews billed as parts of batch item `key`.
    pub(crate) fn for_item(mut self, key: String) -> Self {
        self.item = Some(key);
        self
    }

    /// Whether a review was cut short by a shutdown or an unwritable bill.
    pub(crate) fn interrupted(&self) -> bool {
        self.interrupted.load(Ordering::Relaxed)
    }
}

/// Sends one review through the walk, with what is left of its time.
async fn send(
    walker: &Walker,
    identity: Identity,
    lane: usize,
    call: &ReviewCall,
    left: Option<Duration>,
) -> Result<Answered, Box<Refused>> {
    let mut asks = Asks::default().task(sluice_analysis::review::TASK);
    if let Some(t) = left {
        asks = asks.timeout(t.max(Duration::from_millis(1)));
    }
    let request = Request::ready(
        RequestId::generate(),
        sluice_ingress::Dialect::Chat,
        Bytes::from(call.body.to_string()),
    )
    .asking(asks);
    walker.run(Caller::Known { identity, lane }, request).await
}

impl Reviewer for WalkReviewer {
    fn review(&self, call: ReviewCall) -> BoxFuture<'static, Result<Reviewed, ReviewFailed>> {
        let walker = self.walker.clone();
        let caller = self.caller.clone();
        let lane = self.lane;
        let item = self.item.clone();
        let interrupted = self.interrupted.clone();
        async move {
            let until = call.timeout.map(|t| Instant::now() + t);
            let sent = loop {
                let left = until.map(|u| u.saturating_duration_since(Instant::now()));
                let mut refused = match send(&walker, caller.clone(), lane, &call, left).await {
                    Ok(answered) => break Ok(answered.complete().await),
                    Err(refused) => refused,
                };
                let Some(kind) = refused.unsent() else {
                    break Err(refused);
                };
                // A refusal's row is written as any other, under no item key (the review's
                // own row, when it is answered, is the one that carries it).
                if let (Some(ledger), Some(entry)) = (walker.gateway().ledger(), refused.entry.take()) {
                    ledger.record(entry);
                }
                let wait = refused.retry_after().unwrap_or(AGAIN_AFTER).max(AGAIN_AFTER);
                let past = until.is_some_and(|u| Instant::now() + wait >= u);
                if kind == ErrorKind::ShuttingDown {
                    interrupted.store(true, Ordering::Relaxed);
                }
                if kind == ErrorKind::ShuttingDown || past {
                    return Err(ReviewFailed(format!(
                        "{}: refused by the gateway ({})",
                        refused.status(),
                        kind.code()
                    )));
                }
                tokio::time::sleep(wait).await;
            };
            let entry = match &sent {
                Ok(done) => done.entry.clone(),
                Err(refused) => refused.entry.clone(),
            };
            // The call's ledger row comes back here rather than to the ledger: the review is
            // billed to its caller as any call is, and as part of its item in a batch.
            let tokens = match (walker.gateway().ledger(), entry) {
                (Some(ledger), Some(mut entry)) => {
                    let tokens = entry.tokens;
                    match &item {
                        Some(key) => {
                            entry.batch_item = Some(format!("{key}/{}", call.id).into());
                            if let Err(e) = ledger.append(entry).await {
                                tracing::error!(error = %e, item = %key, "ledger: a review's row could not be written; the document will be analysed again");
                                interrupted.store(true, Ordering::Relaxed);
                            }
                        }
                        None => ledger.record(entry),
                    }
                    Some(tokens)
                }
                (_, entry) => entry.map(|e| e.tokens),
            };
            let done = match sent {
                Ok(done) => done,
                Err(refused) => {
                    let json: Value =
                        serde_json::from_slice(&refused.body()).unwrap_or(Value::Null);
                    let message = json["error"]["message"].as_str().unwrap_or("no message");
                    return Err(ReviewFailed(format!("{}: {message}", refused.status())));
                }
            };
            let json: Value = serde_json::from_slice(&done.body).unwrap_or(Value::Null);
            let content = json["choices"][0]["message"]["content"]
                .as_str()
                .ok_or_else(|| ReviewFailed("the answer has no message content".into()))?
                .to_string();
            // The ledger's row when there is one, else the answer's own usage.
            let usage = &json["usage"];
            let read = |v: &Value| v.as_u64().unwrap_or(0);
            Ok(match tokens {
                Some(t) if t.prompt + t.completion > 0 => Reviewed {
                    content,
                    prompt_tokens: t.prompt,
                    cached_tokens: t.cached,
                    completion_tokens: t.completion,
                },
                _ => Reviewed {
                    content,
                    prompt_tokens: read(&usage["prompt_tokens"]),
                    cached_tokens: read(&usage["prompt_tokens_details"]["cached_tokens"]),
                    completion_tokens: read(&usage["completion_tokens"]),
                },
            })
        }
        .boxed()
    }
}
