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
use http::{HeaderMap, HeaderValue};
use http_body_util::BodyExt;
use serde_json::Value;
use sluice_analysis::{ReviewCall, ReviewFailed, Reviewed, Reviewer};
use sluice_core::{ErrorKind, RequestId};
use sluice_ledger::Entry;
use sluice_providers::TIMEOUT_HEADER_NAME;
use tokio::time::Instant;

use crate::Gateway;
use crate::walk::{self, Known, auth::Caller};

/// The least a refused review waits before it is sent again.
const AGAIN_AFTER: Duration = Duration::from_secs(1);

/// Sends reviews through the walk of `gw` as `caller`, in lane `lane`.
pub struct WalkReviewer {
    gw: Arc<Gateway>,
    caller: Caller,
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
    pub fn new(gw: Arc<Gateway>, caller: Caller, lane: usize) -> Self {
        Self {
            gw,
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

/// One send of a review: its status, body, `Retry-After` and ledger row.
struct Sent {
    status: http::StatusCode,
    body: Bytes,
    retry_after: Option<Duration>,
    /// The upstream that answered (`x-sluice-upstream`; `none` when none did).
    upstream: Option<String>,
    entry: Option<Entry>,
}

async fn send(
    gw: &Arc<Gateway>,
    caller: Caller,
    lane: usize,
    call: &ReviewCall,
    left: Option<Duration>,
) -> Result<Sent, ReviewFailed> {
    let mut headers = HeaderMap::new();
    if let Some(t) = left {
        let ms = t.as_millis().clamp(1, u128::from(u32::MAX)) as u64;
        headers.insert(TIMEOUT_HEADER_NAME, HeaderValue::from(ms));
    }
    headers.insert(
        http::HeaderName::from_static(walk::route::TASK_HEADER),
        HeaderValue::from_static(sluice_analysis::review::TASK),
    );
    let (tx, rx) = tokio::sync::oneshot::channel();
    let known = Known {
        caller,
        lane,
        settles_to: tx,
        headers,
    };
    let body = Bytes::from(call.body.to_string());
    let resp = walk::serve_known(
        gw.clone(),
        body,
        sluice_ingress::Dialect::Chat,
        RequestId::generate(),
        known,
    )
    .await;
    let status = resp.status();
    let retry_after = walk::retry_after(&resp);
    let upstream = resp
        .headers()
        .get("x-sluice-upstream")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| ReviewFailed(format!("the answer could not be read: {e}")))?
        .to_bytes();
    Ok(Sent {
        status,
        body,
        retry_after,
        upstream,
        entry: rx.await.ok(),
    })
}

/// The kind of a refusal the gateway made before any upstream saw the call, if `sent` is
/// one: its error code is one of sluice's own refusals, and no upstream answered.
fn unsent(sent: &Sent) -> Option<ErrorKind> {
    if sent.status.is_success() || sent.upstream.as_deref().is_some_and(|u| u != "none") {
        return None;
    }
    let json: Value = serde_json::from_slice(&sent.body).ok()?;
    let code = json["error"]["code"].as_str()?;
    [
        ErrorKind::Overloaded,
        ErrorKind::QuotaExceeded,
        ErrorKind::ShuttingDown,
    ]
    .into_iter()
    .find(|k| k.code() == code)
}

impl Reviewer for WalkReviewer {
    fn review(&self, call: ReviewCall) -> BoxFuture<'static, Result<Reviewed, ReviewFailed>> {
        let gw = self.gw.clone();
        let caller = self.caller.clone();
        let lane = self.lane;
        let item = self.item.clone();
        let interrupted = self.interrupted.clone();
        async move {
            let until = call.timeout.map(|t| Instant::now() + t);
            let sent = loop {
                let left = until.map(|u| u.saturating_duration_since(Instant::now()));
                let mut sent = send(&gw, caller.clone(), lane, &call, left).await?;
                let refused = unsent(&sent);
                let Some(kind) = refused else {
                    break sent;
                };
                // A refusal's row is written as any other, under no item key (the review's
                // own row, when it is answered, is the one that carries it).
                if let (Some(ledger), Some(entry)) = (gw.ledger(), sent.entry.take()) {
                    ledger.record(entry);
                }
                let wait = sent.retry_after.unwrap_or(AGAIN_AFTER).max(AGAIN_AFTER);
                let past = until.is_some_and(|u| Instant::now() + wait >= u);
                if kind == ErrorKind::ShuttingDown {
                    interrupted.store(true, Ordering::Relaxed);
                }
                if kind == ErrorKind::ShuttingDown || past {
                    return Err(ReviewFailed(format!(
                        "{}: refused by the gateway ({})",
                        sent.status.as_u16(),
                        kind.code()
                    )));
                }
                tokio::time::sleep(wait).await;
            };
            // The call's ledger row comes back here rather than to the ledger: the review is
            // billed to its caller as any call is, and as part of its item in a batch.
            let tokens = match (gw.ledger(), sent.entry) {
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
            let json: Value = serde_json::from_slice(&sent.body).unwrap_or(Value::Null);
            if !sent.status.is_success() {
                let message = json["error"]["message"].as_str().unwrap_or("no message");
                return Err(ReviewFailed(format!(
                    "{}: {message}",
                    sent.status.as_u16()
                )));
            }
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
