//! Reviews sent through the gateway's own walk, as the caller who asked for the analysis,
//! each billed to that caller's tenant in the ledger as any call is.

use std::sync::Arc;

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use http::{HeaderMap, HeaderValue};
use http_body_util::BodyExt;
use serde_json::Value;
use sluice_analysis::{ReviewCall, ReviewFailed, Reviewed, Reviewer};
use sluice_core::RequestId;
use sluice_providers::TIMEOUT_HEADER_NAME;

use crate::Gateway;
use crate::walk::{self, Known, auth::Caller};

/// Sends reviews through the walk of `gw` as `caller`, in lane `lane`.
pub struct WalkReviewer {
    gw: Arc<Gateway>,
    caller: Caller,
    lane: usize,
}

impl WalkReviewer {
    /// A reviewer for `caller`'s documents, its calls in `lane`.
    pub fn new(gw: Arc<Gateway>, caller: Caller, lane: usize) -> Self {
        Self { gw, caller, lane }
    }
}

impl Reviewer for WalkReviewer {
    fn review(&self, call: ReviewCall) -> BoxFuture<'static, Result<Reviewed, ReviewFailed>> {
        let gw = self.gw.clone();
        let caller = self.caller.clone();
        let lane = self.lane;
        async move {
            let mut headers = HeaderMap::new();
            if let Some(t) = call.timeout {
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
            let id = RequestId::generate();
            let body = Bytes::from(call.body.to_string());
            let resp =
                walk::serve_known(gw.clone(), body, sluice_ingress::Dialect::Chat, id, known).await;
            let status = resp.status();
            let bytes = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| ReviewFailed(format!("the answer could not be read: {e}")))?
                .to_bytes();
            // The call's ledger row comes back here rather than to the ledger: the review is
            // billed to its caller as any call is.
            let tokens = rx.await.ok().map(|entry| {
                let tokens = entry.tokens;
                if let Some(ledger) = gw.ledger() {
                    ledger.record(entry);
                }
                tokens
            });
            let json: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            if !status.is_success() {
                let message = json["error"]["message"].as_str().unwrap_or("no message");
                return Err(ReviewFailed(format!("{}: {message}", status.as_u16())));
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
